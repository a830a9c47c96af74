"""The published weight-file layout (bilm-tf / AllenNLP `weights.hdf5`), both ways.

This is the only module that knows the dataset names and shapes of ELMO_SPEC.md section 6
and every convention flip between them and the Keras layers:
- `CNN/W_cnn_i` is `(1, width, E, n)`; the layer keeps `(width, E, n)`.
- LSTM `W_0` stacks `[W_x; W_h]` with gates in TensorFlow's order i, j, f, o; the layer keeps
  `input_kernel` and `recurrent_kernel` with Keras' order i, f, c(=j), o. `B` likewise.
  Neither side stores the +1.0 forget bias (the step adds it), so conversions are pure
  slicing and permutation and a file round-trips bit for bit.
- `char_embed` has 261 rows (no padding row): the layer keeps exactly those rows.
- The identity parts bilm-tf leaves out (no `CNN_high_*` when `n_highway` is 0, no `CNN_proj`
  when the filters total `projection_dim`) are left out here too.

Example:
>>> bilm = keras_elmo.BiLM.from_weights("options.json", "weights.hdf5")  # doctest: +SKIP
>>> save_published(bilm, "exported/")  # doctest: +SKIP
"""

import os

import h5py
import numpy as np

from keras_elmo import constants
from keras_elmo.atomic_file import atomic_path
from keras_elmo.model_files import OPTIONS_FILE, WEIGHTS_FILE

_LSTM_PREFIX = "RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell/"
_DIRECTIONS = ("forward", "backward")
#: Datasets under these roots belong to the biLM; anything else (a softmax) is ignored.
_MODEL_ROOTS = ("char_embed", "CNN", "CNN_high_", "CNN_proj", "RNN_")


def _tf_to_keras_gates(array, units):
    """Last axis i, j, f, o (TensorFlow) -> i, f, j, o (Keras)."""
    i, j, f, o = (array[..., k * units:(k + 1) * units] for k in range(constants.NUM_GATES))
    return np.concatenate([i, f, j, o], axis=-1)


def _keras_to_tf_gates(array, units):
    """Last axis i, f, c, o (Keras) -> i, j(=c), f, o (TensorFlow)."""
    i, f, c, o = (array[..., k * units:(k + 1) * units] for k in range(constants.NUM_GATES))
    return np.concatenate([i, c, f, o], axis=-1)


def _mapping(bilm):
    """`[(dataset, file_shape, to_layer, from_layer)]` for every biLM weight.

    `to_layer(file_array)` assigns the layer variables; `from_layer()` returns the file array.
    """
    options, embedder, encoder = bilm.options, bilm.token_embedder, bilm.contextual_encoder
    emb_dim, proj, units = options.char_embedding_dim, options.projection_dim, options.lstm_units
    entries = []

    def direct(name, variable, shape):
        entries.append((name, shape, lambda a, v=variable: v.assign(a),
                        lambda v=variable: np.asarray(v.numpy())))

    direct("char_embed", embedder.char_embeddings, (constants.NUM_FILE_CHARACTERS, emb_dim))
    for i, (width, count) in enumerate(options.filters):
        kernel = embedder.conv_kernels[i]
        entries.append((f"CNN/W_cnn_{i}", (1, width, emb_dim, count),
                        lambda a, v=kernel: v.assign(a[0]),
                        lambda v=kernel: np.asarray(v.numpy())[None]))
        direct(f"CNN/b_cnn_{i}", embedder.conv_biases[i], (count,))
    num_filters = options.num_filters
    for k, highway in enumerate(embedder.highways):
        for part in ("carry", "transform"):
            direct(f"CNN_high_{k}/W_{part}", getattr(highway, f"{part}_kernel"),
                   (num_filters, num_filters))
            direct(f"CNN_high_{k}/b_{part}", getattr(highway, f"{part}_bias"), (num_filters,))
    if embedder.projection is not None:
        direct("CNN_proj/W_proj", embedder.projection.kernel, (num_filters, proj))
        direct("CNN_proj/b_proj", embedder.projection.bias, (proj,))
    for d, direction in enumerate(_DIRECTIONS):
        for layer, cell in enumerate(encoder.cells[direction]):
            prefix = _LSTM_PREFIX.format(direction=d, layer=layer)
            input_dim = int(cell.input_kernel.shape[0])

            def load_w(a, cell=cell, input_dim=input_dim):
                a = _tf_to_keras_gates(a, units)
                cell.input_kernel.assign(a[:input_dim])
                cell.recurrent_kernel.assign(a[input_dim:])

            def save_w(cell=cell):
                stacked = np.concatenate([cell.input_kernel.numpy(),
                                          cell.recurrent_kernel.numpy()], axis=0)
                return _keras_to_tf_gates(stacked, units)

            entries.append((prefix + "W_0", (input_dim + proj, constants.NUM_GATES * units),
                            load_w, save_w))
            entries.append((prefix + "B", (constants.NUM_GATES * units,),
                            lambda a, cell=cell: cell.bias.assign(_tf_to_keras_gates(a, units)),
                            lambda cell=cell: _keras_to_tf_gates(cell.bias.numpy(), units)))
            direct(prefix + "W_P_0", cell.projection_kernel, (units, proj))
    return entries


