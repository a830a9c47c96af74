"""Warm start: a new training run that begins from an existing biLM (domain adaptation).

ELMo's paper (section 3.4) fine-tunes the biLM on the task's own text before using it: the
perplexity on that text drops and the task gains. `keras-elmo train NEW_DIR --init-from
SOURCE_DIR` does this. `SOURCE_DIR` is any model directory in the published layout:

    SOURCE_DIR/options.json   the architecture (the new run takes it over)
    SOURCE_DIR/weights.hdf5   char CNN, highway, projection, LSTMs (docs/model.md section 6)
    SOURCE_DIR/vocab.txt      optional, with SOURCE_DIR/checkpoints/ (a `keras-elmo train`
                              directory): the softmax rows of the words the two
                              vocabularies share are copied too

An ELMoForManyLangs model directory, as downloaded, is a source too: the run becomes a
vocabulary model (docs/model.md section 10) that keeps EFML's char.dic and word.dic for its
input side (`ModelDir.prepare` copies them) and starts a new softmax over the run's
vocabulary (EFML's releases carry none). A TF1 Hub module (Google's `elmo`, DeepPavlov's) is
one as well: its biLM's weights, a new softmax.

So a bilm-tf / AllenNLP model (weights only) starts its new softmax from scratch, and one
of ours keeps what its softmax learned for every word it knew. The new vocabulary may differ
from the source's (words of the new domain): new words get the softmax's usual
initialisation. Only the weights are taken; the optimizer, step and data position start
afresh.

The weights are loaded into the new run's backbone (`model.backbone`, a `BiLM`): from
weights.hdf5 for a published model, from the newest checkpoint for one of ours (weights.hdf5
is written only when a run ends, so it may be older); no second model is built.

Example:
>>> model = LanguageModel.from_training_config(config)  # doctest: +SKIP
>>> warm_start(model, "runs/people_daily_small", Vocabulary.load("reviews_vocab.txt"))
{'source': 'runs/people_daily_small', 'softmax_rows_copied': 8124, 'vocab_size': 10342}
"""

import dataclasses
import os

import numpy as np

from keras_elmo.formats.model_files import find_model_files, resolve_model_files
from keras_elmo.formats.options import BiLMOptions


def source_options(source_dir):
    """The architecture (`BiLMOptions`, training keys dropped) of `SOURCE_DIR/options.json`,
    or of an ELMoForManyLangs model directory (`efml_options`).

    Raises:
        FileNotFoundError: no directory or no options.json / weights.hdf5 in it.
        ValueError: an ELMoForManyLangs directory whose files do not fit (named).
    """
    try:
        files = resolve_model_files(source_dir)
        if files.efml_dir is not None:
            from keras_elmo.formats.efml_weights import efml_options_of_dir

            return efml_options_of_dir(files.efml_dir)
        if files.module_dir is not None:
            from keras_elmo.formats.tfhub_module import read_tfhub_module

            return BiLMOptions.from_dict(
                read_tfhub_module(files.module_dir, weights=False).options)
    except FileNotFoundError as error:
        raise FileNotFoundError(f"--init-from {error}") from None
    options = BiLMOptions.from_file(files.options_file)
    return dataclasses.replace(options, extra={})


def warm_start(model, source_dir, vocab):
    """Loads a source biLM's weights into a freshly built `LanguageModel`'s backbone.

    Args:
        model: `keras_elmo.training.language_model.LanguageModel`, built, with the source's
            architecture (variables may be mirrored: call in cross-replica context).
        source_dir: str, the source model directory (see the module docstring).
        vocab: `keras_elmo.training.vocabulary.Vocabulary` of `model`'s softmax.

    Returns:
        dict: `source`, `softmax_rows_copied` (0 without a source softmax), `vocab_size`.

    Raises:
        FileNotFoundError: see `source_options`.
        ValueError: the architectures differ (names the first differing option), or the
            weight file / checkpoint does not fit them.
    """
    from keras_elmo.formats.weight_file import load_bilm_weights
    from keras_elmo.training.model_dir import ModelDir, load_backbone_from_checkpoint
    from keras_elmo.training.vocabulary import Vocabulary

    source_dir = os.fspath(source_dir)
    check_source(model.options, source_dir)
    files = resolve_model_files(source_dir)
    if files.efml_dir is not None:  # EFML releases have no softmax
        from keras_elmo.formats.efml_weights import load_efml_weights

        load_efml_weights(model.backbone, source_dir)
        return {"source": source_dir, "softmax_rows_copied": 0, "vocab_size": len(vocab)}
    if files.module_dir is not None:  # nor have TF Hub modules
        from keras_elmo.formats.tfhub_module import read_tfhub_module
        from keras_elmo.formats.weight_file import load_bilm_arrays

        load_bilm_arrays(model.backbone, read_tfhub_module(source_dir).arrays,
                         f"TF Hub module {source_dir}")
        return {"source": source_dir, "softmax_rows_copied": 0, "vocab_size": len(vocab)}
    source = ModelDir(source_dir)
    copied = 0
    checkpoint = (source.latest_checkpoint() if os.path.isfile(source.vocab_path) else None)
    if checkpoint is not None:  # one of our runs: backbone and softmax from its checkpoint
        softmax = load_backbone_from_checkpoint(model.backbone, checkpoint)
        copied = _copy_softmax_rows(softmax, Vocabulary.load(source.vocab_path), model, vocab)
    else:  # published weights only: no softmax
        load_bilm_weights(model.backbone, find_model_files(source_dir)[1])
    return {"source": source_dir, "softmax_rows_copied": copied, "vocab_size": len(vocab)}


def check_source(options, source_dir):
    """Refuses a source whose files are missing or whose architecture is not `options`.

    Called by `keras-elmo train` before it writes anything, and again by `warm_start`.

    Raises:
        FileNotFoundError: see `source_options`.
        ValueError: the architectures differ (names the first differing option).
    """
    theirs_options = source_options(source_dir)
    mine = dataclasses.replace(options, extra={})
    if mine != theirs_options:
        key, theirs, ours = _first_difference(theirs_options.to_dict(), mine.to_dict())
        raise ValueError(f"--init-from {source_dir}: its architecture differs from this run's "
                         f"({key} is {theirs!r} there, {ours!r} here); drop the architecture "
                         "flags / --config keys so the run takes the source's options.")


def _copy_softmax_rows(source_softmax, source_vocab, model, vocab):
    """Softmax rows (W, b) of the words in both vocabularies; returns how many.

    `source_softmax` is `(embeddings, bias)`, numpy arrays of the source's vocabulary size.
    """
    index = {token: i for i, token in enumerate(source_vocab.tokens)}
    pairs = [(i, index[token]) for i, token in enumerate(vocab.tokens) if token in index]
    if not pairs:
        return 0
    rows, source_rows = (np.array(column) for column in zip(*pairs))
    embeddings = model.softmax.embeddings.numpy()
    bias = model.softmax.bias.numpy()
    embeddings[rows] = source_softmax[0][source_rows]
    bias[rows] = source_softmax[1][source_rows]
    model.softmax.embeddings.assign(embeddings)
    model.softmax.bias.assign(bias)
    return len(pairs)


def _first_difference(left, right, prefix=""):
    for key in sorted(set(left) | set(right)):
        a, b = left.get(key), right.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            found = _first_difference(a, b, f"{prefix}{key}.")
            if found:
                return found
        elif a != b:
            return f"{prefix}{key}", a, b
    return None
