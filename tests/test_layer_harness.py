"""Every registered keras-elmo layer and model through the shared contract test
(`layer_test_harness.run_layer_test`): symbolic/eager calls, config and `.keras` round
trips, masks, padding invariance, float32/bfloat16 policies and one training step."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

import keras_elmo
from cpu_class import needs_bfloat16_products
from layer_test_harness import DEFAULT_POLICIES, run_dtype_policy_test, run_layer_test

# === The layer table: the only lines that name where each class lives ===
from keras_elmo.layers import AddSentenceBoundaries, RemoveSentenceBoundaries, WordEmbedding
from keras_elmo.text.token_vocabulary import TokenVocabulary, vocabulary_batch_to_ids
from keras_elmo.training.language_model import LanguageModel
from keras_elmo.training.softmax import SharedSoftmax
Highway = keras_elmo.Highway
LSTMProjectionCell = keras_elmo.LSTMProjectionCell
CharCNNEmbedder = keras_elmo.CharCNNEmbedder
ResidualBiLSTM = keras_elmo.ResidualBiLSTM
ScalarMix = keras_elmo.ScalarMix
ElmoLayer = keras_elmo.ElmoLayer
BiLM = keras_elmo.BiLM

OPTIONS = keras_elmo.BiLMOptions.tiny()  # F = 20 filters, P = 8, D = 12, 2 layers
P, UNITS, LAYERS = OPTIONS.projection_dim, OPTIONS.lstm_units, OPTIONS.num_layers
OUT = OPTIONS.output_dim  # 2 * P


def make_elmo_layer(**kwargs):
    """An `ElmoLayer` over a `BiLM` backbone object of the same dtype policy."""
    return ElmoLayer(BiLM(OPTIONS, name="bilm", dtype=kwargs.get("dtype")), **kwargs)


def make_language_model(**kwargs):
    """The language-model head over a `BiLM` backbone object (vocabulary of 20 words)."""
    return LanguageModel(BiLM(OPTIONS, dropout=0.1, name="bilm", dtype=kwargs.get("dtype")),
                         vocab_size=20, dropout=0.1, **kwargs)


@keras.saving.register_keras_serializable(package="keras_elmo_tests")
class CellLoop(keras.layers.Layer):
    """Test-only: runs one `LSTMProjectionCell` left to right over `(batch, T, input_dim)`
    with the cell's own `input_gates` + `step` (as `ResidualBiLSTM` does) and returns every
    step's `h`, `(batch, T, projection_dim)`. Its config holds the cell's `get_config()`,
    rebuilt with `LSTMProjectionCell.from_config`; `.keras` files go through the cell's own
    `save_own_variables` / `load_own_variables`."""

    def __init__(self, cell_config, **kwargs):
        super().__init__(**kwargs)
        self.cell = LSTMProjectionCell.from_config({**cell_config, "dtype": self.dtype_policy})

    def build(self, input_shape):
        self.cell.build(input_shape)

    def call(self, inputs):
        # the cell is feature-major: (input_dim, T, batch) -> gates (4U, T, batch)
        gates = self.cell.input_gates(tf.transpose(ops.cast(inputs, self.compute_dtype),
                                                   (2, 1, 0)))
        state = self.cell.zero_state(tf.shape(inputs)[0])  # (P, batch), (U, batch)
        outputs = []
        for t in range(inputs.shape[1]):  # static T: the tests' sequences are tiny
            state = self.cell.step(gates[:, t], state)
            outputs.append(tf.transpose(state[0]))  # (batch, P)
        return tf.stack(outputs, axis=1)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.cell.projection_dim,)

    def get_config(self):
        return {**super().get_config(), "cell_config": self.cell.get_config()}


def _rng():
    return np.random.default_rng(0)


def _floats(*shape):
    return _rng().normal(size=shape).astype("float32")


def _mask(lengths, steps):
    return np.arange(steps)[None, :] < np.asarray(lengths)[:, None]


def _garbage_after(x, mask, axis):
    """`x` with large random values wherever `mask` (batch, T) is False (T on `axis`)."""
    shape = [mask.shape[0]] + [1] * (x.ndim - 1)
    shape[axis] = mask.shape[1]
    noise = 100.0 * _rng().normal(size=x.shape).astype("float32")
    return np.where(mask.reshape(shape), x, noise).astype("float32")


IDS = keras_elmo.batch_to_ids([["The", "cat", "sat"], ["a"]])  # (2, 3, 50), one padded row
IDS_5 = np.pad(IDS, ((0, 0), (0, 2), (0, 0)))  # two more all-zero (padding) tokens
FRAMED_IDS = keras_elmo.batch_to_ids([["<S>", "The", "cat", "sat", "</S>"], ["<S>", "a", "</S>"]])
X_5 = _floats(2, 5, P)  # Highway / LSTM inputs, T = 5
MASK_5, MASK_3 = _mask([5, 3], 5), _mask([3, 2], 3)
SHORT_SEQ = {"inputs": X_5[:, :3], "mask": MASK_3}
PADDED_SEQ = {"inputs": _garbage_after(X_5, _mask([3, 2], 5), 1), "mask": _mask([3, 2], 5)}
STACK_5 = _floats(2, LAYERS + 1, 5, P)  # ScalarMix inputs, T = 5
BOUNDARIES = _floats(2, 2, P)  # per row: the <S> and </S> vectors
STARTS_5 = np.array([[1, 0, 0, 1, 0], [1, 0, 0, 0, 0]], bool)  # packed rows: 2 and 1 sequences
FRAMED_7 = _floats(2, 3, 7, P)  # RemoveSentenceBoundaries inputs: <S> + 5 tokens + </S>
FRAMED_MASK_7 = _mask([7, 4], 7)
REAL_3 = np.s_[:, :3]
WORD_IDS = np.array([[3, 1, 5], [2, 0, 0]], np.int32)  # (2, 3) shifted word ids, 0 = padding
WORD_IDS_5 = np.pad(WORD_IDS, ((0, 0), (0, 2)))
# A vocabulary model (docs/model.md section 10): 9 chars (specials 0-5, "abc") + row 0.
VOCABULARY = TokenVocabulary(chars={"a": 6, "b": 7, "c": 8}, unknown_char=0, padding_char=1,
                             begin_word_char=2, end_word_char=3, begin_sentence_char=4,
                             end_sentence_char=5)
VOCABULARY_OPTIONS = keras_elmo.BiLMOptions.tiny(
    char_vocabulary=True, num_characters=10, padding_char=1, begin_word_char=2,
    end_word_char=3, begin_sentence_char=4, end_sentence_char=5, forget_bias=0.0)
VOCABULARY_IDS = vocabulary_batch_to_ids(VOCABULARY, [["abc", "dx", "a"], ["bad"]])["char_ids"]
VOCABULARY_IDS_5 = np.pad(VOCABULARY_IDS, ((0, 0), (0, 2), (0, 0)))
# The same with a word table of 4 words: the model takes [char_ids, word_ids] here (a list,
# Keras' order of its dict inputs: the harness passes a dict as keywords).
WORDS_OPTIONS = keras_elmo.BiLMOptions.from_dict({
    **VOCABULARY_OPTIONS.to_dict(),
    "word_embedding": {"dim": 3, "n_words": 4, "begin_sentence": 1, "end_sentence": 1}})
WORD_INPUTS = [VOCABULARY_IDS, np.array([[4, 1, 3], [1, 0, 0]], np.int32)]
WORD_INPUTS_5 = [VOCABULARY_IDS_5, np.pad(WORD_INPUTS[1], ((0, 0), (0, 2)))]


ELMO_DICT_KWARGS = dict(num_output_representations=2, do_layer_norm=True, return_layers=True)
ELMO_DICT_CHECKS = dict(
    input_data=IDS, expected_mask=None, expected_trainable_count=4,
    expected_output_shape={"elmo": [(2, 3, OUT), (2, 3, OUT)], "layers": (2, LAYERS + 1, 3, OUT)},
    float32_outputs=("layers",),  # the biLM's documented float32 output
    padding_check=(IDS, IDS_5, {"elmo": REAL_3, "layers": np.s_[:, :, :3]}))


def _bilm_padding_pairs(call):
    """Trailing padding tokens, and a longer neighbour in the batch, change no real position
    of a sentence: the harness's callable form of `padding_check`."""
    batch, padded, alone = call(IDS), call(IDS_5), call(IDS[1:, :1])  # row 1 is ["a"]
    real = {"layers": np.s_[:, :, :3], "mask": REAL_3}
    return [({k: np.asarray(padded[k])[i] for k, i in real.items()},
             {k: np.asarray(batch[k])[i] for k, i in real.items()}),
            ({"layers": np.asarray(batch["layers"])[1:, :, :1],
              "mask": np.asarray(batch["mask"])[1:, :1]}, alone)]


