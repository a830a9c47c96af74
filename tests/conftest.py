"""Shared pytest fixtures: a tiny options dict and a published-layout model directory."""

import os
import sys
import types

import pytest

# `tests/` is no package: pytest puts it on sys.path (rootdir-relative "prepend" import
# mode), so the helpers import as top-level modules (`import numpy_reference`).
import weight_fixtures


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
