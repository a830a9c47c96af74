"""A model directory: the file names every part of keras-elmo uses, and their lookup.

    MODEL_DIR/options.json     the biLM's options (published layout, docs/model.md section 6)
    MODEL_DIR/weights.hdf5     its weights; `keras-elmo train` writes it when a run ends
    MODEL_DIR/scalar_mix.json  optional: trained mix weights (`keras_elmo.export.mix_weights`)
    MODEL_DIR/vocab.txt        optional: the vocabulary (`keras-elmo train` copies it here)
    MODEL_DIR/char.dic         a vocabulary model's characters (docs/model.md section 10)
    MODEL_DIR/word.dic         and its words, when it has a word embedding

An ELMoForManyLangs model directory as downloaded (config.json, char.dic, word.dic,
token_embedder.pkl, encoder.pkl) and a TF1 Hub module (tfhub_module.pb, saved_model.pb,
variables/) are model directories too: `resolve_model_files` asks
`keras_elmo.formats.model_format` which format a directory has, by its files.

This module imports nothing but `os`, on purpose: the CLI (`keras-elmo embed`, `neighbors`,
`export`) checks MODEL_DIR with `find_model_files` before it loads TensorFlow, so that a
bad directory gives one clean line on stderr and no TensorFlow log lines. The training run's
directory (`keras_elmo.training.model_dir`: checkpoints, logs) builds on these names.

Example:
>>> options_file, weight_file, mix_file = find_model_files("runs/small")  # doctest: +SKIP
"""

import dataclasses
import os

OPTIONS_FILE = "options.json"
WEIGHTS_FILE = "weights.hdf5"
#: Name of the mix file looked for in a model directory.
MIX_WEIGHTS_FILE = "scalar_mix.json"
VOCAB_FILE = "vocab.txt"
#: A vocabulary model's character and word vocabularies (`keras_elmo.formats.dic_file`).
CHAR_DIC_FILE, WORD_DIC_FILE = "char.dic", "word.dic"


@dataclasses.dataclass(frozen=True)
class ModelFiles:
    """The files of a biLM, as `resolve_model_files` found them.

    Attributes:
        options_file, weight_file: the published-layout pair, or None for an
            ELMoForManyLangs directory or a TF Hub module.
        efml_dir: the ELMoForManyLangs model directory, or None.
        mix_file, vocab_file: `scalar_mix.json` and `vocab.txt` of a model directory, or None.
        char_dic, word_dic: a model directory's `char.dic` / `word.dic`, or None.
        module_dir: the TF1 Hub module directory, or None (its trained mix comes with it:
            `keras_elmo.formats.tfhub_module.read_tfhub_module(module_dir).mix`).
        format: `keras_elmo.formats.model_format`'s name of the format (`"bilm-tf"`,
            `"elmoformanylangs"`, `"tfhub-module"`).
        checked: bool, the download cache checked these files at this use (their sha256 at
            landing, their size, time and inode now): readers skip their own checksums.
    """

    options_file: str = None
    weight_file: str = None
    efml_dir: str = None
    mix_file: str = None
    vocab_file: str = None
    char_dic: str = None
    word_dic: str = None
    module_dir: str = None
    format: str = "bilm-tf"
    checked: bool = False


