"""The perplexity-curve plot reads in-training evaluations and after-run evaluations."""

import importlib.util
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _plot_module():
    path = os.path.join(REPO, "benchmarks", "plot_perplexity_curve.py")
    spec = importlib.util.spec_from_file_location("plot_perplexity_curve", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MAIN_LOG = """\
=== train a small biLM for 20 minutes -> runs/x
step 200 | epoch 1 | loss 6.6 | ppl 765.9 | 7,347 tok/s | lr 0.0019 | 0:00:26 | 4% of --max-minutes, ETA 0:09:33
step 2000 | held-out perplexity: forward 300.5 | backward 310.0 | average 305.2 (2,112 sentences) | 0:04:10
step 4000 | held-out perplexity: forward 200.0 | backward 210.0 | average 205.0 (2,112 sentences) | 1:00:05
stopped (max_minutes) at step 5000 (epoch 2), 3610 s; wrote runs/x/weights.hdf5
forward perplexity:  180.25
backward perplexity: 185.50
forward ppl: 224.5
backward ppl: 223.9
"""


def test_main_job_log_gives_in_training_points_then_the_final_one(tmp_path):
    log = tmp_path / "main.log"
    log.write_text(MAIN_LOG)
    points, trigram = _plot_module().parse_log(str(log))
    assert points == [(250 / 60, 2000, 300.5, 310.0), (3605 / 60, 4000, 200.0, 210.0),
                      (3610 / 60, 5000, 180.25, 185.5)]
    assert trigram == {"forward": 224.5, "backward": 223.9}


def test_a_log_without_perplexity_is_refused(tmp_path):
    log = tmp_path / "empty.log"
    log.write_text("step 200 | epoch 1 | loss 6.6\n")
    with pytest.raises(ValueError, match="no held-out perplexity found"):
        _plot_module().parse_log(str(log))
