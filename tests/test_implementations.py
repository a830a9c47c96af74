"""The algorithm a layer runs is its constructor's `implementation` (kept in the config):
`"auto"` resolves from what the call shows, a user may force any value that applies, and
every value gives the numpy reference's outputs (docs/model.md sections 2-3) and the same
gradients."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import numpy_reference as ref
import weight_fixtures
from cpu_class import ONE_ROW_READS, force_one_row_read
from keras_elmo.layers.char_cnn_embedder import CharCNNEmbedder
from keras_elmo.layers.residual_bilstm import IMPLEMENTATIONS, ResidualBiLSTM
from keras_elmo.models.bilm import BiLM
from keras_elmo.text.characters import batch_to_ids

ATOL = 1e-5
LOOPS = [value for value in IMPLEMENTATIONS if value != "auto"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    options = weight_fixtures.make_options(cell_clip=0.5, proj_clip=0.3)
    arrays = weight_fixtures.random_weight_arrays(options, seed=41, lstm_scale=2.0)
    files = weight_fixtures.write_model_dir(str(tmp_path_factory.mktemp("model")), options,
                                            arrays)
    return options, arrays, files


def _inputs(lengths, steps, seed=7):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((len(lengths), steps, 8)).astype(np.float32)
    mask = np.arange(steps)[None, :] < np.asarray(lengths)[:, None]
    x[~mask] = 50.0 * rng.standard_normal((int((~mask).sum()), 8))  # garbage at padding
    return x, mask


def _encoder_run(files, implementation, x, mask, training):
    """Outputs and gradients (inputs, then every weight; zeros for one the outputs do not
    read) of a loaded encoder, traced for the batch's static shape."""
    encoder = BiLM.from_weights(*files, implementation=implementation).contextual_encoder
    probe = tf.constant(np.random.default_rng(3).standard_normal(
        (x.shape[0], 2, x.shape[1], 16)), tf.float32)

    @tf.function
    def run(x, mask):
        with tf.GradientTape() as tape:
            tape.watch(x)
            out = encoder(x, mask=mask, training=training)
            loss = tf.reduce_sum(out * probe)
        return out, tape.gradient(loss, [x] + encoder.trainable_weights)

    out, grads = run(tf.constant(x), tf.constant(mask))
    shapes = [x.shape] + [weight.shape for weight in encoder.trainable_weights]
    return out.numpy(), [np.zeros(shape, np.float32) if g is None else g.numpy()
                         for g, shape in zip(grads, shapes)]


@pytest.mark.parametrize("lengths", [[4], [4, 2, 3]], ids=["one-row", "three-rows"])
@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
def test_every_loop_gives_the_reference_and_the_same_gradients(model, lengths, training):
    options, arrays, files = model
    x, mask = _inputs(lengths, steps=4)
    expected = ref.contextual_encoder(arrays, options, x, lengths)
    results = {}
    for implementation in LOOPS + ["auto"]:
        if implementation == "one_row_loop" and len(lengths) != 1:
            continue
        results[implementation] = _encoder_run(files, implementation, x, mask, training)
        np.testing.assert_allclose(results[implementation][0], expected, atol=ATOL,
                                   err_msg=implementation)
    base_out, base_grads = results["batched_loop"]
    for implementation, (_, grads) in results.items():
        for want, got in zip(base_grads, grads):
            np.testing.assert_allclose(got, want, atol=1e-4 * max(1.0, np.abs(want).max()),
                                       err_msg=implementation)


@ONE_ROW_READS
def test_one_row_steps_read_w_h_either_way_with_the_same_numbers(model, monkeypatch,
                                                                 transposed):
    """A one-row step reads `W_h` as stored or from a transpose made in the call (where
    that pays, `cpu_setup.one_row_transposes_pay`; both forced here, whatever this CPU is):
    the reference's numbers and the batched loop's gradients either way."""
    decisions = force_one_row_read(monkeypatch, transposed)
    options, arrays, files = model
    x, mask = _inputs([4], steps=4)
    out, grads = _encoder_run(files, "one_row_loop", x, mask, training=False)
    assert decisions, "no one-row float32 step read W_h"
    np.testing.assert_allclose(out, ref.contextual_encoder(arrays, options, x, [4]), atol=ATOL)
    _, want_grads = _encoder_run(files, "batched_loop", x, mask, training=False)
    for k, (want, got) in enumerate(zip(want_grads, grads)):
        np.testing.assert_allclose(got, want, atol=1e-4 * max(1.0, np.abs(want).max()),
                                   err_msg=f"gradient {k} (0: inputs, then the weights)")


