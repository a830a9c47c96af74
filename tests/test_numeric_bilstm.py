"""Contextual encoder (docs/model.md section 3) of a loaded BiLM vs the numpy reference.

Inputs at padded positions are large garbage: nothing of it may reach a real position
(either direction) and outputs there must be exactly zero.
"""

import copy

import numpy as np
import pytest

import numpy_reference as ref
import weight_fixtures
from keras_elmo.models.bilm import BiLM

ATOL = 1e-5


def _load(tmp_path, options, seed, lstm_scale):
    arrays = weight_fixtures.random_weight_arrays(options, seed=seed, lstm_scale=lstm_scale)
    options_file, weight_file = weight_fixtures.write_model_dir(str(tmp_path), options, arrays)
    return BiLM.from_weights(options_file, weight_file), arrays


def _inputs(lengths, steps, proj, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((len(lengths), steps, proj)).astype(np.float32)
    mask = np.arange(steps)[None, :] < np.asarray(lengths)[:, None]  # (batch, T) left-aligned
    x[~mask] = 50.0 * rng.standard_normal((int((~mask).sum()), proj))  # garbage at padding
    return x, mask


def _run(bilm, x, mask):
    return np.asarray(bilm.contextual_encoder(x, mask=mask))


def _unclipped(options):
    options = copy.deepcopy(options)
    options["lstm"]["cell_clip"] = options["lstm"]["proj_clip"] = None
    return options


def test_one_step_with_clipping(tmp_path):
    """T = 1: c = i * j is in (-1, 1), so small clips bite; big weights saturate the gates."""
    options = weight_fixtures.make_options(cell_clip=0.5, proj_clip=0.3)
    bilm, arrays = _load(tmp_path, options, seed=10, lstm_scale=4.0)
    x, mask = _inputs([1, 1], steps=1, proj=8, seed=11)
    got = _run(bilm, x, mask)
    expected = ref.contextual_encoder(arrays, options, x, [1, 1])
    assert got.shape == (2, 2, 1, 16)
    np.testing.assert_allclose(got, expected, rtol=0, atol=ATOL)
    # The clips really changed the answer, in layer 0 of both directions.
    unclipped = ref.contextual_encoder(arrays, _unclipped(options), x, [1, 1])
    assert np.abs(unclipped[:, 0, :, :8] - expected[:, 0, :, :8]).max() > 1e-2
    assert np.abs(unclipped[:, 0, :, 8:] - expected[:, 0, :, 8:]).max() > 1e-2
    assert np.isclose(np.abs(expected[:, 0]).max(), 0.3)  # proj_clip reached exactly


def test_one_step_by_hand(tmp_path):
    """Layer 0 forward, T = 1, written out from the spec's formula, no helper."""
    options = weight_fixtures.make_options(cell_clip=0.5, proj_clip=0.3, n_layers=1)
    bilm, arrays = _load(tmp_path, options, seed=12, lstm_scale=4.0)
    x, mask = _inputs([1], steps=1, proj=8, seed=13)
    prefix = "RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/"
    W, B, W_P = (arrays[prefix + n].astype(np.float64) for n in ("W_0", "B", "W_P_0"))
    z = np.concatenate([x[0, 0], np.zeros(8)]) @ W + B
    i, j, f, o = z[:12], z[12:24], z[24:36], z[36:]
    c = np.clip(ref.sigmoid(f + 1.0) * 0.0 + ref.sigmoid(i) * np.tanh(j), -0.5, 0.5)
    h = np.clip((ref.sigmoid(o) * np.tanh(c)) @ W_P, -0.3, 0.3)
    got = _run(bilm, x, mask)
    np.testing.assert_allclose(got[0, 0, 0, :8], h, rtol=0, atol=ATOL)


@pytest.mark.parametrize("n_layers,skip", [(2, True), (2, False), (3, True)])
def test_stack_both_directions_different_lengths(tmp_path, n_layers, skip):
    options = weight_fixtures.make_options(n_layers=n_layers, use_skip_connections=skip)
    bilm, arrays = _load(tmp_path, options, seed=20 + n_layers, lstm_scale=3.0)
    lengths = [5, 3]
    x, mask = _inputs(lengths, steps=5, proj=8, seed=21)
    got = _run(bilm, x, mask)
    expected = ref.contextual_encoder(arrays, options, x, lengths)
    assert got.shape == (2, n_layers, 5, 16)
    np.testing.assert_allclose(got, expected, rtol=0, atol=ATOL)
    assert np.all(got[1, :, 3:] == 0.0)  # exactly zero past the end
    # cell_clip = proj_clip = 3 matter over 5 steps with these weights.
    unclipped = ref.contextual_encoder(arrays, _unclipped(options), x, lengths)
    assert np.abs(unclipped - expected).max() > 1e-3


def test_residual_changes_output(tmp_path):
    """With skip connections, layer 1's output is h + x (x = layer 0's output)."""
    options = weight_fixtures.make_options(n_layers=2, use_skip_connections=True)
    bilm, arrays = _load(tmp_path, options, seed=30, lstm_scale=1.0)
    x, mask = _inputs([4, 2], steps=4, proj=8, seed=31)
    got = _run(bilm, x, mask)
    no_skip = copy.deepcopy(options)
    no_skip["lstm"]["use_skip_connections"] = False
    plain = ref.contextual_encoder(arrays, no_skip, x, [4, 2])
    # Layer 1 with skip = layer 1 without skip + layer 0, since the recurrence excludes x.
    np.testing.assert_allclose(got[:, 1], plain[:, 1] + plain[:, 0], rtol=0, atol=ATOL)
    np.testing.assert_allclose(got[:, 0], plain[:, 0], rtol=0, atol=ATOL)



def _graph_nodes(function):
    """Every node of a traced function's graph, those of its loops' bodies included."""
    graph = function.get_concrete_function().graph.as_graph_def()
    return list(graph.node) + [n for f in graph.library.function for n in f.node_def]


@pytest.mark.parametrize("batch", [1, 3], ids=["one-row", "three-rows"])
def test_a_batch_size_known_when_traced_gives_one_loop_and_the_reference_numbers(
        tmp_path, batch):
    """A batch size known at tracing traces one loop (no `tf.cond`): the one-row loop for
    one row, the batched one for more; either gives the numpy reference's numbers."""
    import tensorflow as tf

    options = weight_fixtures.make_options(cell_clip=0.5, proj_clip=0.3)
    bilm, arrays = _load(tmp_path, options, seed=14, lstm_scale=2.0)
    spec = (batch, None, 8)
    encode = tf.function(lambda x, m: bilm.contextual_encoder(x, mask=m),
                         input_signature=[tf.TensorSpec(spec), tf.TensorSpec(spec[:2], tf.bool)])
    lengths = [4, 2, 3][:batch]
    x, mask = _inputs(lengths, steps=4, proj=8, seed=15)
    expected = ref.contextual_encoder(arrays, options, x, lengths)
    np.testing.assert_allclose(encode(x, mask).numpy(), expected, rtol=0, atol=ATOL)
    ops = {n.op for n in _graph_nodes(encode)}
    assert not {"If", "StatelessIf"} & ops, sorted(ops)
    # x^T W^T: the one-row products, only in the one-row loop
    assert any(n.op == "MatMul" and n.attr["transpose_b"].b for n in _graph_nodes(encode)) \
        == (batch == 1)


def test_backward_reads_reversed_within_length(tmp_path):
    """The backward half of a short sentence equals running the forward-style recurrence
    with the backward weights over the reversed real tokens only."""
    options = weight_fixtures.make_options(n_layers=1)
    bilm, arrays = _load(tmp_path, options, seed=40, lstm_scale=2.0)
    x, mask = _inputs([2, 5], steps=5, proj=8, seed=41)
    got = _run(bilm, x, mask)
    backward = ref.lstm_direction(arrays, options, 1, x[0, :2][::-1])[:, ::-1]
    np.testing.assert_allclose(got[0, :, :2, 8:], backward, rtol=0, atol=ATOL)
    assert np.all(got[0, :, 2:] == 0.0)


@pytest.mark.parametrize("gate_columns", [256, 3], ids=["one-chunk", "chunks-of-3"])
@pytest.mark.parametrize("batch_known", [True, False], ids=["static-batch", "dynamic-batch"])
def test_a_one_row_batch_takes_its_own_products_with_the_reference_numbers(
        tmp_path, monkeypatch, batch_known, gate_columns):
    """A batch of one row as traced multiplies `x^T W^T` (the cell's one-row steps) and
    reads its gates time-major; traced for any batch size, one row runs the batched loop
    (no `tf.cond`): the numbers are the numpy reference's either way, in one chunk of input
    gates or several (the last one shorter)."""
    import tensorflow as tf

    from keras_elmo.backend.tensorflow import lstm_loop as residual_bilstm

    monkeypatch.setattr(residual_bilstm, "GATE_COLUMNS", gate_columns)
    options = weight_fixtures.make_options(cell_clip=0.5, proj_clip=0.3)
    bilm, arrays = _load(tmp_path, options, seed=12, lstm_scale=2.0)
    x, mask = _inputs([4], steps=4, proj=8, seed=13)
    expected = ref.contextual_encoder(arrays, options, x, [4])
    spec = (1 if batch_known else None, None, 8)
    encode = tf.function(lambda x, m: bilm.contextual_encoder(x, mask=m),
                         input_signature=[tf.TensorSpec(spec), tf.TensorSpec(spec[:2], tf.bool)])
    np.testing.assert_allclose(encode(x, mask).numpy(), expected, rtol=0, atol=ATOL)
    nodes = _graph_nodes(encode)
    ops = {n.op for n in nodes}
    assert not {"If", "StatelessIf"} & ops, sorted(ops)
    # the one-row products (x^T W^T) are in the graph of a one-row trace only
    assert any(n.op == "MatMul" and n.attr["transpose_b"].b for n in nodes) == batch_known
