"""The `(in, out)` kernel copies a frozen float32 cell reads in one-row steps
(`LSTMProjectionCell`, module docstring).

The numbers are the numpy reference's (docs/model.md section 3); the copies are made when a
frozen encoder is traced for one row, only then, and follow the weights whenever they are
loaded or the encoder is frozen again; nothing saves them.
"""

import numpy as np
import pytest

import numpy_reference as ref
import weight_fixtures
from keras_elmo.models.bilm import BiLM

ATOL = 1e-5


def _load(tmp_path, seed=20):
    options = weight_fixtures.make_options(cell_clip=0.5, proj_clip=0.3)
    arrays = weight_fixtures.random_weight_arrays(options, seed=seed, lstm_scale=2.0)
    files = weight_fixtures.write_model_dir(str(tmp_path), options, arrays)
    return BiLM.from_weights(*files), options, arrays, files


def _inputs(lengths, steps, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((len(lengths), steps, 8)).astype(np.float32)
    mask = np.arange(steps)[None, :] < np.asarray(lengths)[:, None]
    x[~mask] = 50.0 * rng.standard_normal((int((~mask).sum()), 8))  # garbage at padding
    return x, mask


def _cells(encoder):
    return [c for d in encoder.cells.values() for c in d]


def _copies(encoder):
    return [v for c in _cells(encoder) for v in c._one_row_copies.variables]


def _traced(encoder, batch):
    import tensorflow as tf

    return tf.function(lambda x, m: encoder(x, mask=m),
                       input_signature=[tf.TensorSpec((batch, None, 8)),
                                        tf.TensorSpec((batch, None), tf.bool)])


@pytest.mark.parametrize("gate_columns", [256, 3], ids=["one-chunk", "chunks-of-3"])
def test_the_copies_give_the_reference_numbers(tmp_path, monkeypatch, gate_columns):
    """A frozen encoder traced for one row reads copies `(P, 4U)` and `(U, P)` of its
    kernels and gives the numpy reference's numbers; traced for any batch size it reads
    the stored kernels, with the same numbers."""
    from keras_elmo.layers import residual_bilstm

    monkeypatch.setattr(residual_bilstm, "GATE_COLUMNS", gate_columns)
    bilm, options, arrays, _ = _load(tmp_path)
    bilm.trainable = False
    encoder = bilm.contextual_encoder
    any_batch = _traced(encoder, None)
    for lengths in ([5], [5, 2, 3]):
        x, mask = _inputs(lengths, steps=5, seed=21)
        expected = ref.contextual_encoder(arrays, options, x, lengths)
        np.testing.assert_allclose(any_batch(x, mask).numpy(), expected, rtol=0, atol=ATOL)
    assert not _copies(encoder)  # a batch size unknown when traced: no copies
    one_row = _traced(encoder, 1)
    x, mask = _inputs([5], steps=5, seed=21)
    expected = ref.contextual_encoder(arrays, options, x, [5])
    np.testing.assert_allclose(one_row(x, mask).numpy(), expected, rtol=0, atol=ATOL)
    copies = _copies(encoder)
    assert [tuple(v.shape) for v in copies[:2]] == [(8, 48), (12, 8)]  # (P, 4U), (U, P)
    assert not any(v.trainable for v in copies)
    read = {id(v) for v in one_row.get_concrete_function().variables}
    assert all(id(v) in read for v in copies)
    # not among the layer's weights, so no weight file or checkpoint holds them
    assert not {id(v) for v in bilm.weights} & {id(v) for v in copies}


def test_no_copies_where_the_weights_may_change_or_outside_a_trace(tmp_path):
    """A trainable encoder, an eager call and a bfloat16 biLM read their stored kernels."""
    from keras_elmo import BiLMOptions

    bilm, options, arrays, _ = _load(tmp_path, seed=28)
    x, mask = _inputs([4], steps=4, seed=29)
    expected = ref.contextual_encoder(arrays, options, x, [4])
    np.testing.assert_allclose(_traced(bilm.contextual_encoder, 1)(x, mask).numpy(), expected,
                               rtol=0, atol=ATOL)
    bilm.trainable = False
    np.testing.assert_allclose(bilm.contextual_encoder(x, mask=mask).numpy(), expected,
                               rtol=0, atol=ATOL)
    assert not _copies(bilm.contextual_encoder)
    half = BiLM(BiLMOptions.tiny(), dtype="bfloat16", trainable=False)
    _traced(half.contextual_encoder, 1)(np.zeros((1, 3, 8), np.float32), np.ones((1, 3), bool))
    assert not _copies(half.contextual_encoder)


def test_the_copies_follow_loads_and_a_new_freeze(tmp_path):
    """Weights assigned by hand reach the copies with `refresh_one_row_kernels()` (until
    then one-row calls use the weights of the last refresh); loading a weight file and
    freezing the encoder again refresh them by themselves."""
    from keras_elmo.formats.weight_file import load_bilm_weights

    bilm, options, arrays, files = _load(tmp_path, seed=22)
    bilm.trainable = False
    encoder = bilm.contextual_encoder
    one_row = _traced(encoder, 1)
    x, mask = _inputs([4], steps=4, seed=23)
    old = ref.contextual_encoder(arrays, options, x, [4])
    np.testing.assert_allclose(one_row(x, mask).numpy(), old, rtol=0, atol=ATOL)
    for cell in _cells(encoder):
        cell.recurrent_kernel.assign(cell.recurrent_kernel * 0.5)
        cell.projection_kernel.assign(cell.projection_kernel * 1.5)
    new = np.asarray(encoder(x, mask=mask))  # eager: the stored kernels
    assert np.abs(new - old).max() > 1e-2
    np.testing.assert_allclose(one_row(x, mask).numpy(), old, rtol=0, atol=ATOL)  # a snapshot
    for cell in _cells(encoder):
        cell.refresh_one_row_kernels()
    np.testing.assert_allclose(one_row(x, mask).numpy(), new, rtol=0, atol=ATOL)
    load_bilm_weights(bilm, files[1])  # the file's weights again
    np.testing.assert_allclose(one_row(x, mask).numpy(), old, rtol=0, atol=ATOL)
    bilm.trainable = True
    for cell in _cells(encoder):
        cell.projection_kernel.assign(cell.projection_kernel * 1.5)
    bilm.trainable = False
    np.testing.assert_allclose(one_row(x, mask).numpy(), np.asarray(encoder(x, mask=mask)),
                               rtol=0, atol=ATOL)


def test_the_embedders_path_traces_its_one_row_function_once_with_the_copies(tmp_path):
    """`TokenEmbeddingCache` over a frozen biLM: one trace of the one-row function, which
    reads the copies; the numbers are the char path's."""
    from keras_elmo import batch_to_ids
    from keras_elmo.embedding.token_cache import TokenEmbeddingCache

    bilm, _, _, _ = _load(tmp_path, seed=26)
    bilm.trainable = False
    cache = TokenEmbeddingCache(bilm)
    for sentence in ([["a", "bc", "d"]], [["e", "a"]]):
        np.testing.assert_allclose(cache(sentence)["layers"].numpy(),
                                   bilm(batch_to_ids(sentence))["layers"].numpy(),
                                   rtol=0, atol=ATOL)
    assert cache._traced._one_row.experimental_get_tracing_count() == 1
    assert _copies(bilm.contextual_encoder)
