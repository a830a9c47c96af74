"""The published weight-file layout (bilm-tf / AllenNLP `weights.hdf5`), both ways.

This is the only module that knows the dataset names and shapes of docs/model.md section 6
and every convention flip between them and the Keras layers:
- `CNN/W_cnn_i` is `(1, width, E, n)`; the layer keeps `(width, E, n)`.
- LSTM `W_0` stacks `[W_x; W_h]` with gates in TensorFlow's order i, j, f, o; the layer keeps
  `input_kernel` and `recurrent_kernel` with Keras' order i, f, c(=j), o. `B` likewise.
  Neither side stores the +1.0 forget bias (the step adds it), so conversions are pure
  slicing and permutation and a file round-trips bit for bit.
- The file's LSTM kernels (`W_0`'s two halves, `W_P_0`) are `(in, out)`; the cells keep
  `(out, in)`: transposed here, on load and on save.
- `char_embed` has 261 rows (no padding row): the layer keeps exactly those rows.
- The identity parts bilm-tf leaves out (no `CNN_high_*` when `n_highway` is 0, no `CNN_proj`
  when the filters total `projection_dim`) are left out here too.
- A vocabulary model (docs/model.md section 10) is written in the same layout, with names
  of our own for what bilm-tf has not: `char_embed` has its vocabulary's rows, and a word
  embedding adds `word_embed` `(n_words, W)` and `word_proj/W_proj` `(W, P)`. Its LSTM `B`
  holds whatever its options' `forget_bias` leaves out (0.0: the whole bias).

Example:
>>> bilm = keras_elmo.BiLM.from_weights("options.json", "weights.hdf5")  # doctest: +SKIP
>>> save_published(bilm, "exported/")  # doctest: +SKIP
"""

import math
import os

import h5py
import numpy as np

from keras_elmo import constants
from keras_elmo.process.atomic_hdf5 import atomic_hdf5
from keras_elmo.formats.model_files import OPTIONS_FILE, WEIGHTS_FILE

_LSTM_PREFIX = "RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell/"
#: Datasets under these roots belong to the biLM; anything else (a softmax) is ignored.
_MODEL_ROOTS = ("char_embed", "CNN", "CNN_high_", "CNN_proj", "RNN_", "word_embed",
                "word_proj")
#: Bytes of one block of rows read, converted and assigned at a time while loading: the
#: loader's only temporaries, whatever the model's size (small enough for the allocator to
#: reuse one buffer from block to block).
_BLOCK_BYTES = 1 << 20
#: Byte alignment of the arrays handed to variables (TensorFlow's EIGEN_MAX_ALIGN_BYTES).
_ALIGNMENT = 64


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

    `to_layer(dataset)` assigns the layer variables from an h5py dataset (or an array),
    reading only what it needs, one block at a time; `from_layer()` returns the file array.
    """
    options, embedder, encoder = bilm.options, bilm.token_embedder, bilm.contextual_encoder
    emb_dim, proj, units = options.char_embedding_dim, options.projection_dim, options.lstm_units
    entries = []

    def direct(name, variable, shape):
        entries.append((name, shape,
                        lambda d, v=variable: _assign_rows(v, lambda r0, r1: _read(d, r0, r1)),
                        lambda v=variable: _numpy(v)))

    direct("char_embed", embedder.char_embeddings,
           (options.num_characters - constants.CHAR_ID_SHIFT, emb_dim))  # (261, E) for bytes
    for i, (width, count) in enumerate(options.filters):
        kernel = embedder.conv_kernels[i]
        entries.append((f"CNN/W_cnn_{i}", (1, width, emb_dim, count),
                        lambda d, v=kernel: _write(v, _aligned_copy(d[0])),
                        lambda v=kernel: _numpy(v)[None]))
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
    if bilm.word_embedder is not None:
        direct("word_embed", bilm.word_embedder.embeddings,
               (options.word_vocabulary_size, options.word_embedding_dim))
        direct("word_proj/W_proj", bilm.word_embedder.projection_kernel,
               (options.word_embedding_dim, proj))
    for d, direction in enumerate(constants.DIRECTIONS):
        for layer, cell in enumerate(encoder.cells[direction]):
            prefix = _LSTM_PREFIX.format(direction=d, layer=layer)
            input_dim = cell.input_dim

            def load_w(dataset, cell=cell, input_dim=input_dim):
                # W_0 = [W_x; W_h]: rows [0, input_dim) are W_x, the rest W_h.
                for variable, offset in ((cell.input_kernel, 0),
                                         (cell.recurrent_kernel, input_dim)):
                    _assign_rows(variable, lambda r0, r1, o=offset: _tf_to_keras_gates(
                        _read(dataset, o + r0, o + r1), units), transposed=True)

            def save_w(cell=cell):
                stacked = np.concatenate([_numpy(cell.input_kernel).T,
                                          _numpy(cell.recurrent_kernel).T], axis=0)
                return _keras_to_tf_gates(stacked, units)

            def load_p(dataset, cell=cell):
                _assign_rows(cell.projection_kernel,
                             lambda r0, r1: _read(dataset, r0, r1), transposed=True)

            entries.append((prefix + "W_0", (input_dim + proj, constants.NUM_GATES * units),
                            load_w, save_w))
            entries.append((prefix + "B", (constants.NUM_GATES * units,),
                            lambda d, cell=cell: _write(
                                cell.bias, _aligned_copy(_tf_to_keras_gates(_read(d), units))),
                            lambda cell=cell: _keras_to_tf_gates(cell.bias.numpy(), units)))
            entries.append((prefix + "W_P_0", (units, proj), load_p,
                            lambda cell=cell: _numpy(cell.projection_kernel).T))
    return entries


def _numpy(variable):
    """A variable's value as a numpy array, as stored."""
    return np.asarray(variable.numpy())


