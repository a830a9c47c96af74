"""tf.distribute: two logical CPUs == one device; a two-worker job on 127.0.0.1 completes.

Each case runs in its own process: logical devices must be set before any TF op, and
multi-worker collectives must never outlive a test (`timeout -k`).
"""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from keras_elmo.training.distribute import cluster_size

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: One step on the two logical CPUs (`two`) or on the first alone (`one`), from the weights
#: the seed gives; writes the weights before and after to an .npz, prints a JSON report.
MIRRORED_SCRIPT = r'''
import json, sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpu[0], [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
import numpy as np
from keras_elmo.text.characters import batch_to_ids
from keras_elmo.training.config import TrainingConfig
from keras_elmo.training.model_dir import ModelDir
from keras_elmo.training.trainer import Trainer
from keras_elmo.training.vocabulary import Vocabulary

vocab = Vocabulary(["<S>", "</S>", "<UNK>"] + list("abcdefgh"))
config = TrainingConfig.preset("tiny").replace(n_tokens_vocab=len(vocab), dropout=0.0)
a = [["<S>", "a", "b", "c", "</S>"], ["<S>", "d", "</S>"]]
b = [["<S>", "e", "f", "</S>"], ["<S>", "g", "h", "zz", "a", "</S>"], ["<S>", "b", "</S>"]]

def batch(sentences, length):
    ids = batch_to_ids(sentences)
    ids = np.pad(ids, ((0, 0), (0, length - ids.shape[1]), (0, 0)))
    tokens = np.zeros(ids.shape[:2], np.int32)
    for i, s in enumerate(sentences):
        tokens[i, :len(s)] = vocab.encode(s)
    return {"char_ids": ids, "token_ids": tokens}

def one_step(strategy, per_replica):
    keras.utils.set_random_seed(0)  # the same start in both processes (the test checks it)
    trainer = Trainer(config, vocab, ModelDir(sys.argv[1]), strategy=strategy)
    start = trainer.model.get_weights()
    spec = {"char_ids": tf.TensorSpec((None, None, 50), tf.int32),
            "token_ids": tf.TensorSpec((None, None), tf.int32)}
    dataset = strategy.distribute_datasets_from_function(
        lambda _: tf.data.Dataset.from_generator(lambda: iter(per_replica), output_signature=spec))
    results = [trainer.train_step(x, dataset.element_spec) for x in dataset]
    sums, tokens, _ = results[0]
    loss = 0.5 * float(sums["forward"] + sums["backward"]) / float(sums["count"])
    return start, loss, trainer.model.get_weights(), len(results), int(tokens)

if sys.argv[2] == "two":  # every local device: the two logical CPUs
    strategy, per_replica = tf.distribute.MirroredStrategy(), [batch(a, 5), batch(b, 6)]
else:
    strategy, per_replica = tf.distribute.MirroredStrategy(devices=["/cpu:0"]), [batch(a + b, 6)]
start, loss, after, steps, tokens = one_step(strategy, per_replica)
np.savez(sys.argv[3], *start, *after)
print(json.dumps({"replicas": strategy.num_replicas_in_sync, "loss": loss, "steps": steps,
                  "tokens": tokens}))
'''


def _env():
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TF_CONFIG", None)
    return env


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cluster_size_reads_tf_config():
    assert cluster_size("") == 1
    assert cluster_size(json.dumps({"cluster": {"worker": ["a:1", "b:2"], "chief": ["c:3"]},
                                    "task": {"type": "chief", "index": 0}})) == 3
    with pytest.raises(ValueError, match="TF_CONFIG"):
        cluster_size("{not json")


def _run_at_once(commands, tmp_path):
    """Runs `commands` (name -> argv) at once, each mostly tracing on one core, under
    `timeout`; returns name -> the JSON report on the last line of its output."""
    processes = {name: subprocess.Popen(
        ["timeout", "-k", "10", "240", sys.executable, *argv], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=_env(), cwd=str(tmp_path))
        for name, argv in commands.items()}
    results = {}
    try:
        for name, process in processes.items():
            out, err = process.communicate()
            assert process.returncode == 0, err[-3000:]
            results[name] = json.loads(out.strip().splitlines()[-1])
    finally:
        for process in processes.values():  # the others, when one failed
            if process.poll() is None:
                process.terminate()  # `timeout` passes it on
                process.communicate()
    return results


