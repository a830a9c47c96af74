"""Keras finds keras-elmo's classes in a `.keras` file after `import keras_elmo` alone.

Keras reads a saved layer's class from its registry (`keras.saving.
register_keras_serializable`), which a module fills when it is imported; it imports no
module of a package it does not know. Importing our model modules at `import keras_elmo`
would load TensorFlow there, and the command line checks its arguments before TensorFlow
starts. So the registry is filled as soon as Keras itself is loaded:

- Keras already imported: the model modules are imported at once (TensorFlow is loaded
  already, they cost little more);
- otherwise a finder on `sys.meta_path` watches the imports of `keras` and of our own
  modules and imports the model modules right after the outermost of them completes with
  Keras loaded. Waiting for the outermost matters: a model module that imports Keras is
  still half-initialised when Keras is done, and importing it again then would fail.

The finder takes itself off `sys.meta_path` once the classes are registered.

Example:
>>> import keras, keras_elmo
>>> tagger = keras.models.load_model("tagger.keras")  # doctest: +SKIP
"""

import importlib
import sys
import threading

#: Importing this module registers every keras-elmo layer and model with Keras.
MODEL_MODULES = "keras_elmo.models"
_PACKAGE = "keras_elmo"
_KERAS = "keras"


def register_with_keras():
    """Registers keras-elmo's Keras classes now if Keras is loaded, else once it is."""
    if _KERAS in sys.modules:
        importlib.import_module(MODEL_MODULES)
    elif not any(isinstance(finder, _RegisterAfterImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _RegisterAfterImport())


def _watched(name):
    return name == _KERAS or name == _PACKAGE or name.startswith(_PACKAGE + ".")


class _RegisterAfterImport:
    """A meta path finder that finds nothing itself: it wraps the loader that the other
    finders give for `keras` and our modules, counting nested imports per thread."""

    def __init__(self):
        self._depth = threading.local()

    def find_spec(self, name, path=None, target=None):
        if not _watched(name):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _CountingLoader(spec.loader, self)
                return spec
        return None

    def entered(self):
        self._depth.value = getattr(self._depth, "value", 0) + 1

    def left(self, succeeded):
        self._depth.value -= 1
        if (succeeded and self._depth.value == 0 and _KERAS in sys.modules
                and self in sys.meta_path):
            sys.meta_path.remove(self)
            importlib.import_module(MODEL_MODULES)


class _CountingLoader:
    """The real loader, with `exec_module` counted; every other attribute is the real
    loader's (package data such as the catalog is read through it)."""

    def __init__(self, loader, finder):
        self._loader = loader
        self._finder = finder

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = self._loader
        self._finder.entered()
        try:
            self._loader.exec_module(module)
        except BaseException:
            self._finder.left(succeeded=False)
            raise
        self._finder.left(succeeded=True)
