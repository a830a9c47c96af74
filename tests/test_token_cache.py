"""`TokenEmbeddingCache`: the cached path equals the char path (1e-5), OOV falls back to
the char CNN, the file round-trips and a file of other weights is refused."""

import h5py
import numpy as np
import pytest

import keras_elmo
from keras_elmo import BiLM, BiLMOptions, batch_to_ids
from keras_elmo.embedding.token_cache import TokenEmbeddingCache

ATOL = 1e-5
VOCAB = ["<S>", "</S>", "<UNK>", "the", "cat", "sat", "中国", "人民"]
SENTENCES = [["the", "cat", "sat", "on", "mats"], ["中国", "火星"], [], ["<S>", "cat"]]


@pytest.fixture(scope="module")
def bilm():
    keras_elmo_seed = 3
    import keras

    keras.utils.set_random_seed(keras_elmo_seed)
    return BiLM(BiLMOptions.tiny())


def _char_path(bilm, sentences):
    out = bilm(batch_to_ids(sentences))
    return np.asarray(out["layers"]), np.asarray(out["mask"])


def test_cached_path_equals_char_path(bilm):
    cache = TokenEmbeddingCache(bilm, VOCAB, batch_size=3)
    out = cache(SENTENCES)
    layers, mask = _char_path(bilm, SENTENCES)
    assert out["layers"].shape == layers.shape == (4, 3, 5, 16)
    np.testing.assert_array_equal(np.asarray(out["mask"]), mask)
    np.testing.assert_allclose(np.asarray(out["layers"]), layers, atol=ATOL, rtol=0)
    # "on", "mats", "火星" are OOV: counted, and computed by the char CNN.
    assert (cache.hits, cache.misses) == (6, 3)


def test_cached_rows_are_the_char_cnn_outputs(bilm):
    cache = TokenEmbeddingCache(bilm, VOCAB + ["cat"])  # a repeat is kept once
    assert len(cache) == len(VOCAB) and cache.tokens == VOCAB
    direct = np.asarray(bilm.token_embedder(batch_to_ids([VOCAB])))[0]
    np.testing.assert_allclose(cache.embeddings, direct, atol=ATOL, rtol=0)
    vectors, mask = cache.embed_tokens([["cat", "zebra"], []])
    assert vectors.shape == (2, 2, 8) and mask.tolist() == [[True, True], [False, False]]
    np.testing.assert_array_equal(vectors[1], 0.0)


def test_all_empty_and_empty_batch(bilm):
    cache = TokenEmbeddingCache(bilm, VOCAB)
    out = cache([[], []])
    assert out["layers"].shape == (2, 3, 0, 16)
    assert cache([])["layers"].shape[0] == 0


def test_save_load_round_trip_and_bilm_tf_layout(bilm, tmp_path):
    cache = TokenEmbeddingCache(bilm, VOCAB)
    path = tmp_path / "cache.hdf5"
    cache.save(path)
    loaded = TokenEmbeddingCache.load(path, bilm)
    assert loaded.tokens == VOCAB
    np.testing.assert_array_equal(loaded.embeddings, cache.embeddings)
    # bilm-tf's dump_token_embeddings: only `embedding`, vocabulary in its own file.
    bare = tmp_path / "bare.hdf5"
    with h5py.File(bare, "w") as f:
        f.create_dataset("embedding", data=cache.embeddings)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    assert TokenEmbeddingCache.load(bare, bilm, vocab_file=vocab).tokens == VOCAB
    with pytest.raises(ValueError, match="no 'tokens' dataset"):
        TokenEmbeddingCache.load(bare, bilm)


def test_load_refuses_other_weights_and_bad_files(bilm, tmp_path):
    path = tmp_path / "cache.hdf5"
    TokenEmbeddingCache(bilm, VOCAB).save(path)
    other = BiLM(BiLMOptions.tiny())
    with pytest.raises(ValueError, match="does not match this biLM"):
        TokenEmbeddingCache.load(path, other)
    with pytest.raises(FileNotFoundError, match="not found"):
        TokenEmbeddingCache.load(tmp_path / "missing.hdf5", bilm)
    (tmp_path / "junk.hdf5").write_text("not hdf5")
    with pytest.raises(ValueError, match="not a readable HDF5"):
        TokenEmbeddingCache.load(tmp_path / "junk.hdf5", bilm)
    with pytest.raises(ValueError, match="shape"):
        TokenEmbeddingCache(bilm, VOCAB, embeddings=np.zeros((2, 8)))
    with pytest.raises(ValueError, match="single string"):
        TokenEmbeddingCache(bilm, "the cat")


def test_layers_from_token_embeddings_is_exact(bilm):
    """The BiLM entry point itself: given the char CNN's vectors, the very same outputs."""
    ids = batch_to_ids(SENTENCES)
    vectors = bilm.token_embedder(ids)
    out = bilm.layers_from_token_embeddings(vectors, np.any(ids != 0, axis=-1))
    layers, mask = _char_path(bilm, SENTENCES)
    np.testing.assert_allclose(np.asarray(out["layers"]), layers, atol=1e-6, rtol=0)
    np.testing.assert_array_equal(np.asarray(out["mask"]), mask)
    assert keras_elmo.BiLM is BiLM


def test_one_trace_per_kind_of_batch(bilm):
    """One row runs the one-row function, several rows the other; both give the char
    path's numbers, and neither traces again for other lengths or row counts."""
    cache = TokenEmbeddingCache(bilm)
    for sentences in (SENTENCES[:1], SENTENCES[1:2], SENTENCES, SENTENCES[:2]):
        got = cache(sentences)["layers"]
        np.testing.assert_allclose(np.asarray(got), _char_path(bilm, sentences)[0],
                                   atol=1e-6, rtol=0)
    assert cache._traced._one_row.experimental_get_tracing_count() == 1
    assert cache._traced._rows.experimental_get_tracing_count() == 1


