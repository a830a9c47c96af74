"""`unique_rows`: the char CNN's exact de-duplication of token rows with a GPU kernel."""

import numpy as np
import pytest
import tensorflow as tf

from keras_elmo.formats.options import BiLMOptions
from keras_elmo.backend import tensorflow as tensorflow_backend
from keras_elmo.backend.tensorflow import unique_rows
from keras_elmo.layers.char_cnn_embedder import CharCNNEmbedder
from keras_elmo.text.characters import batch_to_ids


def near_duplicates():
    """Rows of 50 ids that differ from a base row in one position each (the first, a
    middle one, the last: the tail), and exact copies of some of them."""
    base = batch_to_ids([["elephants"]])[0, 0]  # (50,)
    rows = [base]
    for position in (0, 5, 10, 11, 48, 49):
        row = base.copy()
        row[position] = (row[position] + 1) % 262
        rows.append(row)
    rows += [rows[3], rows[0], rows[6], np.zeros(50, np.int32), np.zeros(50, np.int32)]
    return np.stack(rows).astype(np.int32)  # (12, 50)


def check_exact(ids, rows, positions):
    rows, positions = rows.numpy(), positions.numpy()
    # Every row is its group's row: two distinct rows in one group would break this.
    np.testing.assert_array_equal(rows[positions], ids)


@pytest.mark.parametrize("traced", [False, True])
def test_equal_rows_merge_distinct_rows_never_do(traced):
    ids = near_duplicates()
    fn = tf.function(unique_rows) if traced else unique_rows
    rows, positions = fn(tf.constant(ids))
    check_exact(ids, rows, positions)
    assert rows.shape[0] == len(np.unique(ids, axis=0)) == 8  # the duplicates merged
    assert len({row.tobytes() for row in rows.numpy()}) == 8
    assert positions.numpy().tolist() == [0, 1, 2, 3, 4, 5, 6, 3, 0, 6, 7, 7]  # first seen


@pytest.mark.parametrize("weights", [np.zeros((50, 2)), np.ones((50, 2))],
                         ids=["every_key_collides", "permutations_collide"])
def test_a_key_collision_never_merges_distinct_rows(monkeypatch, weights):
    """With weights that give distinct rows equal keys (all zeros: every row; all ones:
    rows with the same ids in another order), the check sees the collision and no row is
    merged."""
    monkeypatch.setattr(tensorflow_backend, "_row_key_weights", lambda n: weights)
    ids = near_duplicates()
    swapped = ids[0].copy()
    swapped[[1, 2]] = swapped[[2, 1]]  # same ids, other order: same sum under ones
    ids = np.concatenate([ids, swapped[None]])
    rows, positions = tf.function(unique_rows)(tf.constant(ids))
    check_exact(ids, rows, positions)
    assert rows.shape[0] == len(ids)  # the fallback: every row its own group


def test_empty_batch():
    rows, positions = unique_rows(tf.zeros((0, 50), tf.int32))
    assert rows.shape == (0, 50) and positions.shape == (0,)


def test_encoder_output_is_unchanged_by_a_collision(monkeypatch):
    """The encoder gives the same vectors with de-duplication and with the fallback."""
    embedder = CharCNNEmbedder.from_options(BiLMOptions.tiny())
    ids = batch_to_ids([["a", "cat", "a", "tac"], ["cat", "dogs"]])
    expected = embedder(ids).numpy()
    monkeypatch.setattr(tensorflow_backend, "_row_key_weights", lambda n: np.ones((n, 2)))
    np.testing.assert_allclose(embedder(ids).numpy(), expected, rtol=1e-6, atol=1e-6)


def test_static_shapes_give_the_same_vectors():
    """Inside an XLA-compiled function (no de-duplication, every char position convolved)
    the encoder gives the vectors of the default path."""
    embedder = CharCNNEmbedder.from_options(BiLMOptions.tiny())
    ids = batch_to_ids([["a", "cat", "a", "tac"], ["cat", "hippopotamuses"]])
    np.testing.assert_allclose(tf.function(embedder, jit_compile=True)(ids).numpy(),
                               embedder(ids).numpy(), rtol=1e-5, atol=1e-6)