@pytest.mark.slow
def test_two_logical_cpus_give_the_loss_and_update_of_one_device(tmp_path):
    script = tmp_path / "mirrored.py"
    script.write_text(MIRRORED_SCRIPT)
    results = _run_at_once({devices: [str(script), str(tmp_path / devices), devices,
                                      str(tmp_path / f"{devices}.npz")]
                            for devices in ("two", "one")}, tmp_path)
    two, one = results["two"], results["one"]
    assert (two["replicas"], one["replicas"]) == (2, 1)
    assert [one["steps"], two["steps"]] == [1, 1]
    assert [one["tokens"], two["tokens"]] == [21, 21]
    assert abs(one["loss"] - two["loss"]) < 1e-5
    weights = {}
    for devices in ("two", "one"):
        with np.load(tmp_path / f"{devices}.npz") as arrays:
            values = [arrays[f"arr_{i}"] for i in range(len(arrays.files))]
        weights[devices] = values[:len(values) // 2], values[len(values) // 2:]
    (start, after2), (start1, after1) = weights["two"], weights["one"]
    assert all(np.array_equal(x, y) for x, y in zip(start, start1))  # the same start
    update = max(float(np.abs(x - y).max()) for x, y in zip(start, after1))
    weight_diff = max(float(np.abs(x - y).max()) for x, y in zip(after1, after2))
    assert update > 1e-3  # the step changed the weights...
    assert weight_diff < 1e-5  # ...identically on one and on two devices


@pytest.mark.slow
def test_two_workers_on_localhost_complete_a_few_steps(tmp_path):
    corpus = tmp_path / "train.txt"
    corpus.write_text("the cat sat on the mat\na dog ran to the red house\nthe end\n" * 20)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("<S>\n</S>\n<UNK>\nthe\ncat\nsat\non\nmat\na\ndog\n")
    ports = [_free_port(), _free_port()]
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    processes = []
    for index in range(2):
        env = _env()
        env["TF_CONFIG"] = json.dumps({"cluster": cluster,
                                       "task": {"type": "worker", "index": index}})
        processes.append(subprocess.Popen(
            ["timeout", "-k", "10", "240", sys.executable, "-m", "keras_elmo.cli", "train",
             str(tmp_path / "model"), "--train", str(corpus), "--vocab", str(vocab),
             "--size", "tiny", "--epochs", "20", "--max-steps", "4", "--checkpoint-every", "2",
             "--log-every", "1"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outputs = [p.communicate() for p in processes]
    for process, (out, err) in zip(processes, outputs):
        assert process.returncode == 0, err[-3000:]
    chief_out = outputs[0][0]
    assert "2 replica(s)" in chief_out and "step 4 |" in chief_out
    assert "stopped (max_steps) at step 4" in chief_out
    assert "step 4 |" in outputs[1][0]
    model = tmp_path / "model"
    assert sorted(os.listdir(model / "checkpoints")) == [
        "checkpoint", "ckpt-2.data-00000-of-00001", "ckpt-2.index",
        "ckpt-4.data-00000-of-00001", "ckpt-4.index"]
    assert (model / "weights.hdf5").is_file() and not (model / ".workers").exists()


SPARSE_SCRIPT = r'''
import json, sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpu[0], [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
import numpy as np
from keras_elmo.text.characters import batch_to_ids
from keras_elmo.training import trainer as trainer_module
from keras_elmo.training.config import TrainingConfig
from keras_elmo.training.model_dir import ModelDir
from keras_elmo.training.vocabulary import Vocabulary
if sys.argv[2] == "dense":  # Keras' own Adagrad: the trainer then densifies every gradient
    trainer_module.make_optimizer = lambda c: keras.optimizers.Adagrad(
        learning_rate=c.learning_rate, initial_accumulator_value=c.initial_accumulator_value)
keras.utils.set_random_seed(0)
words = [f"w{i}" for i in range(1200)]
vocab = Vocabulary(["<S>", "</S>", "<UNK>"] + words)
config = TrainingConfig.preset("tiny").replace(n_tokens_vocab=len(vocab), dropout=0.0,
                                               optimizer="adagrad", learning_rate=0.2)
assert config.use_sampled_softmax
rng = np.random.default_rng(0)
def batch(n, length):
    sentences = [["<S>"] + [words[k] for k in rng.integers(0, 1200, length - 2)] + ["</S>"]
                 for _ in range(n)]
    return {"char_ids": batch_to_ids(sentences),
            "token_ids": np.array([vocab.encode(s) for s in sentences], np.int32)}
strategy = tf.distribute.MirroredStrategy()
trainer = trainer_module.Trainer(config, vocab, ModelDir(sys.argv[1]), strategy=strategy)
spec = {"char_ids": tf.TensorSpec((None, None, 50), tf.int32),
        "token_ids": tf.TensorSpec((None, None), tf.int32)}
per_replica = [batch(3, 6), batch(2, 7), batch(3, 5), batch(2, 6)]
dataset = strategy.distribute_datasets_from_function(
    lambda _: tf.data.Dataset.from_generator(lambda: iter(per_replica), output_signature=spec))
start = trainer.model.softmax.embeddings.numpy().copy()
for x in dataset:
    trainer.train_step(x, dataset.element_spec)
table = trainer.model.softmax.embeddings.numpy()
np.save(sys.argv[3], table)
print(json.dumps({"optimizer": type(trainer.optimizer).__name__,
                  "changed_rows": int((np.abs(table - start).max(axis=1) > 0).sum())}))
'''


def test_sparse_softmax_rows_update_like_dense_adagrad_on_two_replicas(tmp_path):
    """Sampled softmax on two logical CPUs: the IndexedSlices rows are all-reduced, clipped
    and applied by SparseAdagrad; the table equals the one Keras' dense Adagrad gives."""
    script = tmp_path / "sparse.py"
    script.write_text(SPARSE_SCRIPT)
    results = _run_at_once({mode: [str(script), str(tmp_path / mode), mode,
                                   str(tmp_path / f"{mode}.npy")]
                            for mode in ("sparse", "dense")}, tmp_path)
    assert results["sparse"]["optimizer"] == "SparseAdagrad"
    assert results["dense"]["optimizer"] == "Adagrad"
    assert 0 < results["sparse"]["changed_rows"] < 1203  # only sampled and target rows
    assert results["sparse"]["changed_rows"] == results["dense"]["changed_rows"]
    np.testing.assert_allclose(np.load(tmp_path / "sparse.npy"), np.load(tmp_path / "dense.npy"),
                               rtol=0, atol=1e-6)