def read_weight_file(path):
    """All datasets of an hdf5 file: `{"CNN/W_cnn_0": array, ...}` (float arrays).

    Raises:
        FileNotFoundError: no file at `path`.
        ValueError: the file is not a readable HDF5 file.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"weight file not found: {path} (expected a weights.hdf5 "
                                "in the bilm-tf / AllenNLP layout).")
    arrays = {}
    try:
        with h5py.File(path, "r") as f:
            f.visititems(lambda name, item: arrays.__setitem__(name, item[...])
                         if isinstance(item, h5py.Dataset) else None)
    except OSError as error:
        raise ValueError(f"weight file {path} is not a readable HDF5 file ({error}).") from None
    return arrays


def load_bilm_weights(bilm, path):
    """Assigns a published-layout weight file to a `BiLM` built from the matching options.

    Raises:
        ValueError: a dataset is missing, has the wrong shape (the message names the
            dataset, the shape found and the shape expected), or is not part of a model with
            these options.
    """
    arrays = read_weight_file(path)
    entries = _mapping(bilm)
    expected = {name for name, *_ in entries}
    for name, shape, _, _ in entries:
        if name not in arrays:
            raise ValueError(f"weight file {path} has no dataset {name!r} (expected shape "
                             f"{shape} for these options).")
        found = tuple(arrays[name].shape)
        if found != shape:
            raise ValueError(f"weight file {path}: dataset {name!r} has shape {found}, "
                             f"expected {shape} for these options.")
    for name in sorted(arrays):
        if name.startswith(_MODEL_ROOTS) and name not in expected:
            raise ValueError(f"weight file {path} has dataset {name!r} with shape "
                             f"{tuple(arrays[name].shape)}, which a model with these options "
                             "does not have (check n_highway, n_layers and the projection).")
    for name, _, _, _ in entries:
        _check_finite(arrays[name], f"weight file {path}: dataset {name!r}")
    for name, _, to_layer, _ in entries:
        to_layer(arrays[name].astype(np.float32, copy=False))


def bilm_weight_arrays(bilm):
    """The published-layout arrays of a `BiLM`: `{"char_embed": (261, E), ...}`."""
    return {name: from_layer().astype(np.float32, copy=False)
            for name, _, _, from_layer in _mapping(bilm)}


def save_bilm_weights(bilm, path):
    """Writes a `BiLM`'s weights to `path` in the published layout (atomically).

    Raises:
        ValueError: a weight is NaN or infinite (nothing is written).
    """
    arrays = bilm_weight_arrays(bilm)
    for name, array in arrays.items():
        _check_finite(array, f"refusing to write {path}: weight {name!r}")
    with atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
        for name, array in arrays.items():
            f.create_dataset(name, data=array)


def _check_finite(array, where):
    """Refuses NaN and infinite values: `where` holds N non-finite values of M."""
    if np.issubdtype(array.dtype, np.floating):
        bad = int(array.size - np.count_nonzero(np.isfinite(array)))
        if bad:
            raise ValueError(f"{where} holds {bad} non-finite values (NaN or inf) of "
                             f"{array.size}; expected finite weights (did training diverge?).")


def save_published(bilm, directory):
    """Writes `directory/options.json` and `directory/weights.hdf5` for a `BiLM`.

    Returns:
        `(options_path, weights_path)`.
    """
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    options_path = os.path.join(directory, OPTIONS_FILE)
    weights_path = os.path.join(directory, WEIGHTS_FILE)
    save_bilm_weights(bilm, weights_path)
    bilm.options.save(options_path)
    return options_path, weights_path