def _vocabulary_bilm_padding_pairs(call, short=VOCABULARY_IDS, padded=VOCABULARY_IDS_5,
                                   first_of_row_1=VOCABULARY_IDS[1:, :1]):
    """`_bilm_padding_pairs` for the vocabulary model's char ids (or `[char_ids,
    word_ids]`)."""
    batch, padded, alone = call(short), call(padded), call(first_of_row_1)
    real = {"layers": np.s_[:, :, :3], "mask": REAL_3}
    return [({k: np.asarray(padded[k])[i] for k, i in real.items()},
             {k: np.asarray(batch[k])[i] for k, i in real.items()}),
            ({"layers": np.asarray(batch["layers"])[1:, :, :1],
              "mask": np.asarray(batch["mask"])[1:, :1]}, alone)]


def _language_model_loss(model, char_ids):
    """The training step's objective (sampled off: a 20-word vocabulary)."""
    token_ids = np.array([[0, 3, 4, 5, 1], [0, 6, 1, 0, 0]], np.int32)
    sums = model.nll_sums(char_ids, token_ids, training=True)
    return 0.5 * (sums["forward"] + sums["backward"]) / sums["count"]


def _cases():
    """(id, layer_cls, init_kwargs, run_layer_test keywords[, pytest mark])."""
    return [
        ("Highway", Highway, {}, dict(
            input_data=X_5, expected_output_shape=(2, 5, P), expected_trainable_count=4,
            padding_check=(X_5[:, :3], X_5 + np.pad(_floats(2, 2, P), ((0, 0), (3, 0), (0, 0))),
                           REAL_3))),
        ("LSTMProjectionCell", CellLoop, {"cell_config": dict(
            units=UNITS, projection_dim=P, cell_clip=3.0, proj_clip=3.0,
            name="cell")}, dict(
            input_data=X_5, expected_output_shape=(2, 5, P), expected_trainable_count=4,
            padding_check=(X_5[:, :3], X_5, REAL_3))),
        ("AddSentenceBoundaries", AddSentenceBoundaries, {}, dict(
            input_data={"vectors": X_5, "boundaries": BOUNDARIES, "mask": _mask([3, 2], 5)},
            expected_output_shape=((2, 7, P), (2, 7)), expected_mask=None,
            expected_trainable_count=0, run_fit=False, padding_check=(
                {"vectors": X_5[:, :3], "boundaries": BOUNDARIES, "mask": MASK_3},
                {"vectors": _garbage_after(X_5, _mask([3, 2], 5), 1),
                 "boundaries": BOUNDARIES, "mask": _mask([3, 2], 5)},
                np.s_[:, :5]))),
        ("AddSentenceBoundaries-packed", AddSentenceBoundaries, {}, dict(
            input_data={"vectors": X_5, "boundaries": BOUNDARIES, "mask": MASK_5,
                        "sequence_starts": STARTS_5},
            expected_output_shape=((2, 5, P), (2, 5)), expected_mask=None,
            expected_trainable_count=0, run_fit=False)),
        ("WordEmbedding", WordEmbedding, dict(vocabulary_size=6, embedding_dim=4,
                                              output_dim=P), dict(
            input_data=WORD_IDS, expected_output_shape=(2, 3, P), expected_mask=WORD_IDS != 0,
            expected_trainable_count=2, padding_check=(WORD_IDS, WORD_IDS_5, REAL_3))),
        ("RemoveSentenceBoundaries", RemoveSentenceBoundaries, {}, dict(
            input_data={"inputs": FRAMED_7, "mask": FRAMED_MASK_7},
            expected_output_shape=(2, 3, 5, P), expected_mask=None, expected_trainable_count=0,
            padding_check=(
                {"inputs": FRAMED_7[:, :, :5], "mask": _mask([5, 4], 5)},
                {"inputs": _garbage_after(FRAMED_7, _mask([5, 4], 7), 2),
                 "mask": _mask([5, 4], 7)},
                np.s_[:, :, :3]))),
        ("CharCNNEmbedder", CharCNNEmbedder, dict(
            char_embedding_dim=OPTIONS.char_embedding_dim,
            filters=[list(f) for f in OPTIONS.filters], num_highway=OPTIONS.num_highway,
            projection_dim=P), dict(
            input_data=IDS, expected_output_shape=(2, 3, P), expected_mask=IDS.any(-1),
            expected_trainable_count=13, padding_check=(IDS, IDS_5, REAL_3))),
        ("ResidualBiLSTM", ResidualBiLSTM, dict(units=UNITS, projection_dim=P,
                                                num_layers=LAYERS), dict(
            input_data={"inputs": X_5, "mask": MASK_5}, expected_output_shape=(2, LAYERS, 5, OUT),
            expected_mask=MASK_5, expected_trainable_count=4 * 2 * LAYERS,
            padding_check=(SHORT_SEQ, PADDED_SEQ, np.s_[:, :, :3]))),
        ("ScalarMix", ScalarMix, dict(do_layer_norm=True), dict(
            input_data={"inputs": STACK_5, "mask": MASK_5}, expected_output_shape=(2, 5, P),
            expected_mask=MASK_5, expected_trainable_count=2,
            padding_check=(
                {"inputs": STACK_5[:, :, :3], "mask": MASK_3},
                {"inputs": _garbage_after(STACK_5, _mask([3, 2], 5), 2),
                 "mask": _mask([3, 2], 5)},
                REAL_3))),
        ("ElmoLayer", make_elmo_layer, {}, dict(
            input_data=IDS, expected_output_shape=(2, 3, OUT), expected_mask=IDS.any(-1),
            expected_trainable_count=2, padding_check=(IDS, IDS_5, REAL_3))),
        # The symbolic 'layers' once said bfloat16 where the call returned float32 (found by
        # this harness): its bfloat16 case checks the declared and the returned dtypes.
        ("ElmoLayer-return_layers", make_elmo_layer, ELMO_DICT_KWARGS, ELMO_DICT_CHECKS),
        ("BiLM", BiLM, {"options": OPTIONS.to_dict()}, dict(
            input_data=IDS, expected_output_shape={"layers": (2, LAYERS + 1, 3, OUT),
                                                   "mask": (2, 3)},
            expected_trainable_count=13 + 4 * 2 * LAYERS,
            float32_outputs=("layers",),  # documented: float32 vectors in any dtype
            padding_check=_bilm_padding_pairs)),
        ("BiLM-vocabulary", BiLM, {"options": VOCABULARY_OPTIONS.to_dict()}, dict(
            input_data=VOCABULARY_IDS, expected_output_shape={
                "layers": (2, LAYERS + 1, 3, OUT), "mask": (2, 3)},
            expected_trainable_count=13 + 4 * 2 * LAYERS, float32_outputs=("layers",),
            padding_check=_vocabulary_bilm_padding_pairs)),
        ("BiLM-words", BiLM, {"options": WORDS_OPTIONS.to_dict()}, dict(
            input_data=WORD_INPUTS, expected_output_shape={
                "layers": (2, LAYERS + 1, 3, OUT), "mask": (2, 3)},
            expected_trainable_count=13 + 2 + 4 * 2 * LAYERS, float32_outputs=("layers",),
            padding_check=lambda call: _vocabulary_bilm_padding_pairs(
                call, WORD_INPUTS, WORD_INPUTS_5, [x[1:, :1] for x in WORD_INPUTS])),
         pytest.mark.filterwarnings("ignore:The structure of `inputs`")),
        ("SharedSoftmax", SharedSoftmax, dict(vocab_size=20, input_dim=P, num_sampled=5), dict(
            input_data=X_5[:, 0], expected_output_shape=(2, 20), expected_trainable_count=2,
            padding_check=(X_5[:1, 0], X_5[:, 0], np.s_[:1]))),  # rows are independent
        ("LanguageModel", make_language_model, {}, dict(
            input_data=FRAMED_IDS, expected_mask=None,
            expected_output_shape={"embeddings": (2, 5, P), "layers": (2, LAYERS, 5, OUT),
                                   "mask": (2, 5)},
            expected_trainable_count=13 + 4 * 2 * LAYERS + 2,  # backbone + softmax W, b
            dtype_policies=("float32",),  # trained in float32 (the weight file's dtype)
            train_loss=_language_model_loss,
            padding_check=(FRAMED_IDS, np.pad(FRAMED_IDS, ((0, 0), (0, 2), (0, 0))),
                           {"embeddings": REAL_3, "layers": np.s_[:, :, :3],
                            "mask": REAL_3}))),
    ]


