"""Export of ELMo biLMs as SavedModels for TF Serving and plain TensorFlow programs.

`export_saved_model(model, path)` writes a SavedModel with the `tokens`, `default`
(= `serving_default`) and `char_ids` signatures of the TF Hub ELMo module; it loads with
`tf.saved_model.load` and nothing of keras-elmo (nor Keras, nor tensorflow-text) installed.
`keras-elmo export MODEL_DIR OUT_DIR` is the command-line front end; docs/serving.md
describes the signatures and a TF Serving deployment. `keras_elmo.formats.model_files` finds the files
of a MODEL_DIR without importing TensorFlow.

Example:
>>> from keras_elmo.export import export_model_dir
>>> export_model_dir("runs/small", "serving/elmo", version=1)  # doctest: +SKIP
>>> elmo = tf.saved_model.load("serving/elmo/1")  # doctest: +SKIP
>>> elmo.signatures["default"](text=tf.constant(["The cat sat ."]))["elmo"]  # doctest: +SKIP
"""

from keras_elmo.lazy_names import lazy_names

#: Public name -> the module that defines it. The modules are imported on first use
#: (PEP 562), not here: importing the package must not load TensorFlow.
_PUBLIC = {
    "DEFAULT_MAX_LENGTH": "keras_elmo.export.elmo_module",
    "MIX_WEIGHTS_FILE": "keras_elmo.formats.model_files",
    "SIGNATURES": "keras_elmo.export.elmo_module",
    "ElmoModule": "keras_elmo.export.elmo_module",
    "build_mix": "keras_elmo.export.mix_weights",
    "export_from_files": "keras_elmo.export.saved_model",
    "export_model_dir": "keras_elmo.export.saved_model",
    "export_model_files": "keras_elmo.export.saved_model",
    "export_saved_model": "keras_elmo.export.saved_model",
    "find_model_files": "keras_elmo.formats.model_files",
    "load_mix_weights": "keras_elmo.export.mix_weights",
    "save_mix_weights": "keras_elmo.export.mix_weights",
    "split_raw_text": "keras_elmo.export.raw_text",
    "split_whitespace": "keras_elmo.text.whitespace",
    "versioned_path": "keras_elmo.export.saved_model",
}

__all__ = sorted(_PUBLIC)

__getattr__, __dir__ = lazy_names(__name__, globals(), _PUBLIC)
