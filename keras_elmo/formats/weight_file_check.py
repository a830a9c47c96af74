"""Checking a published-layout weight file against its options, without building a model.

`published_shapes(options)` lists the datasets a `weights.hdf5` of these options holds and
their shapes (docs/model.md section 6; the names are `weight_file`'s); `check_weight_file`
opens the file (HDF5 refuses one cut short: its stored end is past the file's end) and
compares names and shapes by the rules loading applies (`weight_file.check_dataset_shapes`),
reading no weight value and importing no TensorFlow. The download cache runs it before a
model counts as cached (`keras_elmo.pretrained`); loading still checks everything, values
included.

Example:
>>> options = keras_elmo.BiLMOptions.tiny()
>>> published_shapes(options)["char_embed"]  # (261, E) for a byte model
(261, 4)
>>> check_weight_file(options, "tiny/weights.hdf5")  # doctest: +SKIP
"""

from keras_elmo import constants
from keras_elmo.formats.weight_file import (_LSTM_PREFIX, check_dataset_shapes, dataset_shapes,
                                           open_weight_file)


def published_shapes(options):
    """`{dataset name: shape}` of a published-layout weight file of `options`.

    Args:
        options: `BiLMOptions`.
    """
    emb, proj, units = options.char_embedding_dim, options.projection_dim, options.lstm_units
    shapes = {"char_embed": (options.num_characters - constants.CHAR_ID_SHIFT, emb)}
    for i, (width, count) in enumerate(options.filters):
        shapes[f"CNN/W_cnn_{i}"] = (1, width, emb, count)
        shapes[f"CNN/b_cnn_{i}"] = (count,)
    filters = options.num_filters
    for k in range(options.num_highway):
        for part in ("carry", "transform"):
            shapes[f"CNN_high_{k}/W_{part}"] = (filters, filters)
            shapes[f"CNN_high_{k}/b_{part}"] = (filters,)
    if options.use_char_projection:
        shapes["CNN_proj/W_proj"] = (filters, proj)
        shapes["CNN_proj/b_proj"] = (proj,)
    if options.has_word_embedding:
        shapes["word_embed"] = (options.word_vocabulary_size, options.word_embedding_dim)
        shapes["word_proj/W_proj"] = (options.word_embedding_dim, proj)
    for direction in range(len(constants.DIRECTIONS)):
        for layer in range(options.num_layers):
            prefix = _LSTM_PREFIX.format(direction=direction, layer=layer)
            shapes[prefix + "W_0"] = (proj + proj, constants.NUM_GATES * units)  # [W_x; W_h]
            shapes[prefix + "B"] = (constants.NUM_GATES * units,)
            shapes[prefix + "W_P_0"] = (units, proj)
    return shapes


def check_weight_file(options, path):
    """Refuses a weight file that is not a whole HDF5 file of `options`' datasets.

    Raises:
        ValueError: the file is not a readable HDF5 file (cut short, or another format), a
            dataset is missing or has another shape, or a model dataset is one these
            options do not have (one line naming it, the shape found and the one expected).
    """
    path = str(path)
    with open_weight_file(path) as weights:
        check_dataset_shapes(path, dataset_shapes(weights), published_shapes(options))