CASES = _cases()


def _policies(checks):
    return checks.get("dtype_policies", DEFAULT_POLICIES)


@pytest.mark.parametrize("layer_cls, init_kwargs, checks",
                         [pytest.param(*case[1:4], id=case[0], marks=case[4:]) for case in CASES])
def test_layer_contract(layer_cls, init_kwargs, checks, tmp_path):
    """Everything but the bfloat16 policy (test_layer_bfloat16_policy: a CPU class may
    refuse it)."""
    checks = dict(checks, dtype_policies=[p for p in _policies(checks) if p != "bfloat16"])
    run_layer_test(layer_cls, init_kwargs, tmp_path=tmp_path, **checks)


@needs_bfloat16_products
@pytest.mark.parametrize("layer_cls, init_kwargs, checks",
                         [pytest.param(*case[1:4], id=case[0], marks=case[4:]) for case in CASES
                          if "bfloat16" in _policies(case[3])])
def test_layer_bfloat16_policy(layer_cls, init_kwargs, checks):
    run_dtype_policy_test(layer_cls, init_kwargs, checks["input_data"], "bfloat16",
                          call_kwargs=checks.get("call_kwargs"),
                          float32_outputs=checks.get("float32_outputs", ()))


#: Registered layers the harness does not take, and where they are tested instead.
NOT_IN_THE_HARNESS = {
    # a preprocessing layer outside the model (keras-hub's split): no weights, no dtype
    # policy, Python values in and numpy out; tests/test_elmo_preprocessor.py and
    # tests/test_backends.py hold its ids to batch_to_ids and its config round trip
    "ElmoPreprocessor": "tests/test_elmo_preprocessor.py",
}


def test_every_registered_layer_goes_through_the_harness():
    """A layer registered for `.keras` files and left out of CASES fails here."""
    registered = {name.split(">")[1] for name, obj in keras.saving.get_custom_objects().items()
                  if name.split(">")[0] in ("keras_elmo", "keras_elmo_training")
                  and isinstance(obj, type) and issubclass(obj, keras.layers.Layer)}
    covered = {case[0].split("-")[0] for case in CASES} | set(NOT_IN_THE_HARNESS)
    assert registered and registered <= covered, sorted(registered - covered)
