"""Keras finds keras-elmo's classes in a `.keras` file after `import keras, keras_elmo`.

Keras reads a saved layer's class from its registry (`keras.saving.
register_keras_serializable`), which a module fills when it is imported; it imports no
module of a package it does not know. Importing our model modules at every `import
keras_elmo` would load TensorFlow there, and the command line checks its arguments before
TensorFlow starts. So they are imported when Keras is loaded already (TensorFlow with it,
so they cost little more): at `import keras_elmo` after `import keras` (the order sorted
imports have), and at the first use of any public name of `keras_elmo`. Otherwise,
`import keras_elmo.models` (or using `keras_elmo.ElmoLayer`) registers them.

Where Keras cannot be imported because its backend's package is missing (KERAS_BACKEND=jax
without JAX, Keras' default TensorFlow without TensorFlow), the first use of a public name
says so in the command line's one line, with the extra to install
(`explain_missing_backend`), instead of Keras' `No module named 'tensorflow'` trace.

Example:
>>> import keras, keras_elmo
>>> tagger = keras.models.load_model("tagger.keras")  # doctest: +SKIP
"""

import importlib
import sys

#: Importing this module registers every keras-elmo layer and model with Keras.
MODEL_MODULES = "keras_elmo.models"


def register_with_keras():
    """Registers keras-elmo's Keras classes if Keras is loaded (module docstring)."""
    if "keras" in sys.modules and MODEL_MODULES not in sys.modules:
        importlib.import_module(MODEL_MODULES)


def explain_missing_backend(error, what):
    """Raises `MissingPackageError`, one line naming the extra to install (the command
    line's own, `keras_backend.require_backend`), when `error` (a `ModuleNotFoundError` from
    importing `what`, e.g. `"keras_elmo.ElmoLayer"`) is Keras failing for want of its
    configured backend's package; returns otherwise (the caller re-raises `error`)."""
    from keras_elmo.process import keras_backend

    name, _ = keras_backend.configured_backend()
    missing = (error.name or "").split(".")[0]
    if missing == name and name in keras_backend.BACKENDS and not keras_backend.installed(name):
        try:
            keras_backend.require_backend(what)
        except keras_backend.MissingPackageError as clear:
            raise clear from None  # Keras' own trace says nothing more
