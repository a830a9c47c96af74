"""keras-elmo: ELMo deep contextualized word representations as Keras 3 layers.

The tree follows the model: characters -> token encoder (`CharCNNEmbedder`) -> contextual
encoder (`ResidualBiLSTM`) -> `BiLM` -> `ScalarMix` -> `ElmoLayer`; `weight_file` reads and
writes the published bilm-tf / AllenNLP layout.

Example:
>>> import keras_elmo
>>> elmo = keras_elmo.ElmoLayer.from_weights("options.json", "weights.hdf5")  # doctest: +SKIP
>>> vectors = elmo(tf.constant([["The", "cat", "sat"], ["Hello", "", ""]]))  # (2, 3, 1024)
"""

from keras_elmo.bilm import BiLM
from keras_elmo.char_cnn_embedder import CharCNNEmbedder
from keras_elmo.characters import batch_to_ids, token_to_char_ids
from keras_elmo.elmo_layer import ElmoLayer
from keras_elmo.highway import Highway
from keras_elmo.lstm_projection_cell import LSTMProjectionCell
from keras_elmo.options import BiLMOptions
from keras_elmo.residual_bilstm import ResidualBiLSTM
from keras_elmo.scalar_mix import ScalarMix
from keras_elmo.token_cache import TokenEmbeddingCache
from keras_elmo.weight_file import load_bilm_weights, save_bilm_weights, save_published

__version__ = "0.1.0"

__all__ = [
    "BiLM",
    "BiLMOptions",
    "CharCNNEmbedder",
    "ElmoLayer",
    "Highway",
    "LSTMProjectionCell",
    "ResidualBiLSTM",
    "ScalarMix",
    "TokenEmbeddingCache",
    "batch_to_ids",
    "load_bilm_weights",
    "save_bilm_weights",
    "save_published",
    "token_to_char_ids",
]
