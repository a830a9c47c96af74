"""The environment variables of pretrained models, read and checked in one place.

    KERAS_ELMO_CACHE=DIR      the cache: models in DIR/models/NAME (the variable already
                              holds keras-elmo's other downloads); unset: the Keras
                              convention, $KERAS_HOME/models/keras-elmo/NAME, KERAS_HOME
                              defaulting to ~/.keras
    KERAS_ELMO_OFFLINE=1      the cache only, no network (1/true/yes/on; 0/false/no/off or
                              empty: online). Unset, HF_HUB_OFFLINE (Hugging Face's habit) is
                              read the same way; KERAS_ELMO_OFFLINE wins when set
    KERAS_ELMO_MIRROR=URL     every catalog URL's scheme and host replaced by URL, its path
                              kept (an organisation's artifact server); a URL given by hand
                              is looked for there first, then fetched as given
    KERAS_ELMO_CATALOG=FILE   a catalog of the same schema over the package's
    KERAS_ELMO_DOWNLOAD_TIMEOUT=SECONDS
                              how long a server may stay silent (connecting or sending)
                              before the attempt counts as failed (default 30)

A value that is not understood is one `ValueError` line naming the variable. Standard
library only.

Example:
>>> os.environ["KERAS_ELMO_OFFLINE"] = "1"  # doctest: +SKIP
>>> is_offline()  # doctest: +SKIP
True
"""

import os
import urllib.parse

CACHE_VARIABLE = "KERAS_ELMO_CACHE"
OFFLINE_VARIABLE = "KERAS_ELMO_OFFLINE"
#: Read when OFFLINE_VARIABLE is unset: the same switch of the Hugging Face hub.
HF_OFFLINE_VARIABLE = "HF_HUB_OFFLINE"
MIRROR_VARIABLE = "KERAS_ELMO_MIRROR"
CATALOG_VARIABLE = "KERAS_ELMO_CATALOG"
TIMEOUT_VARIABLE = "KERAS_ELMO_DOWNLOAD_TIMEOUT"
#: Seconds a server may stay silent before an attempt fails (TIMEOUT_VARIABLE overrides).
DEFAULT_TIMEOUT_SECONDS = 30.0
#: How to go on after a storage fault in the cache (the end of its `StorageError` line).
CACHE_THEN = (f"run the same command again ({CACHE_VARIABLE}=DIR puts the model cache "
              "elsewhere)")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")


def cache_root(environ=None):
    """The folder holding one subfolder per model (module docstring).

    Example:
    >>> cache_root({"KERAS_ELMO_CACHE": "/data/cache"})
    '/data/cache/models'
    >>> cache_root({"KERAS_HOME": "/opt/keras"})
    '/opt/keras/models/keras-elmo'
    """
    environ = os.environ if environ is None else environ
    if environ.get(CACHE_VARIABLE):
        return os.path.join(os.path.expanduser(environ[CACHE_VARIABLE]), "models")
    keras_home = environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    return os.path.join(os.path.expanduser(keras_home), "models", "keras-elmo")


def is_offline(environ=None):
    """Whether downloads are off (module docstring).

    Raises:
        ValueError: a value that is neither true nor false (the line names the variable).
    """
    environ = os.environ if environ is None else environ
    for variable in (OFFLINE_VARIABLE, HF_OFFLINE_VARIABLE):
        if variable in environ:
            value = environ[variable].strip().lower()
            if value in _TRUE:
                return True
            if value in _FALSE:
                return False
            raise ValueError(f"{variable}={environ[variable]!r} is not understood; expected 1 "
                             "(cache only) or 0 (downloads allowed).")
    return False


def offline_variable(environ=None):
    """The variable that made `is_offline` true (for the line saying so)."""
    environ = os.environ if environ is None else environ
    return OFFLINE_VARIABLE if OFFLINE_VARIABLE in environ else HF_OFFLINE_VARIABLE


def mirror(environ=None):
    """The mirror's base URL without a trailing slash, or None.

    Raises:
        ValueError: not an http(s) URL with a host.
    """
    environ = os.environ if environ is None else environ
    value = environ.get(MIRROR_VARIABLE, "").strip()
    if not value:
        return None
    parts = urllib.parse.urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query:
        raise ValueError(f"{MIRROR_VARIABLE}={value!r} is not a mirror URL; expected "
                         "http(s)://HOST[:PORT][/PATH], whose path goes in front of each "
                         "catalog URL's path.")
    return value.rstrip("/")


def timeout_seconds(environ=None):
    """Seconds a server may stay silent (module docstring).

    Raises:
        ValueError: not a number > 0.
    """
    environ = os.environ if environ is None else environ
    value = environ.get(TIMEOUT_VARIABLE, "").strip()
    if not value:
        return DEFAULT_TIMEOUT_SECONDS
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0 or seconds == float("inf"):
        raise ValueError(f"{TIMEOUT_VARIABLE}={value!r} is not understood; expected seconds, "
                         "a number > 0.")
    return seconds
