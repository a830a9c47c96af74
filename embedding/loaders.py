"""A model directory: `options.json` + `weights.hdf5` (published layout), maybe `vocab.txt`,
or an ELMoForManyLangs model directory (`load_bilm` reads every kind), or a published
model's name (`keras_elmo.pretrained`).

`keras-elmo train` writes all three; a published ELMo model has the first two. The file
names and the lookup are `keras_elmo.formats.model_files`'s; this module adds the loaders.

Example:
>>> bilm = load_bilm("runs/people_daily_small")  # doctest: +SKIP
>>> cache = load_token_cache(bilm, "runs/people_daily_small/vocab.txt")  # doctest: +SKIP
"""

from keras_elmo.formats.model_files import find_model_files


def model_files(model_dir):
    """`(options_file, weight_file)` of a model directory (see `keras_elmo.formats.model_files`),
    or of a published model's name (`keras-elmo models`), fetched into the cache once.

    Raises:
        FileNotFoundError: the directory or one of the two files is missing (the message
            says which, and what the directory holds).
    """
    from keras_elmo.pretrained.resolve import resolve_model

    options_file, weight_file, _ = find_model_files(resolve_model(model_dir).model_dir)
    return options_file, weight_file


def load_bilm(model_dir):
    """A stateless `keras_elmo.BiLM` of any model directory (`keras_elmo.models.loading`:
    ours, a published one, an ELMoForManyLangs one; or a published model's name), frozen
    (`trainable=False`) for embedding."""
    from keras_elmo.models.loading import load_bilm as load

    bilm = load(model_dir)
    bilm.trainable = False
    return bilm


def load_token_cache(bilm, vocab_file):
    """A `TokenEmbeddingCache` over the tokens of a one-token-per-line file."""
    from keras_elmo.embedding.token_cache import TokenEmbeddingCache
    from keras_elmo.formats.token_cache import read_vocab_file

    return TokenEmbeddingCache(bilm, read_vocab_file(vocab_file))
