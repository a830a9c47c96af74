"""keras-elmo's layers are registered with Keras as soon as Keras is loaded.

A `.keras` file that holds an `ElmoLayer` names it `keras_elmo>ElmoLayer`; Keras finds the
class only once the module defining it has run. `import keras_elmo` does not load TensorFlow
(its public names are imported on first use), so `register_when_keras_loads()` makes the
registration follow Keras instead: if Keras is loaded already, the layer modules are imported
now; otherwise they are imported right after the first `import keras`, whoever does it.
Then `import keras_elmo` + `keras.models.load_model("tagger.keras")` works in either order.
When one of our own modules is what loads Keras (`keras_elmo.BiLM` looked up first), the
registration waits until that import is complete (`keras_elmo`'s name lookup calls
`register_if_keras_loaded` after every import it makes).
"""

import contextlib
import importlib
import sys

from keras_elmo.first_import import around_first_import, has_hook

#: Importing this module runs every serializable layer's registration (the biLM pulls in the
#: token encoder, highway, LSTM cell, biLSTM, sentence boundaries; the mix is separate).
LAYER_MODULES = ("keras_elmo.elmo_layer", "keras_elmo.scalar_mix")


def register_when_keras_loads():
    """Registers the layers now (Keras loaded) or right after Keras loads (once)."""
    if "keras" in sys.modules:
        _register()
    elif not has_hook("keras"):
        around_first_import("keras", _then_register)


def register_if_keras_loaded():
    """Registers the layers if Keras is loaded and none of our modules is half imported."""
    if "keras" in sys.modules and not _our_import_in_progress():
        _register()


def _register():
    for name in LAYER_MODULES:
        importlib.import_module(name)


def _our_import_in_progress():
    """True while a keras_elmo module is executing its import (it may be what loads Keras)."""
    return any(getattr(getattr(module, "__spec__", None), "_initializing", False)
               for name, module in list(sys.modules.items())
               if name.startswith("keras_elmo.") and name != __name__)


@contextlib.contextmanager
def _then_register():
    """The context of Keras's first import: our layers are registered once it is done."""
    yield
    register_if_keras_loaded()
