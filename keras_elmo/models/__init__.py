"""The models: `BiLM`, the backbone (char CNN -> residual biLSTM -> `L + 1` layers and the
mask), and `ElmoLayer`, a `BiLM` with a task's scalar mixes.

Importing this package registers every keras-elmo layer and model with Keras, so a `.keras`
file holding them loads; `import keras, keras_elmo` does it too
(`keras_elmo.keras_registration`):

>>> import keras, keras_elmo
>>> tagger = keras.models.load_model("tagger.keras")  # doctest: +SKIP
"""

from keras_elmo.models.bilm import BiLM
from keras_elmo.models.elmo_layer import ElmoLayer

__all__ = ["BiLM", "ElmoLayer"]
