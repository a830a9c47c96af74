"""`OneRowKernels`: `(in, out)` copies of the LSTM kernels that the one-row loop reads.

The numbers are the numpy reference's (docs/model.md section 3), the copies are a snapshot
that `refresh()` renews, and `TracedTokenLayers` (the embedders' path) makes them once.
"""

import numpy as np
import pytest

import numpy_reference as ref
import weight_fixtures
from keras_elmo.layers import OneRowKernels
from keras_elmo.models.bilm import BiLM

ATOL = 1e-5


def _load(tmp_path, seed=20):
    options = weight_fixtures.make_options(cell_clip=0.5, proj_clip=0.3)
    arrays = weight_fixtures.random_weight_arrays(options, seed=seed, lstm_scale=2.0)
    files = weight_fixtures.write_model_dir(str(tmp_path), options, arrays)
    return BiLM.from_weights(*files), options, arrays


def _inputs(lengths, steps, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((len(lengths), steps, 8)).astype(np.float32)
    mask = np.arange(steps)[None, :] < np.asarray(lengths)[:, None]
    x[~mask] = 50.0 * rng.standard_normal((int((~mask).sum()), 8))  # garbage at padding
    return x, mask


@pytest.mark.parametrize("gate_columns", [256, 3], ids=["one-chunk", "chunks-of-3"])
@pytest.mark.parametrize("one_row", [True, None], ids=["one_row=True", "one_row=None"])
def test_the_copies_give_the_reference_numbers(tmp_path, monkeypatch, one_row, gate_columns):
    """One row through the copies (a loop of its own, or the tf.cond's one-row branch of a
    function traced for any batch) gives the numpy reference's numbers, and the traced
    function reads the copies; a batch of several rows ignores them."""
    import tensorflow as tf

    from keras_elmo.layers import residual_bilstm

    monkeypatch.setattr(residual_bilstm, "GATE_COLUMNS", gate_columns)
    bilm, options, arrays = _load(tmp_path)
    encoder = bilm.contextual_encoder
    kernels = OneRowKernels(encoder)
    copies = [v for d in kernels.kernels.values() for pair in d for v in pair]
    assert [tuple(v.shape) for v in copies[:2]] == [(8, 48), (12, 8)]  # (P, 4U), (U, P)
    assert not any(v.trainable for v in copies)
    encode = tf.function(
        lambda x, m: encoder(x, mask=m, one_row=one_row, one_row_kernels=kernels),
        input_signature=[tf.TensorSpec((None, None, 8)), tf.TensorSpec((None, None), tf.bool)])
    cases = [[5]] if one_row else [[5], [5, 2, 3]]
    for lengths in cases:
        x, mask = _inputs(lengths, steps=5, seed=21)
        expected = ref.contextual_encoder(arrays, options, x, lengths)
        np.testing.assert_allclose(encode(x, mask).numpy(), expected, rtol=0, atol=ATOL)
    read = {id(v) for v in encode.get_concrete_function().variables}
    assert all(id(v) in read for v in copies)
    # not saved with the layer
    assert not {id(v) for v in encoder.weights} & {id(v) for v in copies}


def test_the_copies_are_a_snapshot_that_refresh_renews(tmp_path):
    """After the encoder's weights change, one-row calls given the copies still compute
    with the old weights (the reference of the old arrays) until `refresh()`."""
    bilm, options, arrays = _load(tmp_path, seed=22)
    encoder = bilm.contextual_encoder
    kernels = OneRowKernels(encoder)
    x, mask = _inputs([4], steps=4, seed=23)
    old = ref.contextual_encoder(arrays, options, x, [4])
    for cell in (c for d in encoder.cells.values() for c in d):
        cell.recurrent_kernel.assign(cell.recurrent_kernel * 0.5)
        cell.projection_kernel.assign(cell.projection_kernel * 1.5)
    new = np.asarray(encoder(x, mask=mask, one_row=True))
    assert np.abs(new - old).max() > 1e-2
    stale = np.asarray(encoder(x, mask=mask, one_row=True, one_row_kernels=kernels))
    np.testing.assert_allclose(stale, old, rtol=0, atol=ATOL)
    kernels.refresh()
    fresh = np.asarray(encoder(x, mask=mask, one_row=True, one_row_kernels=kernels))
    np.testing.assert_allclose(fresh, new, rtol=0, atol=ATOL)


def test_copies_of_another_encoder_or_of_nothing_are_refused(tmp_path):
    from keras_elmo.layers import ResidualBiLSTM

    bilm, _, _ = _load(tmp_path, seed=24)
    other = ResidualBiLSTM(units=12, projection_dim=8, num_layers=2, name="other")
    other.build((None, None, 8))
    x, mask = _inputs([3], steps=3, seed=25)
    with pytest.raises(ValueError, match="one_row_kernels were made from the encoder 'other'; "
                                         "received them for 'contextual_encoder', another one"):
        bilm.contextual_encoder(x, mask=mask, one_row_kernels=OneRowKernels(other))
    with pytest.raises(ValueError, match="one_row_kernels must be a OneRowKernels or None; "
                                         "received dict"):
        bilm.contextual_encoder(x, mask=mask, one_row_kernels={})
    with pytest.raises(ValueError, match="OneRowKernels needs a built ResidualBiLSTM; "
                                         "received ResidualBiLSTM 'unbuilt' that is not built"):
        OneRowKernels(ResidualBiLSTM(units=12, projection_dim=8, name="unbuilt"))


@pytest.mark.parametrize("onednn", [True, False], ids=["oneDNN-on", "oneDNN-off"])
def test_traced_token_layers_make_the_copies_once_where_they_are_faster(
        tmp_path, monkeypatch, onednn):
    """The embedders' traced pair makes the copies before its one-row trace (one trace),
    only with oneDNN's kernels on, and `refresh()` renews them; the numbers are the char
    path's either way."""
    import tensorflow as tf

    from keras_elmo.models import bilm as bilm_module

    monkeypatch.setattr(bilm_module, "onednn_enabled", lambda: onednn)
    bilm, _, _ = _load(tmp_path, seed=26)
    layers = bilm.traced_layers_from_token_embeddings()
    ids = np.array([[[259, 98, 260] + [261] * 47] * 3], np.int32)  # one row, 3 tokens
    vectors, mask = bilm.token_embedder(ids), np.ones((1, 3), bool)
    np.testing.assert_allclose(layers(vectors, mask).numpy(), bilm(ids)["layers"].numpy(),
                               rtol=0, atol=ATOL)
    assert (layers._kernels is not None) == onednn
    assert layers.one_row.experimental_get_tracing_count() == 1
    cell = bilm.contextual_encoder.cells["forward"][0]
    cell.recurrent_kernel.assign(cell.recurrent_kernel * 0.5)
    layers.refresh()
    np.testing.assert_allclose(layers(vectors, mask).numpy(), bilm(ids)["layers"].numpy(),
                               rtol=0, atol=ATOL)
    assert layers.one_row.experimental_get_tracing_count() == 1
    assert isinstance(layers.one_row, tf.types.experimental.PolymorphicFunction)


def test_a_new_token_memo_reads_the_weights_as_they_are(tmp_path, monkeypatch):
    """The memo's traced functions outlive it (one per biLM); a new memo refreshes the
    copies, so a biLM whose weights changed in between gives its new numbers."""
    from embedding.token_vectors import TokenVectorMemo
    from keras_elmo.models import bilm as bilm_module
    from keras_elmo import batch_to_ids

    monkeypatch.setattr(bilm_module, "onednn_enabled", lambda: True)
    bilm, _, _ = _load(tmp_path, seed=27)
    sentence = [["a", "bc", "d"]]
    TokenVectorMemo(bilm).layers(sentence)
    cell = bilm.contextual_encoder.cells["backward"][1]
    cell.projection_kernel.assign(cell.projection_kernel * 1.5)
    expected = bilm(batch_to_ids(sentence))["layers"].numpy()
    np.testing.assert_allclose(TokenVectorMemo(bilm).layers(sentence), expected,
                               rtol=0, atol=ATOL)


def test_a_bfloat16_biLM_reads_its_stored_kernels(monkeypatch):
    """bfloat16 one-row products are faster from the stored layout: no copies are made."""
    from keras_elmo import BiLMOptions
    from keras_elmo.models import bilm as bilm_module

    monkeypatch.setattr(bilm_module, "onednn_enabled", lambda: True)
    bilm = BiLM(BiLMOptions.tiny(), dtype="bfloat16")
    layers = bilm.traced_layers_from_token_embeddings()
    out = layers(np.zeros((1, 3, 8), np.float32), np.ones((1, 3), bool))
    assert out.shape == (1, 3, 3, 16) and layers._kernels is None