def find_model_files(model_dir):
    """`(options_file, weight_file, mix_weights_file or None)` of a model directory.

    A training run's directory (`keras-elmo train`) and a published model both hold
    `options.json` and `weights.hdf5`; a `scalar_mix.json` beside them is returned if present.

    Example:
    >>> _ = keras_elmo.save_published(keras_elmo.BiLM(keras_elmo.BiLMOptions.tiny()), "tiny")
    >>> find_model_files("tiny")
    ('tiny/options.json', 'tiny/weights.hdf5', None)

    Raises:
        FileNotFoundError: the directory or one of the two required files is missing (the
            message says which, and what the directory holds).
    """
    model_dir = os.fspath(model_dir)
    if not os.path.isdir(model_dir):
        what = "is a file" if os.path.exists(model_dir) else "does not exist"
        raise FileNotFoundError(f"model directory not found: {model_dir} {what}; expected a "
                                f"directory with {OPTIONS_FILE} and {WEIGHTS_FILE} (or an "
                                "ELMoForManyLangs model directory).")
    from keras_elmo.formats.model_format import published_pair

    pair = published_pair(model_dir)
    mix = os.path.join(model_dir, MIX_WEIGHTS_FILE)
    if pair is not None:
        return pair[0], pair[1], (mix if os.path.isfile(mix) else None)
    found = []
    for name in (OPTIONS_FILE, WEIGHTS_FILE):
        path = os.path.join(model_dir, name)
        if not os.path.isfile(path):
            present = sorted(os.listdir(model_dir))[:10]
            raise FileNotFoundError(f"{model_dir} has no {name} (it holds {present}); expected "
                                    f"{OPTIONS_FILE} and {WEIGHTS_FILE} (a training run writes "
                                    f"{WEIGHTS_FILE} when it ends).")
        found.append(path)
    return found[0], found[1], (mix if os.path.isfile(mix) else None)


def resolve_model_files(model_dir=None, options_file=None, weight_file=None):
    """`ModelFiles` of a biLM given as a model directory (ours, a published model's, or an
    ELMoForManyLangs one as downloaded) OR as two files with any names (AllenNLP's published
    `elmo_2x4096_512_2048cnn_2xhighway_options.json` / `..._weights.hdf5`, say).

    The mix, vocabulary and .dic files are looked for only in a model directory.

    Example:
    >>> resolve_model_files("zhs.model").efml_dir  # doctest: +SKIP
    'zhs.model'

    Raises:
        ValueError: both or neither of the two ways, or only one of the two files.
        FileNotFoundError: a missing directory or file (named).
    """
    with_files = options_file is not None or weight_file is not None
    if with_files and (options_file is None or weight_file is None):
        given = "--options" if options_file is not None else "--weights"
        raise ValueError(f"--options and --weights go together; received only {given}.")
    if with_files and model_dir is not None:
        raise ValueError("give either MODEL_DIR or --options/--weights, not both; received "
                         f"MODEL_DIR {os.fspath(model_dir)!r} and --options "
                         f"{os.fspath(options_file)!r}.")
    if not with_files and model_dir is None:
        raise ValueError("expected a model: MODEL_DIR (with options.json and weights.hdf5, or "
                         "an ELMoForManyLangs model directory) or --options FILE --weights "
                         "FILE; received neither.")
    if model_dir is not None:
        model_dir = os.fspath(model_dir)
        from keras_elmo.formats import model_format

        # An incomplete directory gets the format it is meant to have: its reader then
        # names the file that is missing.
        format = (model_format.intended_format(model_dir) if os.path.isdir(model_dir)
                  else model_format.BILM_TF)
        if format == model_format.EFML:
            return ModelFiles(efml_dir=model_dir, format=format)
        if format == model_format.TFHUB_MODULE:
            return ModelFiles(module_dir=model_dir, format=format)
        options_file, weight_file, mix = find_model_files(model_dir)

        def present(name):
            path = os.path.join(model_dir, name)
            return path if os.path.isfile(path) else None

        return ModelFiles(options_file, weight_file, mix_file=mix,
                          vocab_file=present(VOCAB_FILE), char_dic=present(CHAR_DIC_FILE),
                          word_dic=present(WORD_DIC_FILE))
    for flag, path in (("--options", options_file), ("--weights", weight_file)):
        if not os.path.isfile(path):
            what = "is a directory" if os.path.isdir(path) else "does not exist"
            raise FileNotFoundError(f"{flag} {os.fspath(path)} {what}; expected the biLM's "
                                    f"{'options JSON' if flag == '--options' else 'HDF5 weights'}"
                                    " file.")
    return ModelFiles(os.fspath(options_file), os.fspath(weight_file))
