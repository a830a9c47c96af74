"""JSON files and the typed fields of options.json: one clear error for each bad value.

`read_json` parses a file (a missing file or bad JSON: one line naming it); the `json_*`
helpers check one key's value (`json_int("lstm.dim", 12.9)` refuses a float, a bool or a
string, naming the key). `keras_elmo.formats.options` reads options.json with them; the
EFML reader, the mix-weights file and the training config read their JSON with `read_json`.

Example:
>>> json_filters([[1, 32], [2, 64]])
((1, 32), (2, 64))
"""

import json
import os


def read_json(path, what, expected):
    """Parses a JSON file; a missing file or bad JSON becomes one clear error.

    Args:
        path: the file.
        what: how the error names the file (e.g. `"options file"`).
        expected: what the file should be, for the missing-file message.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{what} not found: {path} (expected {expected}).")
    with open(path, encoding="utf-8") as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as error:
            raise ValueError(f"{what} {path} is not valid JSON: {error.msg} at line "
                             f"{error.lineno} column {error.colno}.") from None
        except UnicodeDecodeError as error:
            raise ValueError(f"{what} {path} is not UTF-8 text ({error.reason} at byte "
                             f"{error.start}).") from None


def json_int(key, value):
    """A JSON integer (not a bool, a float such as 12.9 or a string such as "12")."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"options.json key {key!r} must be an integer; received {value!r} "
                         f"({type(value).__name__}).")
    return value


def json_bool(key, value):
    """A JSON `true` / `false` (the string "false" is refused, not read as true)."""
    if not isinstance(value, bool):
        raise ValueError(f"options.json key {key!r} must be true or false; received {value!r} "
                         f"({type(value).__name__}).")
    return value


def json_str(key, value):
    if not isinstance(value, str):
        raise ValueError(f"options.json key {key!r} must be a string; received {value!r} "
                         f"({type(value).__name__}).")
    return value


def json_number(key, value):
    """A JSON number, as float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"options.json key {key!r} must be a number; received {value!r} "
                         f"({type(value).__name__}).")
    return float(value)


def json_key(values, section, name):
    """`values[name]`; a KeyError naming `section.name` when it is missing."""
    if name not in values:
        raise KeyError(f"{section}.{name}")
    return values[name]


def json_object(key, value):
    """None (key absent) or a JSON object."""
    if value is not None and not isinstance(value, dict):
        raise ValueError(f"options.json key {key!r} must be an object; received {value!r} "
                         f"({type(value).__name__}).")
    return value


def check_id(name, value, rows):
    """A raw id of a table of `rows` rows: an int in [0, rows - 1]."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < rows:
        raise ValueError(f"{name} must be an id in [0, {rows - 1}] (a row of its table of "
                         f"{rows}); received {value!r}.")


def json_optional_number(key, value):
    """None (no clip) or a JSON number, as float."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"options.json key {key!r} must be a number or null; received "
                         f"{value!r} ({type(value).__name__}).")
    return float(value)


def json_filters(value):
    """`[[width, n_filters], ...]` of integers -> tuple of pairs."""
    if not isinstance(value, list):
        raise ValueError("options.json key 'char_cnn.filters' must be a list of [width, "
                         f"n_filters] pairs; received {value!r} ({type(value).__name__}).")
    pairs = []
    for index, pair in enumerate(value):
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2):
            raise ValueError(f"options.json key 'char_cnn.filters' entry {index} must be a "
                             f"[width, n_filters] pair; received {pair!r}.")
        pairs.append((json_int(f"char_cnn.filters[{index}][0]", pair[0]),
                      json_int(f"char_cnn.filters[{index}][1]", pair[1])))
    return tuple(pairs)
