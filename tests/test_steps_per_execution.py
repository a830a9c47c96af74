"""`steps_per_execution`: several steps per call of a traced loop, values read back once
per call, the same training as one step per call."""

import io
import re

import keras
import numpy as np
import pytest

from keras_elmo.training.trainer import Trainer


def train(config, vocab, model_dir, files, max_steps, calls=None, log_every=5):
    keras.utils.set_random_seed(0)
    trainer = Trainer(config, vocab, model_dir, log_every=log_every, stream=io.StringIO())
    if calls is not None:  # count the calls of the traced loop (each is one read-back)
        build = trainer._build_steps

        def counting_build():
            steps_fn = build()

            def counted(*args):
                calls.append(int(args[1]))
                return steps_fn(*args)
            return counted
        trainer._build_steps = counting_build
    return trainer, trainer.fit(files, max_steps=max_steps)


@pytest.mark.slow
def test_several_steps_per_call_train_exactly_like_one(tiny_corpus, tmp_path):
    config, vocab, model_dir, files = tiny_corpus
    config = config.replace(dropout=0.0)
    one, one_result = train(config, vocab, model_dir, files, max_steps=23)
    from keras_elmo.training.model_dir import ModelDir

    other_dir = ModelDir(str(tmp_path / "other"))
    other_dir.prepare(config, str(tmp_path / "vocab.txt"))
    calls = []
    several, result = train(config.replace(steps_per_execution=4), vocab, other_dir, files,
                            max_steps=23, calls=calls)
    # At most 4 steps a call, each call ending on the next log (every 5) or checkpoint
    # (every 10) step or at the epoch's end (asked for 4 at step 10, the epoch ended at
    # 12): far fewer read-backs than steps.
    assert max(calls) == 4 and calls[:5] == [4, 1, 4, 1, 4] and len(calls) <= 12, calls
    assert result["step"] == one_result["step"] == 23
    assert [h["loss"] for h in result["history"]] == pytest.approx(
        [h["loss"] for h in one_result["history"]], abs=1e-6)
    for a, b in zip(several.model.get_weights(), one.model.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6)
    assert other_dir.latest_checkpoint().endswith("ckpt-23")
    assert (int(several.epoch.numpy()), int(several.batches_in_epoch.numpy())) == \
        (int(one.epoch.numpy()), int(one.batches_in_epoch.numpy()))
    # Resumable: a new trainer continues from ckpt-23 with several steps per call.
    resumed, again = train(config.replace(steps_per_execution=4), vocab, other_dir, files,
                           max_steps=30)
    assert again["resumed_from"].endswith("ckpt-23") and again["step"] == 30


def test_calls_end_on_log_checkpoint_and_evaluation_steps(tiny_corpus):
    config, vocab, model_dir, _ = tiny_corpus
    trainer = Trainer(config.replace(steps_per_execution=8, checkpoint_every_steps=10),
                      vocab, model_dir, log_every=6, stream=io.StringIO())
    assert trainer._steps_to_run(max_steps=None, eval_every=None) == 6  # the log step
    trainer.step.assign(6)
    assert trainer._steps_to_run(max_steps=None, eval_every=None) == 4  # checkpoint 10
    assert trainer._steps_to_run(max_steps=None, eval_every=7) == 1  # evaluation 7
    assert trainer._steps_to_run(max_steps=8, eval_every=None) == 2  # max_steps


@pytest.mark.slow
def test_a_diverged_step_ends_the_call_and_the_run(tiny_corpus):
    """Nothing runs after a non-finite step: the error names it; no later step counted."""
    config, vocab, model_dir, files = tiny_corpus
    config = config.replace(steps_per_execution=8, learning_rate=1e30, all_clip_norm_val=1e30)
    trainer = Trainer(config, vocab, model_dir, log_every=100, stream=io.StringIO())
    with pytest.raises(ValueError, match=r"training diverged at step (\d+)") as error:
        trainer.fit(files, max_steps=40)
    diverged = int(re.search(r"diverged at step (\d+)", str(error.value)).group(1))
    assert int(trainer.step.numpy()) == diverged - 1
