"""Export of ELMo biLMs as SavedModels for TF Serving and plain TensorFlow programs.

`export_saved_model(model, path)` writes a SavedModel with the `tokens`, `default`
(= `serving_default`) and `char_ids` signatures of the TF Hub ELMo module; it loads with
`tf.saved_model.load` and nothing of keras-elmo (nor Keras, nor tensorflow-text) installed.
`keras-elmo export MODEL_DIR OUT_DIR` is the command-line front end; docs/serving.md
describes the signatures and a TF Serving deployment.

Example:
>>> from export import export_model_dir
>>> export_model_dir("runs/small", "serving/elmo", version=1)  # doctest: +SKIP
>>> elmo = tf.saved_model.load("serving/elmo/1")  # doctest: +SKIP
>>> elmo.signatures["default"](text=tf.constant(["The cat sat ."]))["elmo"]  # doctest: +SKIP
"""

from export.elmo_module import DEFAULT_MAX_LENGTH, SIGNATURES, ElmoModule
from export.mix_weights import (MIX_WEIGHTS_FILE, build_mix, load_mix_weights,
                                save_mix_weights)
from export.saved_model import (export_from_files, export_model_dir, export_saved_model,
                                find_model_files, versioned_path)
from export.whitespace import split_whitespace

__all__ = [
    "DEFAULT_MAX_LENGTH",
    "MIX_WEIGHTS_FILE",
    "SIGNATURES",
    "ElmoModule",
    "build_mix",
    "export_from_files",
    "export_model_dir",
    "export_saved_model",
    "find_model_files",
    "load_mix_weights",
    "save_mix_weights",
    "split_whitespace",
    "versioned_path",
]
