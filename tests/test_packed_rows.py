"""Rows holding several sequences back to back (`sequence_starts`): each sequence's outputs
are the numpy reference's of that sequence alone, in every loop (eager, traced, one row with
the frozen copies, training), and the BiLM's packed entry point frames each sentence itself.

Inputs at padded positions are large garbage: nothing of it may reach a real position.
"""

import numpy as np
import pytest
import tensorflow as tf

import numpy_reference as ref
import weight_fixtures
from keras_elmo.models.bilm import BiLM
from keras_elmo.text.characters import batch_to_ids

ATOL = 1e-5
#: Each row's sequences' lengths, back to back (the last row a single sequence; one row of
#: one-step sequences).
LAYOUT = [[3, 1, 4], [6], [1, 1, 2], [2, 5]]


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    options = weight_fixtures.make_options()
    arrays = weight_fixtures.random_weight_arrays(options, seed=41, lstm_scale=2.0)
    options_file, weight_file = weight_fixtures.write_model_dir(
        str(tmp_path_factory.mktemp("model")), options, arrays)
    return BiLM.from_weights(options_file, weight_file), options, arrays


def _packed(layout, seed, proj=8):
    """`(x, mask, starts, spans)`: rows of random sequences, garbage past each row's end;
    spans[row] = [(start, stop), ...]."""
    rng = np.random.default_rng(seed)
    steps = max(sum(row) for row in layout)
    x = 50.0 * rng.standard_normal((len(layout), steps, proj)).astype(np.float32)
    mask = np.zeros((len(layout), steps), bool)
    starts = np.zeros((len(layout), steps), bool)
    spans = []
    for r, row in enumerate(layout):
        offset, found = 0, []
        for n in row:
            x[r, offset:offset + n] = rng.standard_normal((n, proj))
            starts[r, offset] = True
            found.append((offset, offset + n))
            offset += n
        mask[r, :offset] = True
        spans.append(found)
    return x, mask, starts, spans


def _check_encoder(got, x, spans, options, arrays):
    for r, found in enumerate(spans):
        for start, stop in found:
            alone = ref.bilstm_sentence(arrays, options, x[r, start:stop])  # (L, n, 2P)
            np.testing.assert_allclose(got[r, :, start:stop], alone, rtol=0, atol=ATOL)
        end = found[-1][1]
        assert not np.any(got[r, :, end:]), "padding must be exactly zero"


def test_each_sequence_is_run_alone_eager_and_traced(loaded):
    bilm, options, arrays = loaded
    encoder = bilm.contextual_encoder
    x, mask, starts, spans = _packed(LAYOUT, seed=1)
    _check_encoder(np.asarray(encoder(x, mask=mask, sequence_starts=starts)), x, spans,
                   options, arrays)
    traced = tf.function(lambda x, m, s: encoder(x, mask=m, sequence_starts=s),
                         input_signature=[tf.TensorSpec([None, None, 8]),
                                          tf.TensorSpec([None, None], tf.bool),
                                          tf.TensorSpec([None, None], tf.bool)])
    _check_encoder(traced(x, mask, starts).numpy(), x, spans, options, arrays)
    # packing really changed something: without the starts a row is one sequence
    joined = np.asarray(encoder(x, mask=mask))
    assert np.abs(joined[0, :, 3:4] - np.asarray(
        encoder(x, mask=mask, sequence_starts=starts))[0, :, 3:4]).max() > 1e-3


def test_one_row_with_the_frozen_copies(loaded):
    bilm, options, arrays = loaded
    bilm.trainable = False
    try:
        encoder = bilm.contextual_encoder
        traced = tf.function(lambda x, m, s: encoder(x, mask=m, sequence_starts=s),
                             input_signature=[tf.TensorSpec([1, None, 8]),
                                              tf.TensorSpec([1, None], tf.bool),
                                              tf.TensorSpec([1, None], tf.bool)])
        for seed, row in enumerate(LAYOUT):
            x, mask, starts, spans = _packed([row], seed=10 + seed)
            _check_encoder(traced(x, mask, starts).numpy(), x, spans, options, arrays)
        assert traced.experimental_get_tracing_count() == 1
    finally:
        bilm.trainable = True


