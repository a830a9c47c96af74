"""The training step compiled with XLA (`jit_compile=True`) gives the loss and gradients of
the default step.

The compiled step runs the static-shape paths (every position encoded and scored, the
padding's NLL zeroed) and takes the sampled-softmax negatives drawn before it; the default
step de-duplicates tokens, trims padding chars and scores only the real targets.
Tolerance: the loss sums to 1e-5 relative, every gradient to 1e-4 of its largest entry
(XLA fuses and reorders float32 sums).
"""

import io
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from keras_elmo.text.characters import batch_to_ids, token_mask
from keras_elmo.training.trainer import Trainer

SENTENCES = [["<S>", "the", "cat", "sat", "on", "the", "mat", "</S>"],
             ["<S>", "a", "dog", "ran", "</S>"],
             ["<S>", "the", "red", "house", "</S>"]]


def batch(vocab):
    ids = batch_to_ids(SENTENCES)  # (3, 8, 50)
    tokens = np.zeros(ids.shape[:2], np.int32)
    for i, sentence in enumerate(SENTENCES):
        tokens[i, :len(sentence)] = vocab.encode(sentence)
    return tf.constant(ids), tf.constant(tokens)


def dense(gradient):
    return tf.convert_to_tensor(gradient).numpy()


@pytest.mark.parametrize("sampled", [False, True], ids=["full_softmax", "sampled_softmax"])
def test_compiled_step_gives_the_loss_and_gradients_of_the_default_step(tiny_corpus,
                                                                        sampled):
    config, vocab, model_dir, _ = tiny_corpus
    config = config.replace(dropout=0.0, full_softmax_max_vocab=4 if sampled else 1024)
    default = Trainer(config, vocab, model_dir, stream=io.StringIO())
    compiled = Trainer(config.replace(jit_compile=True), vocab, model_dir,
                       stream=io.StringIO())
    compiled.model.set_weights(default.model.get_weights())
    char_ids, token_ids = batch(vocab)
    count = default.model.target_count(char_ids)
    negatives = {"static": None, "real": None}
    if sampled:  # the same draw for both: per position, then for the real targets
        static = compiled.model.sample_negatives(char_ids, token_ids)
        valid = token_mask(char_ids)[:, 1:]  # (batch, T-1)
        negatives["static"] = static
        negatives["real"] = {
            direction: (ids, tf.boolean_mask(tf.reshape(true_expected, valid.shape),
                                              valid)[:, tf.newaxis], sampled_expected)
            for direction, (ids, true_expected, sampled_expected) in static.items()}
    sums, grads = default._gradients(char_ids, token_ids, count, negatives["real"])
    xla_sums, xla_grads = compiled._gradients(char_ids, token_ids, count,
                                              negatives["static"])
    assert getattr(compiled._gradients, "_jit_compile", None) is True
    for key in ("forward", "backward", "count"):
        np.testing.assert_allclose(xla_sums[key].numpy(), sums[key].numpy(), rtol=1e-5)
    assert len(grads) == len(xla_grads) == len(default.model.trainable_variables)
    for variable, grad, xla_grad in zip(default.model.trainable_variables, grads, xla_grads):
        expected = dense(grad)
        scale = np.abs(expected).max()
        assert scale > 0, variable.path
        np.testing.assert_allclose(dense(xla_grad), expected, rtol=0, atol=1e-4 * scale,
                                   err_msg=variable.path)


@pytest.mark.slow
def test_compiled_training_runs_and_learns(tiny_corpus):
    """A few steps of `Trainer.fit` with `jit_compile=True` and the sampled softmax."""
    config, vocab, model_dir, files = tiny_corpus
    config = config.replace(jit_compile=True, full_softmax_max_vocab=4)
    result = Trainer(config, vocab, model_dir, log_every=5,
                     stream=io.StringIO()).fit(files, max_steps=10)
    losses = [report["loss"] for report in result["history"]]
    assert result["step"] == 10 and all(np.isfinite(losses)) and losses[-1] < losses[0]


_COMPILE_COUNT = textwrap.dedent("""
    import io, sys
    import numpy as np, tensorflow as tf
    from keras_elmo.training.config import TrainingConfig
    from keras_elmo.training.model_dir import ModelDir
    from keras_elmo.training.vocabulary import Vocabulary
    from keras_elmo.training.trainer import Trainer
    from keras_elmo.text.characters import batch_to_ids
    folder = sys.argv[1]
    vocab = Vocabulary(["<S>", "</S>", "<UNK>", "a", "b", "c"])
    vocab.save(folder + "/vocab.txt")
    config = TrainingConfig.preset("tiny").replace(n_tokens_vocab=len(vocab), dropout=0.0,
                                                   jit_compile=True)
    model_dir = ModelDir(folder + "/model")
    model_dir.prepare(config, folder + "/vocab.txt")
    trainer = Trainer(config, vocab, model_dir, stream=io.StringIO())
    sentences = [["<S>", "a", "b", "c", "</S>"], ["<S>", "c", "a", "</S>"]]
    char_ids = tf.constant(batch_to_ids(sentences))
    token_ids = np.zeros(char_ids.shape[:2], np.int32)
    for i, sentence in enumerate(sentences):
        token_ids[i, :len(sentence)] = vocab.encode(sentence)
    count = trainer.model.target_count(char_ids)
    variables = trainer.model.trainable_variables
    for _ in range(3):  # a step, an update of every weight, the next step
        sums, grads = trainer._gradients(char_ids, tf.constant(token_ids), count, None)
        trainer.optimizer.apply([tf.convert_to_tensor(g) for g in grads], variables)
    print("losses", float(sums["forward"]))
""")


def test_the_compiled_step_compiles_once_across_weight_updates(tmp_path):
    """Three steps with an optimizer update between them compile the step once: the
    weights are parameters of the compiled program, not constants baked into it (a
    `tf.cond` around the step once made XLA compile again after every update)."""
    env = dict(os.environ, TF_CPP_VMODULE="device_compiler=2", TF_CPP_MIN_LOG_LEVEL="0")
    result = subprocess.run([sys.executable, "-c", _COMPILE_COUNT, str(tmp_path)], env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    compiles = result.stderr.count("Compilation of XLA executable time")
    constants = result.stderr.count("kind=constant-resource")
    assert compiles == 1 and constants == 0, (compiles, constants)
