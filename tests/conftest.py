"""Shared pytest fixtures: a tiny options dict, a published-layout model directory and a
tiny training corpus."""

import os
import sys
import types

import pytest

# `tests/` is no package: pytest puts it on sys.path (rootdir-relative "prepend" import
# mode), so the helpers import as top-level modules (`import numpy_reference`).
import weight_fixtures

# XLA (every JAX process the tests start, and TensorFlow's jit_compile steps) compiles at
# LLVM's O0, which compiles faster and gives the same arrays within the tests' tolerances
# (docs/performance.md, "The test suite: XLA at O0 in the tests"): the tests hold the
# model's math, not the code XLA generates for it, and the benchmarks time the default
# level. A caller's setting stays.
os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0")


@pytest.fixture
def tiny_options_dict():
    """A fresh options.json dict of a tiny model (F = 20 filters, P = 8, D = 12, 2 layers)."""
    return weight_fixtures.make_options()


@pytest.fixture
def tiny_model_dir(tmp_path, tiny_options_dict):
    """tmp dir with options.json + weights.hdf5 (random published-layout arrays, seed 0).

    Returns a namespace with `directory`, `options_file`, `weight_file`, `options` (dict)
    and `arrays` (name -> float32 array, as written).
    """
    arrays = weight_fixtures.random_weight_arrays(tiny_options_dict, seed=0)
    options_file, weight_file = weight_fixtures.write_model_dir(
        str(tmp_path / "model"), tiny_options_dict, arrays)
    return types.SimpleNamespace(directory=str(tmp_path / "model"), options_file=options_file,
                                 weight_file=weight_file, options=tiny_options_dict,
                                 arrays=arrays)


@pytest.fixture
def tiny_corpus(tmp_path):
    """A repetitive two-line corpus, its vocabulary (vocab.txt) and a tiny `TrainingConfig`
    for it (50 epochs, 64-token batches, a checkpoint every 10 steps).

    Returns `(config, vocab, model_dir, files)`; `model_dir` is `tmp_path / "model"`,
    prepared for a new run.
    """
    return make_tiny_corpus(tmp_path)


@pytest.fixture(scope="session")
def tiny_corpus_factory():
    """`make_tiny_corpus`, for a fixture of wider scope: `tiny_corpus` in a folder given."""
    return make_tiny_corpus


def make_tiny_corpus(tmp_path):
    """`tiny_corpus` in the folder `tmp_path` (a `pathlib.Path`)."""
    from keras_elmo.training.config import TrainingConfig
    from keras_elmo.training.model_dir import ModelDir
    from keras_elmo.training.vocabulary import build_vocabulary

    path = tmp_path / "train.txt"
    path.write_text("the cat sat on the mat\na dog ran to the red house\n" * 40)
    vocab = build_vocabulary([str(path)])
    vocab.save(str(tmp_path / "vocab.txt"))
    config = TrainingConfig.preset("tiny").replace(
        n_tokens_vocab=len(vocab), n_epochs=50, batch_tokens=64, checkpoint_every_steps=10,
        train_prefix=str(path))
    model_dir = ModelDir(str(tmp_path / "model"))
    model_dir.prepare(config, str(tmp_path / "vocab.txt"))
    return config, vocab, model_dir, [str(path)]


@pytest.fixture(scope="session")
def exported_tiny_model(tmp_path_factory):
    """The export tests' model, made and exported once per session for every module that
    reads it (nothing writes to it): `test_export_helpers.make_model_dir` (seed 0) with
    `test_export_helpers.MIX` as its scalar_mix.json, exported by `export_model_dir` as
    version 1.

    Returns a dict: `options`, `weights` (the files), `path` (the SavedModel).
    """
    import json

    from keras_elmo.export import export_model_dir
    from test_export_helpers import MIX, make_model_dir

    root = tmp_path_factory.mktemp("exported_tiny_model")
    options, weights = make_model_dir(str(root / "model"))
    with open(root / "model" / "scalar_mix.json", "w") as handle:
        json.dump(MIX, handle)
    path = export_model_dir(str(root / "model"), str(root / "serving"), version=1)
    return dict(options=options, weights=weights, path=path)