def _read(dataset, start=None, stop=None):
    """float32 numpy copy of rows `[start, stop)` of an h5py dataset (all rows if None)."""
    return np.asarray(dataset[start:stop] if start is not None else dataset[...], np.float32)


def _block_rows(shape):
    """Rows of an array of `shape` that fit in `_BLOCK_BYTES` (at least 1)."""
    return max(1, _BLOCK_BYTES // (4 * max(1, math.prod(shape[1:]))))


def _assign_rows(variable, read_rows, transposed=False):
    """`variable = read_rows(...)`, read one block of rows (about `_BLOCK_BYTES`) at a time
    into one array in the layer's layout, then assigned whole (a slice assignment would
    make every later read of the variable a copy: docs/performance.md, "Memory").

    `transposed`: the variable stores the transpose of what the rows make up (an LSTM
    cell's `W_x`, `W_h`, `W_p`, kept `(out, in)`); the blocks go into the array's columns.
    """
    shape = tuple(variable.shape)
    rows_shape = shape[::-1] if transposed else shape
    num_rows = rows_shape[0]
    step = _block_rows(rows_shape)
    value = _aligned_empty(shape)
    rows = value.T if transposed else value
    for start in range(0, num_rows, step):
        stop = min(num_rows, start + step)
        rows[start:stop] = read_rows(start, stop)
    _write(variable, value)


def _write(variable, value):
    """`variable = value` (an aligned float32 array of the variable's shape, not used after).

    A reduced-precision variable gets the values rounded to its dtype. Under TensorFlow, a
    variable of zeros (a biLM built with `zero_init=True`) gets the values added in its own
    buffer, so the process holds one copy of the model (docs/performance.md, "Memory");
    values holding a subnormal or a -0.0, which `0 + x` would change, are assigned instead.
    Under JAX and PyTorch the value is assigned (`keras.ops` converts it; no TensorFlow).
    """
    import keras

    if keras.config.backend() != "tensorflow":
        variable.assign(value if variable.dtype == "float32"
                        else keras.ops.cast(value, variable.dtype))
        return
    import tensorflow as tf

    target = getattr(variable, "value", variable)  # a Keras variable's tf.Variable
    tensor = _as_tensor(value)
    if tensor.dtype != variable.dtype:  # a reduced-precision model (BiLM(dtype="bfloat16"))
        tensor = tf.cast(tensor, variable.dtype)
    if (isinstance(target, tf.Variable) and _exact_when_added_to_zero(value)
            and not bool(tf.reduce_any(tf.not_equal(target, tf.zeros((), target.dtype))))):
        target.assign_add(tensor)
    else:
        variable.assign(tensor)


def _exact_when_added_to_zero(value):
    """False if `value` holds a subnormal or a -0.0 (what `0 + x` in TensorFlow changes).

    Looked at one block of `_BLOCK_BYTES` at a time: a whole-array `abs` would hold a float
    and a bool temporary of the array's size at the peak of loading."""
    flat = value.reshape(-1)
    step = max(1, _BLOCK_BYTES // flat.itemsize)
    for start in range(0, flat.size, step):
        block = flat[start:start + step]
        tiny = np.abs(block) < np.finfo(np.float32).tiny  # zeros and subnormals
        if tiny.any() and (np.any(block[tiny] != 0) or np.any(np.signbit(block[tiny]))):
            return False
    return True


def _aligned_copy(array):
    """A float32 copy of `array` in a buffer `_as_tensor` can share."""
    value = _aligned_empty(np.shape(array))
    value[...] = array
    return value


def _aligned_empty(shape):
    """An uninitialised float32 array whose data starts on a `_ALIGNMENT`-byte boundary
    (TensorFlow's kernels require it of any buffer a variable may come to use)."""
    size = math.prod(shape) * 4
    raw = np.empty(size + _ALIGNMENT, np.uint8)
    offset = -raw.ctypes.data % _ALIGNMENT
    return raw[offset:offset + size].view(np.float32).reshape(shape)


def _as_tensor(array):
    """A float32 tensor over an aligned numpy array's own memory (DLPack: no copy).

    Converting a numpy array the usual way holds two more full-size copies at its peak.
    The variable may keep the array's memory
    as its own (TensorFlow forwards an input buffer nobody else holds), hence the
    alignment; the array is not used after this.
    """
    import tensorflow as tf

    try:
        return tf.experimental.dlpack.from_dlpack(array.__dlpack__())
    except (AttributeError, TypeError, ValueError, tf.errors.InvalidArgumentError):
        return tf.convert_to_tensor(array)


def _count_non_finite(dataset):
    """Non-finite values of an h5py dataset (rank >= 1: shapes are checked first), read one
    block of rows at a time."""
    if not np.issubdtype(dataset.dtype, np.floating):
        return 0
    step = _block_rows(dataset.shape)
    return sum(int(block.size - np.count_nonzero(np.isfinite(block)))
               for block in (dataset[i:i + step] for i in range(0, dataset.shape[0], step)))


def read_weight_file(path):
    """All datasets of an hdf5 file: `{"CNN/W_cnn_0": array, ...}` (float arrays).

    Raises:
        FileNotFoundError: no file at `path`.
        ValueError: the file is not a readable HDF5 file.
    """
    path = _existing_file(path)
    arrays = {}
    try:
        with h5py.File(path, "r") as f:
            f.visititems(lambda name, item: arrays.__setitem__(name, item[...])
                         if isinstance(item, h5py.Dataset) else None)
    except OSError as error:
        raise ValueError(f"weight file {path} is not a readable HDF5 file ({error}).") from None
    return arrays


def open_weight_file(path):
    """The HDF5 file at `path`, open for reading (a context manager).

    Raises:
        ValueError: not a readable HDF5 file (another format, or cut short: HDF5 compares
            the end it stored with the file's).
    """
    try:
        return h5py.File(path, "r")
    except OSError as error:
        raise ValueError(f"weight file {path} is not a readable HDF5 file ({error}).") from None


def dataset_shapes(weights):
    """`{dataset name: shape}` of an open HDF5 file (no value read)."""
    shapes = {}
    weights.visititems(lambda name, item: shapes.__setitem__(name, tuple(item.shape))
                       if isinstance(item, h5py.Dataset) else None)
    return shapes


def check_dataset_shapes(path, found, expected):
    """Refuses a weight file whose datasets do not fit its options.

    Args:
        path: the file, for the line.
        found: `{dataset name: shape}` of the file.
        expected: `{dataset name: shape}` of a model with the options.

    Raises:
        ValueError: a dataset missing, of another shape, or of the model's but not of these
            options (one line naming it, the shape found and the shape expected).
    """
    for name, shape in expected.items():
        if name not in found:
            raise ValueError(f"weight file {path} has no dataset {name!r} (expected shape "
                             f"{shape} for these options).")
        if tuple(found[name]) != shape:
            raise ValueError(f"weight file {path}: dataset {name!r} has shape "
                             f"{tuple(found[name])}, expected {shape} for these options.")
    for name in sorted(found):
        if name.startswith(_MODEL_ROOTS) and name not in expected:
            raise ValueError(f"weight file {path} has dataset {name!r} with shape "
                             f"{tuple(found[name])}, which a model with these options "
                             "does not have (check n_highway, n_layers and the projection).")


def load_bilm_weights(bilm, path):
    """Assigns a published-layout weight file to a `BiLM` built from the matching options.

    Streams the file: every name, shape and value is checked first (one dataset in memory
    at a time), then each weight is read straight into its layer's layout and assigned, so
    the process never holds a second copy of the model beside its variables. Nothing is
    assigned if a check fails.

    Raises:
        FileNotFoundError: no file at `path`.
        ValueError: a dataset is missing, has the wrong shape (the message names the
            dataset, the shape found and the shape expected), is not part of a model with
            these options, or holds NaN or inf; or the file is not a readable HDF5 file.

    Example:
    >>> bilm = keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny())
    >>> load_bilm_weights(bilm, "weights.hdf5")  # doctest: +SKIP
    """
    path = _existing_file(path)
    entries = _mapping(bilm)
    with open_weight_file(path) as weights:
        check_dataset_shapes(path, dataset_shapes(weights),
                             {name: shape for name, shape, _, _ in entries})
        for name, _, _, _ in entries:
            _refuse_non_finite(_count_non_finite(weights[name]), weights[name].size,
                               f"weight file {path}: dataset {name!r}")
        for name, _, to_layer, _ in entries:
            to_layer(weights[name])


def bilm_weight_arrays(bilm):
    """The published-layout arrays of a `BiLM`: `{"char_embed": (261, E), ...}`."""
    return {name: from_layer().astype(np.float32, copy=False)
            for name, _, _, from_layer in _mapping(bilm)}


def save_bilm_weights(bilm, path):
    """Writes a `BiLM`'s weights to `path` in the published layout (atomically).

    One weight is converted and written at a time (no second copy of the whole model).
    The weights' size is checked against the free space first; a storage fault leaves no
    partial file and an earlier `path` untouched (`keras_elmo.process.atomic_hdf5`).

    Raises:
        ValueError: a weight is NaN or infinite (nothing is written).
        StorageError: less free than the weights take, a full disk, a read-only
            filesystem, no permission (one line naming `path`).

    Example:
    >>> save_bilm_weights(keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny()), "w.hdf5")  # doctest: +SKIP
    """
    entries = _mapping(bilm)
    needed = sum(int(np.prod(shape)) for _, shape, _, _ in entries) * np.dtype(np.float32).itemsize
    with atomic_hdf5(path, what="the biLM weights", needed=needed) as output:
        for name, _, _, from_layer in entries:
            array = from_layer().astype(np.float32, copy=False)
            _check_finite(array, f"refusing to write {path}: weight {name!r}")
            output.file.create_dataset(name, data=array)
            output.check()
            del array


def _existing_file(path):
    """`path` as a str; FileNotFoundError when no file is there."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"weight file not found: {path} (expected a weights.hdf5 "
                                "in the bilm-tf / AllenNLP layout).")
    return path


def _check_finite(array, where):
    """Refuses NaN and infinite values: `where` holds N non-finite values of M."""
    if np.issubdtype(array.dtype, np.floating):
        _refuse_non_finite(int(array.size - np.count_nonzero(np.isfinite(array))), array.size,
                           where)


def _refuse_non_finite(bad, size, where):
    if bad:
        raise ValueError(f"{where} holds {bad} non-finite values (NaN or inf) of {size}; "
                         "expected finite weights (did training diverge?).")


def save_published(bilm, directory):
    """Writes `directory/options.json` and `directory/weights.hdf5` for a `BiLM` (and a
    vocabulary model's char.dic and word.dic: `keras_elmo.formats.model_vocabulary`).

    Example:
    >>> save_published(BiLM(BiLMOptions.tiny()), "tiny_bilm")
    ('tiny_bilm/options.json', 'tiny_bilm/weights.hdf5')

    Returns:
        `(options_path, weights_path)`.
    """
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    options_path = os.path.join(directory, OPTIONS_FILE)
    weights_path = os.path.join(directory, WEIGHTS_FILE)
    save_bilm_weights(bilm, weights_path)
    bilm.options.save(options_path)
    if getattr(bilm, "vocabulary", None) is not None:  # a vocabulary model's char.dic, word.dic
        from keras_elmo.formats.model_vocabulary import save_vocabulary

        save_vocabulary(bilm.vocabulary, directory)
    return options_path, weights_path


def load_bilm_arrays(bilm, arrays, where):
    """Assigns in-memory published-layout arrays (`{"char_embed": (261, E), ...}`, as
    `read_weight_file` or `keras_elmo.formats.tfhub_module` return them) to a `BiLM` built
    from the matching options; every name, shape and value is checked before any is
    assigned.

    Args:
        bilm: the `BiLM`.
        arrays: `{dataset name: numpy array}`.
        where: what the arrays came from, for the error line (`"TF Hub module elmo_3"`).

    Raises:
        ValueError: an array missing, of the wrong shape, not part of a model with these
            options, or holding NaN or inf (one line naming it).
    """
    entries = _mapping(bilm)
    check_dataset_shapes(where, {name: tuple(np.shape(a)) for name, a in arrays.items()},
                         {name: shape for name, shape, _, _ in entries})
    for name, _, _, _ in entries:
        _check_finite(np.asarray(arrays[name]), f"{where}: weight {name!r}")
    for name, _, to_layer, _ in entries:
        to_layer(np.asarray(arrays[name], np.float32))
