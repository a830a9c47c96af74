"""`keras-elmo embed --dtype bfloat16` and `ElmoEmbedder(..., dtype=...)`: the explicit
reduced-precision option writes the float32 file's layout with values near the float32
ones, works with and without the token cache, and refuses any other dtype."""

import os

import h5py
import numpy as np
import pytest

import weight_fixtures
from cpu_class import needs_bfloat16_products
from keras_elmo import ElmoEmbedder
from keras_elmo.cli.main import main

LINES = ["the cat sat", "", "中国 人民 日报 。", "a", "x y z the cat"]
VOCAB = ["<S>", "</S>", "<UNK>", "the", "cat", "中国", "a"]  # "x", "y", "z" etc. are OOV
#: One bfloat16 rounding step, relative: bfloat16 keeps 8 significant bits.
BFLOAT16_STEP = 2.0 ** -7


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A tiny published-layout MODEL_DIR (P = 8, 2 layers), an input file and a vocab."""
    root = tmp_path_factory.mktemp("embed_dtype")
    options = weight_fixtures.make_options()
    weight_fixtures.write_model_dir(str(root / "model"), options,
                                    weight_fixtures.random_weight_arrays(options, seed=0))
    (root / "in.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    (root / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    return str(root)


def _embed(root, output, *flags):
    """Runs `keras-elmo embed` at batch 2; returns `{key: array}` of the written file."""
    path = os.path.join(root, output)
    code = main(["embed", os.path.join(root, "model"), os.path.join(root, "in.txt"), path,
                 "--batch-size", "2", "--no-progress", *flags])
    assert code == 0
    with h5py.File(path, "r") as f:
        return {key: f[key][...] for key in f}


def _stacked(datasets):
    """`(L + 1, total tokens, 2P)`: every line's `(L + 1, n, 2P)` side by side."""
    return np.concatenate([datasets[str(i)] for i in range(len(LINES))], axis=1)


@needs_bfloat16_products
def test_bfloat16_file_has_the_float32_layout_and_nearby_values(model_dir):
    exact = _embed(model_dir, "float32.hdf5", "--no-token-cache")
    reduced = _embed(model_dir, "bfloat16.hdf5", "--no-token-cache", "--dtype", "bfloat16")
    assert sorted(reduced) == sorted(exact)
    assert reduced["sentence_to_index"] == exact["sentence_to_index"]
    for i, line in enumerate(LINES):
        a, b = exact[str(i)], reduced[str(i)]
        assert b.dtype == a.dtype == np.float32
        assert b.shape == a.shape == (3, len(line.split()), 16)
    assert reduced["1"].shape == (3, 0, 16)  # the empty line: zero-length in both
    a, b = _stacked(exact), _stacked(reduced)
    difference = np.abs(a - b).max()
    assert 0 < difference <= 0.05 * np.abs(a).max(), (difference, np.abs(a).max())


@needs_bfloat16_products
def test_bfloat16_with_and_without_the_token_cache_agree(model_dir):
    plain = _embed(model_dir, "plain.hdf5", "--no-token-cache", "--dtype", "bfloat16")
    cached = _embed(model_dir, "cached.hdf5", "--vocab", os.path.join(model_dir, "vocab.txt"),
                    "--dtype", "bfloat16")
    assert sorted(cached) == sorted(plain)
    a, b = _stacked(plain), _stacked(cached)
    # The cache keeps the bfloat16 char-CNN vectors in float32 (exactly: bfloat16 values are
    # float32 values) and the biLM casts them back losslessly, so both paths run the biLSTM
    # on the same numbers, except where the char CNN, called on batches of another shape
    # (the vocabulary, the OOV tokens, the boundary tokens), sums in another order and
    # rounds a token-layer value the other way: at most one bfloat16 step each.
    np.testing.assert_array_less(np.abs(a[0] - b[0]),
                                 BFLOAT16_STEP * np.abs(a[0]) + np.finfo(np.float32).tiny)
    # Those steps carried through the biLSTM: measured over 10 weight seeds and batch sizes
    # 1, 2 and 64, at most 0.23% of the largest |value| and 0.027% of the mean |value|
    # (mostly exactly 0). bfloat16 against float32 differs by 0.38-0.74% (max) and
    # 0.39-0.79% (mean), so the mean bound also catches a cache path computed in another
    # precision than the char path.
    assert np.abs(a - b).max() <= 0.005 * np.abs(a).max()
    assert np.abs(a - b).mean() <= 0.001 * np.abs(a).mean()


def test_other_dtypes_are_refused(model_dir, capsys):
    argv = ["embed", os.path.join(model_dir, "model"), os.path.join(model_dir, "in.txt"),
            os.path.join(model_dir, "never.hdf5"), "--dtype", "float16"]
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's own errors
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2 and "invalid choice: 'float16'" in err, err
    assert not os.path.exists(argv[3])
    with pytest.raises(ValueError, match=r"float16.*bfloat16|bfloat16.*float16") as error:
        ElmoEmbedder(os.path.join(model_dir, "model"), dtype="float16")
    assert "received dtype='float16'" in str(error.value)
    assert "\n" not in str(error.value)
