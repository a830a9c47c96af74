"""Which Keras backend a process runs, and TensorFlow for what needs it by nature.

keras-elmo's models run on Keras' TensorFlow, JAX and PyTorch backends; so do `import
keras_elmo`, `batch_to_ids`, the weight files, the published models and `keras-elmo embed`
and `neighbors`. What works on TensorFlow's own machinery needs TensorFlow installed,
whatever the backend: training (tf.data, tf.distribute), the SavedModel export, string
tensors (`ElmoLayer`'s string inputs, the `unicode-script` tokenizer). Each asks for it
with `require_tensorflow(what)` before anything else, which raises one line naming the
extra that installs it.

The backend is read as Keras reads it when imported (`KERAS_BACKEND`, else the `"backend"`
of `$KERAS_HOME/keras.json` or `~/.keras/keras.json`, else TensorFlow), so the command line
knows it before it imports Keras. This module imports neither TensorFlow nor Keras.

Example:
>>> configured_backend()  # with KERAS_BACKEND=jax  # doctest: +SKIP
'jax'
>>> require_tensorflow("keras-elmo train")  # in an environment without TensorFlow  # doctest: +SKIP
Traceback (most recent call last):
...
keras_elmo.process.keras_backend.MissingPackageError: keras-elmo train needs TensorFlow, ...
"""

import importlib.util
import json
import os
import sys

#: The Keras backends keras-elmo's models run on, and the extra of pyproject.toml that
#: installs each (`pip install "keras-elmo[jax]"`).
BACKENDS = ("tensorflow", "jax", "torch")
#: The command that installs TensorFlow and tensorflow-text, quoted by every error here.
TENSORFLOW_INSTALL = 'pip install "keras-elmo[tensorflow]"'
#: Keras' backend when nothing names one.
_KERAS_DEFAULT = "tensorflow"


class MissingPackageError(ModuleNotFoundError):
    """A package the request needs is not installed; the message is one line that says
    which and how to install it (the command line prints it and exits 2)."""

    exit_code = 2


def installed(module):
    """True if the top-level module `module` (`"tensorflow"`, `"jax"`, ...) can be imported;
    nothing is imported."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a finder that refuses it; a module without a spec
        return False


def configured_backend():
    """`(name, source)`: the Keras backend this process runs (or will, once it imports Keras)
    and where that was chosen, e.g. `("jax", "KERAS_BACKEND=jax")`.

    Read as Keras reads it at import: `KERAS_BACKEND`, else the `"backend"` of Keras'
    config file, else TensorFlow, Keras' default. Once Keras is imported, its own answer.
    """
    if sys.modules.get("keras") is not None:
        return sys.modules["keras"].config.backend(), "Keras, imported"
    name = os.environ.get("KERAS_BACKEND")
    if name:
        return name, f"KERAS_BACKEND={name}"
    path = os.path.join(_keras_home(), "keras.json")
    try:
        with open(path, encoding="utf-8") as handle:
            name = json.load(handle).get("backend")
    except (OSError, ValueError, AttributeError):  # no file, not JSON, not an object
        name = None
    if name:
        return name, path
    return _KERAS_DEFAULT, "Keras' default: no KERAS_BACKEND"


def require_tensorflow(what, text=False):
    """Raises `MissingPackageError` unless TensorFlow (and, with `text`, tensorflow-text) is
    installed. `what` names the request in the message: "keras-elmo train", "the
    unicode-script tokenizer", ...

    Example message:
        keras-elmo train needs TensorFlow, which is not installed (Keras backend jax):
        pip install "keras-elmo[tensorflow]"  (one line)
    """
    missing = [name for name, module in (("TensorFlow", "tensorflow"),
                                         ("tensorflow-text", "tensorflow_text"))
               if (text or module == "tensorflow") and not installed(module)]
    if missing:
        backend, _ = configured_backend()
        raise MissingPackageError(
            f"{what} needs {' and '.join(missing)}, which "
            f"{'is' if len(missing) == 1 else 'are'} not installed (Keras backend {backend}): "
            f"{TENSORFLOW_INSTALL}", name=missing[0].lower().replace("-", "_"))


def require_backend(what, allowed=BACKENDS):
    """The name of the configured Keras backend, checked before Keras is imported: one of
    `allowed`, and installed.

    Raises:
        ValueError: the backend is not one of `allowed` (the message names where it was
            chosen and how to choose another).
        MissingPackageError: its package is not installed.
    """
    name, source = configured_backend()
    if name not in allowed:
        choice = (f"KERAS_BACKEND={allowed[0]}" if len(allowed) == 1 else
                  "KERAS_BACKEND set to one of them")
        names = " or ".join(filter(None, (", ".join(allowed[:-1]), allowed[-1])))
        raise ValueError(f"{what} runs on Keras' {names} backend; received "
                         f"{name} ({source}): run it with {choice}.")
    if not installed(name):
        usable = [other for other in allowed if other != name and installed(other)]
        instead = (f", or set KERAS_BACKEND to an installed one ({', '.join(usable)})"
                   if usable else "")
        raise MissingPackageError(
            f"{what} runs on Keras' {name} backend ({source}), which is not installed: "
            f'pip install "keras-elmo[{name}]"{instead}.', name=name)
    return name


def describe_backend():
    """One phrase for a start-up line: Keras' version, its backend's and the device kind,
    e.g. `"Keras 3.15.0 on jax 0.10.2 (cpu)"`. Imports Keras (and so its backend)."""
    import keras

    name = keras.config.backend()
    module = importlib.import_module(name)
    return (f"Keras {keras.__version__} on {name} {getattr(module, '__version__', '')} "
            f"({_device_kind(name, module)})")


def _device_kind(name, module):
    """`"cpu"`, `"gpu"`, ...: where the backend runs a model by default."""
    if name == "jax":
        return module.default_backend()
    if name == "torch":
        return "cuda" if module.cuda.is_available() else "cpu"
    if name == "tensorflow":
        return "gpu" if module.config.list_physical_devices("GPU") else "cpu"
    return "cpu"


def _keras_home():
    """Keras' folder for keras.json, found as Keras finds it."""
    if "KERAS_HOME" in os.environ:
        return os.environ["KERAS_HOME"]
    base = os.path.expanduser("~")
    return os.path.join(base if os.access(base, os.W_OK) else "/tmp", ".keras")
