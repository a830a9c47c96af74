"""The layers of the ELMo model, in the order data flows through them (docs/model.md):

    sentence_boundaries.py     `AddSentenceBoundaries` / `RemoveSentenceBoundaries`:
                               `<S> t1 ... tn </S>` around each sentence and off the outputs
    char_cnn_embedder.py       `CharCNNEmbedder`: char ids -> one vector per token (section 2)
    highway.py                 `Highway`: the char CNN's highway layers
    word_embedding.py          `WordEmbedding`: a vocabulary model's word ids -> their share
                               of the token vectors (section 10)
    lstm_projection_cell.py    `LSTMProjectionCell`: the weights and one step of one LSTM
    residual_bilstm.py         `ResidualBiLSTM`: two stacks of cells (section 3); its time
                               loop is each backend's (`keras_elmo.backend`)
    scalar_mix.py              `ScalarMix`: gamma * sum_j softmax(s)_j h_j (section 5)

Importing this package registers every layer with Keras. Layers know nothing of training,
files or export, and are written in `keras.ops`: what differs between Keras' backends
(TensorFlow, JAX, PyTorch) comes from `keras_elmo.backend`.
"""

from keras_elmo.layers.char_cnn_embedder import CharCNNEmbedder
from keras_elmo.layers.highway import Highway
from keras_elmo.layers.lstm_projection_cell import LSTMProjectionCell
from keras_elmo.layers.residual_bilstm import ResidualBiLSTM
from keras_elmo.layers.scalar_mix import ScalarMix
from keras_elmo.layers.sentence_boundaries import AddSentenceBoundaries, RemoveSentenceBoundaries
from keras_elmo.layers.word_embedding import WordEmbedding

__all__ = ["AddSentenceBoundaries", "CharCNNEmbedder", "Highway", "LSTMProjectionCell",
           "RemoveSentenceBoundaries", "ResidualBiLSTM", "ScalarMix", "WordEmbedding"]