def test_training_runs_the_plain_loop_and_its_gradients_are_each_sequences(loaded):
    bilm, options, arrays = loaded
    encoder = bilm.contextual_encoder
    x, mask, starts, spans = _packed(LAYOUT, seed=3)
    weights = np.random.default_rng(4).standard_normal((len(LAYOUT), 2, x.shape[1], 16))
    x = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        out = encoder(x, mask=mask, sequence_starts=starts, training=True)
        loss = tf.reduce_sum(out * weights)
    _check_encoder(out.numpy(), x.numpy(), spans, options, arrays)
    grad = tape.gradient(loss, x).numpy()
    for r, found in enumerate(spans):
        for start, stop in found:  # the same sequence alone, in a row of its own
            alone = tf.constant(x[r:r + 1, start:stop])
            with tf.GradientTape() as tape:
                tape.watch(alone)
                part = tf.reduce_sum(encoder(alone, training=True)
                                     * weights[r:r + 1, :, start:stop])
            np.testing.assert_allclose(grad[r, start:stop], tape.gradient(part, alone)[0],
                                       rtol=0, atol=ATOL)
        assert not grad[r, found[-1][1]:].any()


def test_refused_with_state_or_skipped_steps(loaded):
    bilm, _, _ = loaded
    x, mask, starts, _ = _packed(LAYOUT, seed=5)
    with pytest.raises(ValueError, match="sequence_starts .* needs a stateless "
                                         "ResidualBiLSTM without skip_boundary_steps"):
        bilm.contextual_encoder(x, mask=mask, sequence_starts=starts, skip_boundary_steps=True)


def test_a_stateful_bilm_is_refused():
    bilm = BiLM(weight_fixtures.make_options(), stateful=True)
    x, mask, starts, _ = _packed(LAYOUT, seed=7)
    with pytest.raises(ValueError, match="sequence_starts .* needs a stateless "
                                         "ResidualBiLSTM .* received stateful=True"):
        bilm.layers_from_packed_token_embeddings(x, mask, starts)


def test_bilm_frames_each_sentence_itself(loaded):
    """Token vectors at their positions, garbage at the frame: each sentence's layers are
    the reference's of that sentence alone (`<S>`/`</S>` added by the model), with the
    boundary vectors computed inside or given."""
    bilm, options, arrays = loaded
    sentences = [["ab", "c"], ["d"], ["e", "fg", "h", "ij"], ["k", "l"]]
    layout = [[0, 1], [2], [3]]  # sentence indices per row
    vectors = np.asarray(bilm.token_embedder(batch_to_ids(sentences)))  # (4, T, P)
    steps = max(sum(len(sentences[i]) + 2 for i in row) for row in layout)
    rng = np.random.default_rng(6)
    packed = 50.0 * rng.standard_normal((len(layout), steps, 8)).astype(np.float32)
    mask = np.zeros((len(layout), steps), bool)
    starts = np.zeros((len(layout), steps), bool)
    where = {}
    for r, row in enumerate(layout):
        offset = 0
        for i in row:
            n = len(sentences[i])
            packed[r, offset + 1:offset + 1 + n] = vectors[i, :n]
            starts[r, offset] = True
            where[i] = (r, offset + 1)
            offset += n + 2
        mask[r, :offset] = True
    given = np.asarray(bilm.boundary_token_embeddings())
    for boundaries in (None, given):
        out = np.asarray(bilm.layers_from_packed_token_embeddings(packed, mask, starts,
                                                                  boundaries))
        assert out.shape == (len(layout), 3, steps, 16)
        for i, tokens in enumerate(sentences):
            r, first = where[i]
            expected = ref.bilm_sentence(arrays, options, tokens)  # (L + 1, n, 2P)
            np.testing.assert_allclose(out[r, :, first:first + len(tokens)], expected,
                                       rtol=0, atol=ATOL)
        for r in range(len(layout)):
            assert not out[r, :, mask[r].sum():].any()
