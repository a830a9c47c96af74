"""A model directory: the file names every part of keras-elmo uses, and their lookup.

    MODEL_DIR/options.json     the biLM's options (published layout, ELMO_SPEC.md section 6)
    MODEL_DIR/weights.hdf5     its weights; `keras-elmo train` writes it when a run ends
    MODEL_DIR/scalar_mix.json  optional: trained mix weights (`keras_elmo.export.mix_weights`)
    MODEL_DIR/vocab.txt        optional: the vocabulary (`keras-elmo train` copies it here)

This module imports nothing but `os`, on purpose: the CLI (`keras-elmo embed`, `neighbors`,
`export`) checks MODEL_DIR with `find_model_files` before it loads TensorFlow, so that a
bad directory gives one clean line on stderr and no TensorFlow log lines. The training run's
directory (`keras_elmo.training.model_dir`: checkpoints, logs) builds on these names.

Example:
>>> options_file, weight_file, mix_file = find_model_files("runs/small")  # doctest: +SKIP
"""

import os

OPTIONS_FILE = "options.json"
WEIGHTS_FILE = "weights.hdf5"
#: Name of the mix file looked for in a model directory.
MIX_WEIGHTS_FILE = "scalar_mix.json"
VOCAB_FILE = "vocab.txt"


def find_model_files(model_dir):
    """`(options_file, weight_file, mix_weights_file or None)` of a model directory.

    A training run's directory (`keras-elmo train`) and a published model both hold
    `options.json` and `weights.hdf5`; a `scalar_mix.json` beside them is returned if present.

    Raises:
        FileNotFoundError: the directory or one of the two required files is missing (the
            message says which, and what the directory holds).
    """
    model_dir = os.fspath(model_dir)
    if not os.path.isdir(model_dir):
        what = "is a file" if os.path.exists(model_dir) else "does not exist"
        raise FileNotFoundError(f"model directory not found: {model_dir} {what}; expected a "
                                f"directory with {OPTIONS_FILE} and {WEIGHTS_FILE}.")
    found = []
    for name in (OPTIONS_FILE, WEIGHTS_FILE):
        path = os.path.join(model_dir, name)
        if not os.path.isfile(path):
            present = sorted(os.listdir(model_dir))[:10]
            raise FileNotFoundError(f"{model_dir} has no {name} (it holds {present}); expected "
                                    f"{OPTIONS_FILE} and {WEIGHTS_FILE} (a training run writes "
                                    f"{WEIGHTS_FILE} when it ends).")
        found.append(path)
    mix = os.path.join(model_dir, MIX_WEIGHTS_FILE)
    return found[0], found[1], (mix if os.path.isfile(mix) else None)
