"""The models: `BiLM`, the backbone (char CNN -> residual biLSTM -> `L + 1` layers and the
mask), `ElmoLayer`, a `BiLM` with a task's scalar mixes, and `ElmoPreprocessor`, string
tokens to their ids outside the model (keras-hub's split, for every backend).

Importing this package registers every keras-elmo layer and model with Keras, so a `.keras`
file holding them loads; `import keras, keras_elmo` does it too
(`keras_elmo.keras_registration`):

>>> import keras, keras_elmo
>>> tagger = keras.models.load_model("tagger.keras")  # doctest: +SKIP
"""

from keras_elmo.models.bilm import BiLM
from keras_elmo.models.elmo_layer import ElmoLayer
from keras_elmo.models.elmo_preprocessor import ElmoPreprocessor

__all__ = ["BiLM", "ElmoLayer", "ElmoPreprocessor"]
