"""Export of ELMo biLMs as SavedModels for TF Serving and plain TensorFlow programs.

`export_saved_model(model, path)` writes a SavedModel with the `tokens`, `default`
(= `serving_default`) and `char_ids` signatures of the TF Hub ELMo module; it loads with
`tf.saved_model.load` and nothing of keras-elmo (nor Keras, nor tensorflow-text) installed.
`keras-elmo export MODEL_DIR OUT_DIR` is the command-line front end; docs/serving.md
describes the signatures and a TF Serving deployment. `export.model_dir` finds the files of
a MODEL_DIR without importing TensorFlow (the CLI and `applications` use it too).

Example:
>>> from keras_elmo.export import export_model_dir
>>> export_model_dir("runs/small", "serving/elmo", version=1)  # doctest: +SKIP
>>> elmo = tf.saved_model.load("serving/elmo/1")  # doctest: +SKIP
>>> elmo.signatures["default"](text=tf.constant(["The cat sat ."]))["elmo"]  # doctest: +SKIP
"""

import importlib

#: Public name -> the module that defines it. The modules are imported on first use
#: (PEP 562), not here: `export.model_dir` is imported by the CLI before TensorFlow is
#: loaded, and importing it runs this file first.
_PUBLIC = {
    "DEFAULT_MAX_LENGTH": "keras_elmo.export.elmo_module",
    "MIX_WEIGHTS_FILE": "keras_elmo.export.model_dir",
    "SIGNATURES": "keras_elmo.export.elmo_module",
    "ElmoModule": "keras_elmo.export.elmo_module",
    "build_mix": "keras_elmo.export.mix_weights",
    "export_from_files": "keras_elmo.export.saved_model",
    "export_model_dir": "keras_elmo.export.saved_model",
    "export_saved_model": "keras_elmo.export.saved_model",
    "find_model_files": "keras_elmo.export.model_dir",
    "load_mix_weights": "keras_elmo.export.mix_weights",
    "save_mix_weights": "keras_elmo.export.mix_weights",
    "split_whitespace": "keras_elmo.export.whitespace",
    "versioned_path": "keras_elmo.export.saved_model",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'export' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value  # later look-ups do not come here
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
