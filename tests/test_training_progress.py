"""Watching a training run: share done and ETA of the limit reached first, held-out perplexity
during training (log line and TensorBoard scalars), an early first line."""

import glob
import re

import pytest
import tensorflow as tf

from keras_elmo.cli.main import main
from keras_elmo.training.run_plan import RunPlan

LINES = "the cat sat on the mat\na dog ran to the red house\nthe end\n"


def test_plan_picks_the_limit_reached_first():
    plan = RunPlan(start_step=100, max_steps=1100, max_minutes=10, n_epochs=3,
                   n_train_tokens=10_000)
    # 100 steps in 60 s: 900 steps left = 540 s; 10 minutes: 540 s left too -> steps wins
    # only when its estimate is lower.
    found = plan.estimates(step=200, epoch=0, epoch_tokens=2_000, run_tokens=2_000,
                           seconds=60.0)
    assert found["--max-minutes"] == pytest.approx((0.1, 540.0))
    assert found["--max-steps"] == pytest.approx((200 / 1100, 900 * 60.0 / 100))
    assert found["epochs"] == pytest.approx((0.2 / 3, (3 - 0.2) * 10_000 * 60.0 / 2_000))
    assert plan.describe(200, 0, 2_000, 2_000, 60.0) == "10% of --max-minutes, ETA 0:09:00"
    epochs_only = RunPlan(0, None, None, 2, 1_000)
    assert epochs_only.describe(10, 1, 500, 1_500, 30.0) == "~75% of 2 epoch(s), ETA 0:00:10"
    assert RunPlan(0, None, None, 1, 0).describe(10, 0, 5, 5, 1.0) == ""


def _scalars(logs_dir):
    names = {}
    for path in glob.glob(f"{logs_dir}/events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                names.setdefault(value.tag, []).append(event.step)
    return names


@pytest.mark.slow
def test_progress_line_and_heldout_perplexity_during_training(tmp_path, capsys):
    corpus, heldout, vocab = tmp_path / "train.txt", tmp_path / "heldout.txt", tmp_path / "v.txt"
    corpus.write_text(LINES * 2000)  # the 4 steps are a small share of the epoch
    heldout.write_text(LINES * 3)
    vocab.write_text("<S>\n</S>\n<UNK>\nthe\ncat\nsat\non\nmat\na\ndog\n")
    model = tmp_path / "model"
    assert main(["train", str(model), "--train", str(corpus), "--vocab", str(vocab),
                 "--size", "tiny", "--max-steps", "4", "--log-every", "2", "--heldout",
                 str(heldout), "--eval-every", "2", "--eval-sentences", "4"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"keras-elmo train {model}: loading TensorFlow")
    assert any(line.startswith("tracing the training step at step 0") for line in out)
    progress = [line for line in out if line.startswith("step 2 | epoch 1 | loss")]
    assert progress and "50% of --max-steps, ETA" in progress[0], out
    during = [line for line in out if "held-out perplexity: forward" in line]
    assert [line.split(" |")[0] for line in during] == ["step 2", "step 4"], out
    assert all(re.search(r"\(4 sentences\) \| \d+:\d\d:\d\d$", line) for line in during), during
    assert "average perplexity:" in out[-1]  # the full evaluation at the end
    scalars = _scalars(model / "logs")
    assert scalars["heldout_perplexity"] == [2, 4]
    assert scalars["heldout_forward_perplexity"] == [2, 4]
    assert 2 in scalars["loss"]


def test_eval_flags_are_checked_first(tmp_path, capsys):
    assert main(["train", str(tmp_path / "m"), "--eval-every", "-1"]) == 2
    assert "--eval-every must be >= 0" in capsys.readouterr().err
