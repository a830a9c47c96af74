"""A model directory: `options.json` + `weights.hdf5` (published layout), maybe `vocab.txt`.

`keras-elmo train` writes all three; a published ELMo model has the first two.

Example:
>>> bilm = load_bilm("runs/people_daily_small")  # doctest: +SKIP
>>> cache = load_token_cache(bilm, "runs/people_daily_small/vocab.txt")  # doctest: +SKIP
"""

import os

OPTIONS_FILE = "options.json"
WEIGHTS_FILE = "weights.hdf5"
VOCAB_FILE = "vocab.txt"


def model_files(model_dir):
    """`(options_file, weight_file)` of a model directory.

    Raises:
        FileNotFoundError: the directory or one of the two files is missing (the message
            says which, and what the directory holds).
    """
    model_dir = os.fspath(model_dir)
    if not os.path.isdir(model_dir):
        what = "is a file" if os.path.exists(model_dir) else "does not exist"
        raise FileNotFoundError(f"model directory not found: {model_dir} {what}; expected a "
                                f"directory with {OPTIONS_FILE} and {WEIGHTS_FILE}.")
    paths = []
    for name in (OPTIONS_FILE, WEIGHTS_FILE):
        path = os.path.join(model_dir, name)
        if not os.path.isfile(path):
            present = sorted(os.listdir(model_dir))[:10]
            raise FileNotFoundError(f"{model_dir} has no {name} (it holds {present}); expected "
                                    f"{OPTIONS_FILE} and {WEIGHTS_FILE} (a training run writes "
                                    f"{WEIGHTS_FILE} when it ends).")
        paths.append(path)
    return tuple(paths)


def load_bilm(model_dir):
    """A stateless `keras_elmo.BiLM` with the weights of `model_dir`."""
    from keras_elmo import BiLM

    options_file, weight_file = model_files(model_dir)
    return BiLM.from_weights(options_file, weight_file)


def load_token_cache(bilm, vocab_file, batch_size=None):
    """A `TokenEmbeddingCache` over the tokens of a one-token-per-line file."""
    from keras_elmo.token_cache import DEFAULT_BATCH_SIZE, TokenEmbeddingCache, read_vocab_file

    return TokenEmbeddingCache(bilm, read_vocab_file(vocab_file),
                               batch_size=batch_size or DEFAULT_BATCH_SIZE)
