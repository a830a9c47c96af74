"""Random weight files in the published bilm-tf layout (docs/model.md section 6), for tests.

Written from the spec's table, independently of `keras_elmo.formats.weight_file`.

Example:
>>> options = make_options()
>>> arrays = random_weight_arrays(options, seed=0)
>>> arrays["char_embed"].shape
(261, 4)
"""

import copy
import json
import os

import h5py
import numpy as np

FILE_CHARACTERS = 261  # char_embed rows in a weight file (no row 0)


def make_options(dim=12, projection_dim=8, n_layers=2, cell_clip=3.0, proj_clip=3.0,
                 use_skip_connections=True, activation="relu", n_highway=1, char_dim=4,
                 filters=((1, 4), (2, 8), (3, 8)), max_characters_per_token=50,
                 n_characters=262):
    """An options.json dict; the defaults are a tiny model (F = 20 filters, P = 8, D = 12)."""
    return {
        "lstm": {"dim": dim, "projection_dim": projection_dim, "n_layers": n_layers,
                 "cell_clip": cell_clip, "proj_clip": proj_clip,
                 "use_skip_connections": use_skip_connections},
        "char_cnn": {"activation": activation, "n_highway": n_highway,
                     "embedding": {"dim": char_dim},
                     "filters": [list(f) for f in filters],
                     "n_characters": n_characters,
                     "max_characters_per_token": max_characters_per_token},
    }


def weight_shapes(options):
    """Dataset name -> shape, exactly the published layout for `options` (a dict)."""
    cnn, lstm = options["char_cnn"], options["lstm"]
    char_dim = cnn["embedding"]["dim"]
    total = sum(n for _, n in cnn["filters"])
    proj, dim = lstm["projection_dim"], lstm["dim"]
    shapes = {"char_embed": (FILE_CHARACTERS, char_dim)}
    for i, (width, n) in enumerate(cnn["filters"]):
        shapes[f"CNN/W_cnn_{i}"] = (1, width, char_dim, n)
        shapes[f"CNN/b_cnn_{i}"] = (n,)
    for k in range(cnn.get("n_highway", 0)):
        for part in ("carry", "transform"):
            shapes[f"CNN_high_{k}/W_{part}"] = (total, total)
            shapes[f"CNN_high_{k}/b_{part}"] = (total,)
    if total != proj:
        shapes["CNN_proj/W_proj"] = (total, proj)
        shapes["CNN_proj/b_proj"] = (proj,)
    for d in range(2):
        for layer in range(lstm["n_layers"]):
            prefix = f"RNN_{d}/RNN/MultiRNNCell/Cell{layer}/LSTMCell/"
            shapes[prefix + "W_0"] = (proj + proj, 4 * dim)
            shapes[prefix + "B"] = (4 * dim,)
            shapes[prefix + "W_P_0"] = (dim, proj)
    return shapes


def random_weight_arrays(options, seed, lstm_scale=1.0, cnn_scale=1.0):
    """float32 arrays in the published shapes, scaled so activations are O(1).

    `lstm_scale` multiplies the LSTM matrices (large values make the clips bite).
    """
    rng = np.random.default_rng(seed)
    arrays = {}
    for name, shape in weight_shapes(options).items():
        if name == "char_embed":
            scale = 1.0
        elif name.startswith("CNN/W_cnn"):
            scale = cnn_scale / np.sqrt(shape[1] * shape[2])
        elif name.startswith("RNN_"):
            scale = lstm_scale / np.sqrt(shape[0]) if len(shape) == 2 else 0.5 * lstm_scale
        elif len(shape) == 2:
            scale = 1.0 / np.sqrt(shape[0])
        else:
            scale = 0.5
        arrays[name] = (rng.standard_normal(shape) * scale).astype(np.float32)
    return arrays


def write_weight_file(path, arrays):
    """Writes `arrays` (name -> array) to an hdf5 file, one dataset per name."""
    with h5py.File(os.fspath(path), "w") as f:
        for name, value in arrays.items():
            f.create_dataset(name, data=value)
    return path


def read_hdf5_datasets(path):
    """Every dataset of an hdf5 file as name -> numpy array (groups walked recursively)."""
    out = {}
    with h5py.File(os.fspath(path), "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                out[name] = obj[()]
        f.visititems(visit)
    return out


def write_model_dir(directory, options, arrays):
    """directory/options.json + directory/weights.hdf5; returns (options_path, weight_path)."""
    os.makedirs(directory, exist_ok=True)
    options_path = os.path.join(directory, "options.json")
    weight_path = os.path.join(directory, "weights.hdf5")
    with open(options_path, "w", encoding="utf-8") as f:
        json.dump(copy.deepcopy(options), f)
    write_weight_file(weight_path, arrays)
    return options_path, weight_path
