"""Learning-rate schedules: linear decay over the run's share done, equal after a resume."""

import io

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_elmo.training.config import TrainingConfig
from keras_elmo.training.model_dir import ModelDir
from keras_elmo.training.optimizers import scheduled_learning_rate
from keras_elmo.training.run_plan import RunPlan
from keras_elmo.training.trainer import Trainer


def test_linear_decay_falls_from_the_rate_to_zero_and_constant_stays():
    config = TrainingConfig.preset("tiny").replace(learning_rate=0.004,
                                                   learning_rate_schedule="linear-decay")
    assert [scheduled_learning_rate(config, f) for f in (0.0, 0.25, 1.0, 1.5, -1.0)] == \
        pytest.approx([0.004, 0.003, 0.0, 0.0, 0.004])
    constant = config.replace(learning_rate_schedule="constant")
    assert scheduled_learning_rate(constant, 0.9) == pytest.approx(0.004)


def test_unknown_schedule_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match=r"learning_rate_schedule must be one of "
                                         r"\('constant', 'linear-decay'\); received 'cosine'"):
        TrainingConfig.preset("tiny").replace(learning_rate_schedule="cosine")


def test_presets_small_decays_and_published_keeps_the_published_recipe():
    assert TrainingConfig.preset("small").learning_rate_schedule == "linear-decay"
    published = TrainingConfig.preset("published")
    assert (published.learning_rate_schedule, published.optimizer,
            published.learning_rate) == ("constant", "adagrad", 0.2)


def test_fraction_done_is_the_share_of_the_nearest_limit():
    plan = RunPlan(start_step=0, max_steps=100, max_minutes=10, n_epochs=4,
                   n_train_tokens=1000)
    assert plan.fraction_done(step=10, epoch=0, epoch_tokens=0, seconds=0) == 0.1
    assert plan.fraction_done(step=10, epoch=0, epoch_tokens=0, seconds=300) == 0.5
    assert plan.fraction_done(step=10, epoch=3, epoch_tokens=500, seconds=0) == 0.875
    assert plan.fraction_done(step=500, epoch=0, epoch_tokens=0, seconds=0) == 1.0
    assert RunPlan(0, None, None, 1, 0).fraction_done(5, 0, 0, 1.0) == 0.0


@pytest.fixture
def corpus(tiny_corpus, tmp_path):
    config, vocab, _, files = tiny_corpus
    config = config.replace(checkpoint_every_steps=100, optimizer="adam", learning_rate=0.01,
                            dropout=0.0, learning_rate_schedule="linear-decay")
    return config, vocab, tmp_path, files


def _trainer(config, vocab, path):
    """A trainer on the model directory `path` (created, or resumed when it holds a run)."""
    model_dir = ModelDir(str(path))
    model_dir.prepare(config, str(path.parent / "vocab.txt"))
    return Trainer(config, vocab, model_dir, log_every=1, stream=io.StringIO())


@pytest.mark.slow
def test_the_rate_decays_each_step_and_a_resumed_run_equals_an_uninterrupted_one(corpus):
    """12 steps at once == a run to --max-steps 12 stopped after 5 steps and resumed; the
    logged rate falls as 0.01 * (1 - step / 12) before each step."""
    config, vocab, tmp_path, files = corpus
    keras.utils.set_random_seed(0)
    once = _trainer(config, vocab, tmp_path / "once")
    result = once.fit(files, max_steps=12)
    rates = [report["learning_rate"] for report in result["history"]][:-1]
    # The rate shown with step s is the one set before step s (s - 1 steps done).
    np.testing.assert_allclose(rates, [0.01 * (1 - s / 12) for s in range(11)], rtol=1e-5)

    keras.utils.set_random_seed(0)
    interrupted = _trainer(config, vocab, tmp_path / "twice")
    stop_after = interrupted._should_stop
    interrupted._should_stop = lambda max_steps, *rest: (
        int(interrupted.step.numpy()) >= 5 or stop_after(max_steps, *rest))
    interrupted.fit(files, max_steps=12)
    resumed = _trainer(config, vocab, tmp_path / "twice")
    assert resumed.fit(files, max_steps=12)["resumed_from"].endswith("ckpt-5")
    for a, b in zip(once.model.trainable_variables, resumed.model.trainable_variables):
        np.testing.assert_allclose(b.numpy(), a.numpy(), atol=1e-6, err_msg=a.path)
    assert float(resumed.optimizer.learning_rate.numpy()) == pytest.approx(0.01 / 12)
    assert tf.train.latest_checkpoint(str(tmp_path / "twice" / "checkpoints")).endswith("-12")
