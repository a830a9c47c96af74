"""The one step that tells a model directory's format by its files and hands it to its reader.

Three formats hold a biLM, each told by its files alone (nothing is read to decide):

| format | its files | reader |
|---|---|---|
| `"bilm-tf"` | `options.json` + `weights.hdf5` (ours, bilm-tf's, AllenNLP's); or, in a downloaded folder, one `*options*.json` or `options.json` beside one `*.hdf5` | `keras_elmo.formats.weight_file` |
| `"elmoformanylangs"` | `config.json`, `token_embedder.pkl`, `encoder.pkl`, `char.dic` | `keras_elmo.formats.efml_model` |
| `"tfhub-module"` | a TF1 Hub module: `tfhub_module.pb` (or `saved_model.pb`) + `variables/` | `keras_elmo.formats.tfhub_module` |

`model_format(directory)` names a complete directory's format (None: no format fits);
`intended_format(directory)` also names an incomplete one's (a `config.json` without the
.pkl files is an ELMoForManyLangs directory whose reader then names the missing file).
`describe_model(directory)` reads a directory through its format's reader, without
TensorFlow, and returns its sizes: what a download is checked with
(`keras_elmo.pretrained.model_check`) before it is kept. Loading (`keras_elmo.load_bilm`)
and every command ask `keras_elmo.formats.model_files.resolve_model_files`, which asks here.

Example:
>>> model_format("tests/fixtures/efml/tiny_zip")  # doctest: +SKIP
'elmoformanylangs'
>>> describe_model("tests/fixtures/tfhub/google_elmo").options.lstm_units  # doctest: +SKIP
64
"""

import dataclasses
import math
import os

BILM_TF, EFML, TFHUB_MODULE = "bilm-tf", "elmoformanylangs", "tfhub-module"
#: Every format a model directory may have, in the order they are tried.
FORMATS = (BILM_TF, EFML, TFHUB_MODULE)
OPTIONS_FILE, WEIGHTS_FILE = "options.json", "weights.hdf5"
_WEIGHT_SUFFIXES = (".hdf5", ".h5")
#: The files that make a folder a TF Hub module (or one meant to be, when incomplete).
MODULE_MARKERS = ("tfhub_module.pb", "saved_model.pb")


@dataclasses.dataclass(frozen=True)
class ModelDescription:
    """What a model directory's reader found (`describe_model`).

    Attributes:
        format: one of `FORMATS`.
        directory: the directory.
        options: `BiLMOptions`, or an ELMoForManyLangs model's `EFMLConfig` (both name the
            sizes alike: `lstm_units`, `projection_dim`, `num_highway`).
        parameter_count: int, the biLM's weights (char table, CNN, highway, projection,
            LSTMs; no softmax, no mix).
        mix: the trained scalar mix the model carries (`tfhub_module.ModuleMix`), or None.
    """

    format: str
    directory: str
    options: object
    parameter_count: int
    mix: object = None


def published_pair(directory):
    """`(options_file, weight_file)` of a directory in the published layout, or None.

    `options.json` + `weights.hdf5` first (what keras-elmo writes); else a downloaded
    folder's pair under other names: `options.json` or exactly one `*options*.json`, beside
    exactly one `*.hdf5` / `*.h5` (NorELMo's `model.hdf5`, AllenNLP's long names).
    """
    directory = os.fspath(directory)
    try:
        names = sorted(name for name in os.listdir(directory)
                       if os.path.isfile(os.path.join(directory, name)))
    except OSError:
        return None
    if OPTIONS_FILE in names and WEIGHTS_FILE in names:
        return os.path.join(directory, OPTIONS_FILE), os.path.join(directory, WEIGHTS_FILE)
    options = ([OPTIONS_FILE] if OPTIONS_FILE in names else
               [n for n in names if n.lower().endswith(".json") and "options" in n.lower()])
    weights = [n for n in names if n.lower().endswith(_WEIGHT_SUFFIXES)]
    if len(options) == 1 and len(weights) == 1:
        return os.path.join(directory, options[0]), os.path.join(directory, weights[0])
    return None


def model_format(directory):
    """The format of a complete model directory by its files (`FORMATS`), or None."""
    from keras_elmo.formats.efml_model import is_efml_model_dir

    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        return None
    if published_pair(directory) is not None:
        return BILM_TF
    if is_efml_model_dir(directory):
        return EFML
    if any(os.path.isfile(os.path.join(directory, name)) for name in MODULE_MARKERS):
        from keras_elmo.formats.tfhub_module import looks_like_tfhub_module

        if looks_like_tfhub_module(directory):
            return TFHUB_MODULE
    return None


def intended_format(directory):
    """The format a directory is meant to have, complete or not: `model_format`'s; else
    ELMoForManyLangs' when its `config.json` is there without `options.json`, a TF Hub
    module's when its `saved_model.pb` or `tfhub_module.pb` is; else the published layout
    (whose finder then names the file that is missing)."""
    from keras_elmo.formats.efml_model import CONFIG_FILE

    found = model_format(directory)
    if found is not None:
        return found

    def has(name):
        return os.path.isfile(os.path.join(os.fspath(directory), name))

    if not has(OPTIONS_FILE) and has(CONFIG_FILE):
        return EFML
    if not has(OPTIONS_FILE) and any(has(name) for name in MODULE_MARKERS):
        return TFHUB_MODULE
    return BILM_TF


def describe_model(directory, format=None):
    """Reads a model directory through its format's reader (no TensorFlow) and checks it.

    Args:
        directory: a model directory.
        format: one of `FORMATS`, or None (`intended_format(directory)`).

    Returns:
        `ModelDescription`.

    Raises:
        FileNotFoundError / ValueError: one line from the format's reader naming the file or
            tensor that is missing or does not fit.
    """
    directory = os.fspath(directory)
    format = format or intended_format(directory)
    if format == EFML:
        from keras_elmo.formats.efml_model import read_efml_model

        model = read_efml_model(directory)
        count = sum(array.size for weights in (model.token_embedder_weights,
                                               model.encoder_weights)
                    for array in weights.values())
        return ModelDescription(format, directory, model.config, count)
    if format == TFHUB_MODULE:
        from keras_elmo.formats.options import BiLMOptions
        from keras_elmo.formats.tfhub_module import read_tfhub_module

        module = read_tfhub_module(directory)
        return ModelDescription(format, directory, BiLMOptions.from_dict(module.options),
                                sum(array.size for array in module.arrays.values()),
                                mix=module.mix)
    from keras_elmo.formats.model_files import find_model_files
    from keras_elmo.formats.options import BiLMOptions
    from keras_elmo.formats.weight_file_check import check_weight_file, published_shapes

    options_file, weight_file, _ = find_model_files(directory)
    options = BiLMOptions.from_file(options_file)
    check_weight_file(options, weight_file)
    return ModelDescription(format, directory, options,
                            sum(math.prod(shape) for shape in published_shapes(options).values()))


def model_dirs_under(folder):
    """`[(relative path, format), ...]` of every complete model directory under `folder`
    (itself included, `"."`), in walk order: what an unpacked download holds."""
    found = []
    for directory, subdirectories, _ in os.walk(folder):
        subdirectories.sort()
        format = model_format(directory)
        if format is not None:
            found.append((os.path.relpath(directory, folder), format))
            if format == TFHUB_MODULE:
                subdirectories[:] = []  # its variables/ and assets/ are part of it
    return found
