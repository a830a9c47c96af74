"""Checks of user-given numbers, one wording for every entry point.

Imports nothing heavy: the command line runs these before TensorFlow loads.

Example:
>>> check_int("batch_size", 64)
64
>>> check_int("max_tokens", None, optional=True) is None
True
>>> check_int("batch_size", 0)
Traceback (most recent call last):
...
ValueError: batch_size must be a positive int; received 0.
"""


def check_int(name, value, minimum=1, optional=False, hint=""):
    """`value` if it is an int >= `minimum` (None too when `optional`), else a ValueError.

    Args:
        name: how the caller knows the value (`"batch_size"`, `"--max-tokens"`).
        value: what was received.
        minimum: the least value allowed (1).
        optional: None is allowed (and returned) too.
        hint: a sentence appended to the message (what the value means).
    """
    if optional and value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        expected = ("a positive int" if minimum == 1 else f"an int >= {minimum}") + (
            " or None" if optional else "")
        raise ValueError(f"{name} must be {expected}; received {value!r}."
                         + (f" {hint}" if hint else ""))
    return value


def check_fraction(name, value):
    """`float(value)` if it is in [0, 1) (a dropout rate), else a ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be in [0, 1); received {value!r}.")
    return float(value)


def check_choice(name, value, choices):
    """`value` if it is one of `choices`, else a ValueError quoting them and `value`.

    Example:
    >>> check_choice("implementation", "auto", ("auto", "batched_loop"))
    'auto'
    """
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; received "
                         f"{value!r}.")
    return value


#: Keys every Keras layer's config may hold besides its own arguments.
_BASE_CONFIG_KEYS = frozenset({"name", "trainable", "dtype", "autocast",
                               "activity_regularizer", "input_shape", "batch_input_shape",
                               "batch_size"})


def check_config_keys(cls, config):
    """Refuses a config (of a `.keras` file, `get_config()`) holding keys that `cls`'s
    constructor does not take: a file written by a newer keras-elmo. One line naming the
    keys and what to do, instead of Keras' error or a silently ignored setting.

    Example:
    >>> check_config_keys(dict, {})  # nothing to refuse
    """
    import inspect

    from keras_elmo import __version__

    known = set(inspect.signature(cls.__init__).parameters) | _BASE_CONFIG_KEYS
    unknown = sorted(set(config) - known)
    if unknown:
        raise ValueError(f"this {cls.__name__} was saved by a newer keras-elmo: its config "
                         f"has {', '.join(unknown)}, which keras-elmo {__version__} does not "
                         "know; expected a file of this version or older (pip install -U "
                         "keras-elmo to read it).")
