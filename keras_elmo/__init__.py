"""keras-elmo: ELMo deep contextualized word representations as Keras 3 layers.

The tree follows the model: characters -> token encoder (`CharCNNEmbedder`) -> contextual
encoder (`ResidualBiLSTM`) -> `BiLM` -> `ScalarMix` -> `ElmoLayer`; `weight_file` reads and
writes the published bilm-tf / AllenNLP layout.

Example:
>>> import keras_elmo
>>> elmo = keras_elmo.ElmoLayer.from_weights("options.json", "weights.hdf5")  # doctest: +SKIP
>>> vectors = elmo(tf.constant([["The", "cat", "sat"], ["Hello", "", ""]]))  # (2, 3, 1024)
"""

from keras_elmo.keras_registration import register_if_keras_loaded, register_when_keras_loads
from keras_elmo.lazy_names import lazy_names

#: Public name -> the module that defines it. Modules are imported on first use (PEP 562), so
#: `import keras_elmo` and the command line's argument checks do not load TensorFlow.
_PUBLIC = {
    "BiLM": "keras_elmo.bilm",
    "BiLMOptions": "keras_elmo.options",
    "CharCNNEmbedder": "keras_elmo.char_cnn_embedder",
    "ElmoEmbedder": "keras_elmo.embedding.embedder",
    "ElmoLayer": "keras_elmo.elmo_layer",
    "Highway": "keras_elmo.highway",
    "LSTMProjectionCell": "keras_elmo.lstm_projection_cell",
    "ResidualBiLSTM": "keras_elmo.residual_bilstm",
    "ScalarMix": "keras_elmo.scalar_mix",
    "TokenEmbeddingCache": "keras_elmo.token_cache",
    "batch_to_ids": "keras_elmo.characters",
    "load_bilm_weights": "keras_elmo.weight_file",
    "save_bilm_weights": "keras_elmo.weight_file",
    "save_published": "keras_elmo.weight_file",
    "token_to_char_ids": "keras_elmo.characters",
}

__version__ = "0.1.0"

__all__ = sorted(_PUBLIC)

__getattr__, __dir__ = lazy_names(__name__, globals(), _PUBLIC,
                                  after_import=register_if_keras_loaded)

register_when_keras_loads()  # so that a .keras file with our layers loads after this import
