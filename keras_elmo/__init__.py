"""keras-elmo: ELMo deep contextualized word representations as Keras 3 layers.

The folders follow the model (docs/model.md):

    text/      tokens of a line, and tokens -> character ids (`batch_to_ids`)
    layers/    the model's pieces: `CharCNNEmbedder` (with `Highway`), `WordEmbedding`,
               sentence boundaries, `LSTMProjectionCell` -> `ResidualBiLSTM`, `ScalarMix`
    models/    `BiLM`, the backbone (char CNN -> residual biLSTM), `ElmoLayer`, a BiLM
               with the task's scalar mixes, and `load_bilm`, the biLM of any model directory
               or published model's name
    formats/   files: options.json (`BiLMOptions`), the published weight files,
               ELMoForManyLangs model directories and their .dic vocabularies, the token
               embedding file, a model directory's file names
    pretrained/ the published models by name (`pretrained_models`, `download_model`): the
               catalog, downloads checked and cached
    process/   helpers of a running process: atomic files, memory, CPU threads, progress

Public names are imported on first use (PEP 562), so `import keras_elmo` does not load
TensorFlow (the command line checks its arguments before that). Keras finds our layers in a
`.keras` file after `import keras, keras_elmo` (in that order, as sorted imports have it)
or once any public name here has been used (`keras_elmo.keras_registration`).

Example:
>>> import keras_elmo
>>> elmo = keras_elmo.ElmoLayer.from_weights("options.json", "weights.hdf5")  # doctest: +SKIP
>>> vectors = elmo(tf.constant([["The", "cat", "sat"], ["Hello", "", ""]]))  # (2, 3, 1024)
"""

from keras_elmo.keras_registration import explain_missing_backend, register_with_keras
from keras_elmo.lazy_names import lazy_names

#: Public name -> the module that defines it.
_PUBLIC = {
    "BiLM": "keras_elmo.models.bilm",
    "BiLMOptions": "keras_elmo.formats.options",
    "CharCNNEmbedder": "keras_elmo.layers.char_cnn_embedder",
    "ElmoEmbedder": "keras_elmo.embedding.embedder",
    "ElmoLayer": "keras_elmo.models.elmo_layer",
    "ElmoPreprocessor": "keras_elmo.models.elmo_preprocessor",
    "Highway": "keras_elmo.layers.highway",
    "LSTMProjectionCell": "keras_elmo.layers.lstm_projection_cell",
    "ResidualBiLSTM": "keras_elmo.layers.residual_bilstm",
    "ScalarMix": "keras_elmo.layers.scalar_mix",
    "StorageError": "keras_elmo.process.storage_errors",
    "TokenEmbeddingCache": "keras_elmo.embedding.token_cache",
    "TokenVocabulary": "keras_elmo.text.token_vocabulary",
    "WordEmbedding": "keras_elmo.layers.word_embedding",
    "batch_to_ids": "keras_elmo.text.characters",
    "download_model": "keras_elmo.pretrained.resolve",
    "efml_vocabulary": "keras_elmo.formats.efml_weights",
    "load_bilm": "keras_elmo.models.loading",
    "load_bilm_weights": "keras_elmo.formats.weight_file",
    "pretrained_models": "keras_elmo.pretrained.resolve",
    "save_bilm_weights": "keras_elmo.formats.weight_file",
    "save_published": "keras_elmo.formats.weight_file",
    "token_to_char_ids": "keras_elmo.text.characters",
    "vocabulary_batch_to_ids": "keras_elmo.text.token_vocabulary",
}

__version__ = "0.1.0"

__all__ = sorted(_PUBLIC)

__getattr__, __dir__ = lazy_names(__name__, globals(), _PUBLIC,
                                   after_import=register_with_keras,
                                   on_missing_module=explain_missing_backend)

register_with_keras()
