"""Shared helpers of the export tests (no tests here): a tiny published-layout model, the
sentences fed to every signature, and the eager Keras reference outputs.

The reference is `keras_elmo.ElmoLayer` run eagerly on padded string tokens: the path a
Python user takes, independent of the export code.
"""

import os
import subprocess
import sys

import numpy as np
import tensorflow as tf

from keras_elmo import BiLM, BiLMOptions, ElmoLayer
from keras_elmo.formats.weight_file import save_published

#: Two batches of different size and length (batch 3 x 4 tokens, batch 1 x 5 tokens),
#: with non-ASCII tokens, an empty sentence and a literal `</S>` token.
BATCHES = [
    [["The", "cat", "sat", "."], ["Hällo", "wörld"], []],
    [["你好", "</S>", "a", "b", "c"]],
]
#: A trained-looking mix (not the default), to show the exported `elmo` uses given weights.
MIX = {"scalar_parameters": [0.3, -1.2, 0.7], "gamma": 1.6, "do_layer_norm": False}
ATOL = 1e-5

#: Packages a TensorFlow-only subprocess cannot import: Keras, keras-elmo, tensorflow-text
#: and the project's folders (`import tensorflow` itself imports Keras when it is installed,
#: and works without it).
HIDDEN = ("keras", "keras_elmo", "tensorflow_text", "tf_keras", "export", "cli", "training")
#: Only what a client of the export may not have: keras-elmo, tensorflow-text, our folders.
OURS = ("keras_elmo", "tensorflow_text", "export", "cli", "training", "embedding",
        "evaluation")

#: Prepended to every subprocess script: makes the packages of `HIDDEN` unimportable, as if
#: not installed.
HIDE_TEMPLATE = """
import sys
HIDDEN = {hidden!r}

class _Hide:
    def __init__(self, finder):
        self.finder = finder
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            return None
        return self.finder.find_spec(name, path, target)
    def __getattr__(self, attr):
        return getattr(self.finder, attr)

sys.meta_path[:] = [_Hide(finder) for finder in sys.meta_path]
"""
HIDE_PACKAGES = HIDE_TEMPLATE.format(hidden=HIDDEN)


def make_model_dir(directory, seed=0):
    """Writes options.json + weights.hdf5 of a tiny biLM with random weights (biases too).

    Returns `(options_file, weight_file)`.
    """
    bilm = BiLM(BiLMOptions.tiny())
    rng = np.random.default_rng(seed)
    for variable in bilm.weights:
        variable.assign(rng.normal(0.0, 0.5, variable.shape).astype("float32"))
    return save_published(bilm, directory)


def padded(sentences):
    """`(tokens (batch, max_len) str padded with "", sequence_len (batch,) int32)`."""
    width = max((len(s) for s in sentences), default=0)
    tokens = np.array([s + [""] * (width - len(s)) for s in sentences], dtype=object)
    return tokens.reshape(len(sentences), width), np.array([len(s) for s in sentences],
                                                            dtype=np.int32)


def eager_reference(options_file, weight_file, sentences, mix=None):
    """Outputs of the eager `ElmoLayer` on `sentences`, named as the signatures name them."""
    layer = ElmoLayer.from_weights(options_file, weight_file, return_layers=True)
    layer.build()
    if mix is not None:
        layer.scalar_mixes[0].scalar_parameters.assign(mix["scalar_parameters"])
        layer.scalar_mixes[0].gamma.assign(mix["gamma"])
    tokens, lengths = padded(sentences)
    out = layer(tf.constant(tokens.astype(str).reshape(tokens.shape), tf.string))
    layers, elmo = out["layers"].numpy(), out["elmo"].numpy()
    mask = np.arange(tokens.shape[1])[None, :] < lengths[:, None]
    # TF Hub's word_emb is the token layer x, (batch, T, P); layer 0 is [x; x].
    result = {"word_emb": layers[:, 0, :, :layers.shape[-1] // 2], "elmo": elmo,
              "sequence_mask": mask}
    for j in range(1, layers.shape[1]):
        result[f"lstm_outputs{j}"] = layers[:, j]
    count = np.maximum(mask.sum(axis=1, keepdims=True), 1)
    result["default"] = (elmo * mask[..., None]).sum(axis=1) / count
    return result


def assert_outputs_close(actual, expected, context=""):
    """Every expected output is present with the same shape and within `ATOL`."""
    missing = sorted(set(expected) - set(actual))
    if missing:
        raise AssertionError(f"{context}: outputs {missing} missing; got {sorted(actual)}")
    for name, want in expected.items():
        got = np.asarray(actual[name])
        if got.shape != want.shape:
            raise AssertionError(f"{context} {name}: shape {got.shape}, expected {want.shape}")
        if want.dtype == bool:
            np.testing.assert_array_equal(got, want, err_msg=f"{context} {name}")
        else:
            np.testing.assert_allclose(got, want, atol=ATOL, rtol=0,
                                       err_msg=f"{context} {name}")


def run_python(code, hide=True, timeout=120, hidden=HIDDEN, env=None):
    """Runs `code` in a fresh `python -c` (with the packages `hidden` made unimportable when
    `hide`; `sys` is imported either way), with `env` added to the environment; returns the
    finished process."""
    return finish_python(start_python(code, hide, hidden, env), timeout)


def start_python(code, hide=True, hidden=HIDDEN, env=None):
    """`run_python`'s process, started and not waited for (several at once: each is mostly
    tracing, on one core); `finish_python` waits for it."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **(env or {}))
    prefix = HIDE_TEMPLATE.format(hidden=tuple(hidden)) if hide else "import sys\n"
    return subprocess.Popen([sys.executable, "-c", prefix + code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd="/")


def finish_python(process, timeout=120):
    """Waits for a `start_python` process (killed after `timeout` seconds, raising
    `subprocess.TimeoutExpired` as `subprocess.run` does); returns the finished process, as
    `run_python` does."""
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