def test_auto_resolves_from_what_the_call_shows():
    encoder = ResidualBiLSTM(units=6, projection_dim=4)
    assert encoder.resolve_implementation(training=True, batch_size=8) == "sequence_gradient"
    assert encoder.resolve_implementation(training=True, batch_size=1) == "sequence_gradient"
    assert encoder.resolve_implementation(training=True, packed=True) == "batched_loop"
    assert encoder.resolve_implementation(training=False, batch_size=1) == "one_row_loop"
    assert encoder.resolve_implementation(training=False, batch_size=None) == "batched_loop"
    assert encoder.resolve_implementation(training=False, batch_size=8) == "batched_loop"
    stateful = ResidualBiLSTM(units=6, projection_dim=4, stateful=True)
    assert stateful.resolve_implementation(training=True, batch_size=8) == "batched_loop"


def test_a_forced_loop_that_does_not_apply_is_one_line():
    with pytest.raises(ValueError, match="^implementation must be one of 'auto', "
                                         "'sequence_gradient', 'batched_loop', "
                                         "'one_row_loop'; received 'cudnn'.$"):
        ResidualBiLSTM(units=6, projection_dim=4, implementation="cudnn")
    with pytest.raises(ValueError, match="runs from zero states; received stateful=True"):
        ResidualBiLSTM(units=6, projection_dim=4, stateful=True,
                       implementation="sequence_gradient")
    one_row = ResidualBiLSTM(units=6, projection_dim=4, implementation="one_row_loop")
    with pytest.raises(ValueError, match="one row known when traced; received batch size 2"):
        one_row(np.zeros((2, 3, 4), "float32"))
    gradient = ResidualBiLSTM(units=6, projection_dim=4, implementation="sequence_gradient")
    with pytest.raises(ValueError, match="knows no sequence starts"):
        gradient(np.zeros((1, 3, 4), "float32"), sequence_starts=np.array([[1, 0, 1]], bool))


def test_the_choice_is_in_the_config_and_survives_a_keras_file(model, tmp_path):
    _, _, files = model
    bilm = BiLM.from_weights(*files, implementation="batched_loop")
    assert bilm.get_config()["implementation"] == "batched_loop"
    assert bilm.contextual_encoder.get_config()["implementation"] == "batched_loop"
    path = str(tmp_path / "bilm.keras")
    bilm.save(path)
    loaded = keras.models.load_model(path)
    assert loaded.contextual_encoder.implementation == "batched_loop"
    ids = batch_to_ids([["the", "cat"]])
    np.testing.assert_allclose(loaded(ids)["layers"], bilm(ids)["layers"], atol=ATOL)
    assert ResidualBiLSTM.from_config(
        ResidualBiLSTM(units=6, projection_dim=4, implementation="one_row_loop").get_config()
    ).implementation == "one_row_loop"


@pytest.mark.parametrize("implementation", ["distinct_tokens", "every_position", "auto"])
def test_every_char_cnn_encoding_gives_the_reference(model, implementation):
    options, arrays, files = model
    embedder = CharCNNEmbedder.from_options(options, implementation=implementation)
    # b"\xff": a token of no valid bytes, the word of no characters ("" is no token).
    sentences = [["the", "cat", "the"], ["北京", b"\xff"], []]
    ids = batch_to_ids(sentences)
    embedder.build(ids.shape)
    embedder.set_weights(BiLM.from_weights(*files).token_embedder.get_weights())
    for compiled in (False, True):
        if compiled and implementation == "distinct_tokens":
            continue
        got = tf.function(embedder, jit_compile=compiled)(tf.constant(ids)).numpy()
        for b, sentence in enumerate(sentences):
            if sentence:
                want = ref.char_cnn(arrays, options, ref.sentence_char_ids(sentence))
                np.testing.assert_allclose(got[b, :len(sentence)], want, atol=ATOL,
                                           err_msg=f"{implementation}, jit {compiled}")


def test_distinct_tokens_under_xla_is_one_line(model):
    options, _, _ = model
    embedder = CharCNNEmbedder.from_options(options, implementation="distinct_tokens")
    ids = tf.constant(batch_to_ids([["a", "b"]]))
    with pytest.raises(ValueError, match="XLA cannot compile; received a call inside a "
                                         "jit_compile function"):
        tf.function(embedder, jit_compile=True)(ids)
