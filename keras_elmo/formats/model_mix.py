"""A model's trained scalar mix: a `scalar_mix.json` file, or the mix a TF Hub module holds.

The mix `gamma * sum_j softmax(s)_j h_j` is trained per task (docs/model.md section 5), so a
biLM's weight file holds none. Two places carry one: `scalar_mix.json` beside the weights
(`keras_elmo.export.save_mix_weights` writes it) and a TF1 Hub module, whose `elmo` output
is its own trained mix (`aggregation/weights`, `aggregation/scaling` in Google's modules).
`model_mix(files, num_layers)` reads whichever the model has; the export, the embedder and
`ElmoLayer.from_preset` start from it.

File format (one entry of `scalar_parameters` per biLM layer, token layer first):

    {"scalar_parameters": [0.1, -0.3, 0.2], "gamma": 1.7, "do_layer_norm": false}

Example:
>>> mix = read_mix_file("runs/ner/scalar_mix.json", num_layers=3)  # doctest: +SKIP
>>> mix.scalar_parameters, mix.gamma  # doctest: +SKIP
((0.1, -0.3, 0.2), 1.7)
"""

import dataclasses
import math
import os

from keras_elmo.formats.json_fields import read_json


@dataclasses.dataclass(frozen=True)
class TrainedMix:
    """The values of a trained scalar mix.

    Attributes:
        scalar_parameters: tuple of floats `s`, one per biLM layer (softmax taken at use).
        gamma: float.
        do_layer_norm: bool, each layer normalised before mixing.
        source: str, where it was read (a file, or `"TF Hub module DIR"`).
    """

    scalar_parameters: tuple
    gamma: float = 1.0
    do_layer_norm: bool = False
    source: str = None


def read_mix_file(path, num_layers):
    """The `TrainedMix` of a `scalar_mix.json`.

    Args:
        path: the JSON file.
        num_layers: int, `L + 1` of the biLM it will mix.

    Raises:
        FileNotFoundError: no file at `path`.
        ValueError: bad JSON, missing keys, non-finite numbers, or a number of
            `scalar_parameters` that differs from `num_layers` (one line).
    """
    path = os.fspath(path)
    data = read_json(path, "mix weights file",
                     'a JSON file {"scalar_parameters": [...], "gamma": ...}')
    if not isinstance(data, dict) or "scalar_parameters" not in data:
        found = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise ValueError(f"mix weights file {path} must hold an object with "
                         f"'scalar_parameters' (and optionally 'gamma', 'do_layer_norm'); "
                         f"found {found}.")
    try:
        scalars = tuple(float(v) for v in data["scalar_parameters"])
        gamma = float(data.get("gamma", 1.0))
    except (TypeError, ValueError):
        raise ValueError(f"mix weights file {path}: 'scalar_parameters' must be a list of "
                         f"numbers and 'gamma' a number; received {data!r}.") from None
    do_layer_norm = data.get("do_layer_norm", False)
    if not isinstance(do_layer_norm, bool):
        raise ValueError(f"mix weights file {path}: 'do_layer_norm' must be true or false; "
                         f"received {do_layer_norm!r}.")
    return _checked(TrainedMix(scalars, gamma, do_layer_norm, path), num_layers,
                    f"mix weights file {path}")


def model_mix(files, num_layers):
    """The trained mix a model carries (`TrainedMix`), or None.

    Args:
        files: `keras_elmo.formats.model_files.ModelFiles`: its `mix_file`, else a TF Hub
            module's own mix.
        num_layers: int, `L + 1`.
    """
    if files.mix_file is not None:
        return read_mix_file(files.mix_file, num_layers)
    if files.module_dir is not None:
        from keras_elmo.formats.tfhub_module import read_tfhub_module

        where = f"TF Hub module {files.module_dir}"
        mix = read_tfhub_module(files.module_dir, weights=False).mix
        if mix is not None:
            return _checked(TrainedMix(tuple(float(v) for v in mix.scalar_parameters),
                                       float(mix.gamma), False, where), num_layers, where)
    return None


def _checked(mix, num_layers, where):
    if len(mix.scalar_parameters) != num_layers:
        raise ValueError(f"{where} has {len(mix.scalar_parameters)} scalar_parameters; the "
                         f"biLM has {num_layers} layers (token layer + one per biLSTM layer).")
    if not all(math.isfinite(v) for v in mix.scalar_parameters + (mix.gamma,)):
        raise ValueError(f"{where} holds a non-finite mix value: s {list(mix.scalar_parameters)}, "
                         f"gamma {mix.gamma}.")
    return mix
