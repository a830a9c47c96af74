"""The trained scalar-mix weights of an export: the `scalar_mix.json` file.

A biLM's weight file holds no mix: the mix `s`, `gamma` is trained per task. An export uses,
in order: a `ScalarMix` given in Python (e.g. `ElmoLayer.scalar_mixes[0]`), a
`scalar_mix.json` (the `--mix-weights` file or the one in the model directory), or the
default even mix `softmax(zeros)`, `gamma = 1` (docs/model.md section 5).

File format (one entry of `scalar_parameters` per biLM layer, token layer first):

    {"scalar_parameters": [0.1, -0.3, 0.2], "gamma": 1.7, "do_layer_norm": false}

Example:
>>> save_mix_weights(elmo_layer.scalar_mixes[0], "runs/ner/scalar_mix.json")  # doctest: +SKIP
>>> mix = load_mix_weights("runs/ner/scalar_mix.json", num_layers=3)  # doctest: +SKIP
"""

import json

from keras_elmo.formats.model_mix import read_mix_file
from keras_elmo.process.atomic_file import atomic_writer
from keras_elmo.layers.scalar_mix import ScalarMix


def build_mix(num_layers, scalar_parameters=None, gamma=1.0, do_layer_norm=False):
    """A built, frozen `ScalarMix` over `num_layers` layers (default: the even mix).

    Example:
    >>> mix = build_mix(3, scalar_parameters=[0.0, 1.0, 0.0], gamma=2.0)
    >>> [round(float(w), 4) for w in keras.ops.softmax(mix.scalar_parameters)]
    [0.2119, 0.5761, 0.2119]"""
    mix = ScalarMix(do_layer_norm=do_layer_norm, initial_scalar_parameters=scalar_parameters,
                    initial_gamma=gamma, trainable=False, name="scalar_mix")
    mix.build((None, num_layers, None, None))
    return mix


def mix_to_dict(mix):
    """`{"scalar_parameters": [...], "gamma": g, "do_layer_norm": b}` of a built `ScalarMix`."""
    return {"scalar_parameters": [float(v) for v in mix.scalar_parameters.numpy()],
            "gamma": float(mix.gamma.numpy()), "do_layer_norm": bool(mix.do_layer_norm)}


def save_mix_weights(mix, path):
    """Writes a built `ScalarMix`'s `s`, `gamma` and `do_layer_norm` to `path` (JSON).

    Example:
    >>> save_mix_weights(build_mix(3, gamma=2.0), "scalar_mix.json")
    >>> float(load_mix_weights("scalar_mix.json", num_layers=3).gamma)
    2.0"""
    if not getattr(mix, "built", False):
        raise ValueError("save_mix_weights needs a built ScalarMix (call it once, or build "
                         "the ElmoLayer that owns it).")
    with atomic_writer(path, what="the mix weights") as f:
        json.dump(mix_to_dict(mix), f, indent=2)
        f.write("\n")


def load_mix_weights(path, num_layers):
    """A frozen `ScalarMix` from a `scalar_mix.json` written by `save_mix_weights`.

    Example:
    >>> save_mix_weights(build_mix(3, [0.0, 1.0, 0.0]), "scalar_mix.json")
    >>> [w.name for w in load_mix_weights("scalar_mix.json", num_layers=3).weights]
    ['scalar_parameters', 'gamma']

    `path` and `num_layers` as `keras_elmo.formats.model_mix.read_mix_file` reads them; its
    one-line errors too.
    """
    return build_trained_mix(read_mix_file(path, num_layers), num_layers)


def build_trained_mix(mix, num_layers):
    """A frozen `ScalarMix` of a `keras_elmo.formats.model_mix.TrainedMix` (a mix file's,
    a TF Hub module's)."""
    return build_mix(num_layers, list(mix.scalar_parameters), mix.gamma, mix.do_layer_norm)
