"""Issue 43, several workers: a worker killed with `kill -9` stops the others with one line
naming it and the last complete checkpoint (exit 75); starting every worker again resumes
there, losing at most the steps after it. Each worker runs in its own process under
`timeout -k` (a hung collective never outlives the test)."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import types

import pytest
import tensorflow as tf

from keras_elmo.training import worker_loss
from keras_elmo.training.worker_loss import WorkerLostError, worker_lost

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLUSTER = {"worker": ["127.0.0.1:2222", "127.0.0.1:2223"]}
KEPT = "the last complete checkpoint is ckpt-200 (step 200)"


def _strategy(task_id):
    """What `worker_lost` reads of a strategy: the cluster and this task."""
    spec = tf.train.ClusterSpec(CLUSTER)
    return types.SimpleNamespace(cluster_resolver=types.SimpleNamespace(
        task_type="worker", task_id=task_id, cluster_spec=lambda: spec))


@pytest.fixture
def multi_worker(monkeypatch):
    monkeypatch.setattr(worker_loss.distribute, "is_multi_worker", lambda strategy: True)


@pytest.mark.parametrize("task_id, error, expected", [
    (0, tf.errors.UnavailableError(
        None, None, "{{function_node __wrapped__CollectiveReduceV2_device_/job:worker/replica:0/"
        "task:0/device:CPU:0}} Collective ops is aborted by: Error reported from /job:worker/"
        "task:1: The following tasks are unhealthy (stopped sending heartbeats):\n/job:worker/"
        "replica:0/task:1\nThe tasks have crashed. [Op:CollectiveReduceV2]"),
     "worker 1 (127.0.0.1:2223) stopped answering (it stopped sending heartbeats)"),
    (0, tf.errors.UnavailableError(
        None, None, "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:2223:"
        " Failed to connect to remote host: Connection refused"),
     "worker 1 (127.0.0.1:2223) stopped answering (connection refused)"),
    (1, tf.errors.CancelledError(None, None, "/job:worker/replica:0/task:0: Socket closed"),
     "worker 0 (127.0.0.1:2222) stopped answering (its connection closed)"),
    (1, tf.errors.InternalError(None, None, "Connection reset by peer"),
     "another task of the run stopped answering (its connection was reset)"),
])
def test_the_lost_task_is_read_from_tensorflow_s_error(multi_worker, task_id, error, expected):
    lost = worker_lost(_strategy(task_id), error, KEPT)
    assert isinstance(lost, WorkerLostError) and lost.exit_code == 75
    line = str(lost)
    assert line.startswith(expected + ", so this task stopped too; " + KEPT + "; start every "
                           "worker again with the same command")
    assert "\n" not in line


def test_other_errors_are_not_a_lost_worker(multi_worker, monkeypatch):
    assert worker_lost(_strategy(0), tf.errors.InvalidArgumentError(
        None, None, "/job:worker/task:1: shape mismatch"), KEPT) is None
    assert worker_lost(_strategy(0), tf.errors.InternalError(None, None, "a kernel failed"),
                       KEPT) is None
    monkeypatch.setattr(worker_loss.distribute, "is_multi_worker", lambda strategy: False)
    assert worker_lost(_strategy(0), tf.errors.UnavailableError(
        None, None, "Connection refused"), KEPT) is None


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_workers(tmp_path, model, extra):
    ports = [_free_port(), _free_port()]
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    processes = []
    for index in range(2):
        env = dict(os.environ, PYTHONPATH=ROOT, TF_CONFIG=json.dumps(
            {"cluster": cluster, "task": {"type": "worker", "index": index}}))
        env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # the command's own default: what a user sees
        processes.append(subprocess.Popen(
            ["timeout", "-k", "10", "240", sys.executable, "-m", "keras_elmo.cli", "train",
             str(model), "--train", str(tmp_path / "train.txt"), "--vocab",
             str(tmp_path / "vocab.txt"), "--size", "tiny", "--epochs", "1000",
             "--checkpoint-every", "2", "--log-every", "1", *extra],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True))
    return processes, cluster


def _latest(model):
    state = tf.train.get_checkpoint_state(str(model / "checkpoints"))
    return int(state.model_checkpoint_path.rsplit("-", 1)[1]) if state else None


@pytest.mark.slow
def test_a_killed_worker_stops_the_run_in_one_line_and_every_worker_resumes(tmp_path):
    (tmp_path / "train.txt").write_text("the cat sat on the mat\na dog ran to the red house\n"
                                        "the end\n" * 20)
    (tmp_path / "vocab.txt").write_text("<S>\n</S>\n<UNK>\nthe\ncat\nsat\non\nmat\na\ndog\n")
    model = tmp_path / "model"
    processes, cluster = _start_workers(tmp_path, model, ["--max-steps", "100000"])
    try:
        deadline = time.monotonic() + 200
        while (_latest(model) or 0) < 4 and time.monotonic() < deadline \
                and all(p.poll() is None for p in processes):
            time.sleep(0.1)
        assert (_latest(model) or 0) >= 4, processes[0].communicate()[1][-3000:]
        os.killpg(processes[1].pid, signal.SIGKILL)  # worker 1 and its `timeout`
        killed_at = time.monotonic()
        _, err = processes[0].communicate()
        waited = time.monotonic() - killed_at
    finally:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
    saved = _latest(model)
    assert processes[0].returncode == 75, err[-3000:]
    lines = err.strip().splitlines()
    assert lines == [
        f"keras-elmo train: error: worker 1 ({cluster['worker'][1]}) stopped answering "
        f"({lines[0].split('stopped answering (')[1].split(')')[0]}), so this task stopped "
        f"too; the last complete checkpoint is ckpt-{saved} (step {saved}); start every worker "
        "again with the same command (the same TF_CONFIG) to resume there: the steps after it "
        "are lost."], err[-3000:]
    assert waited < 60
    assert not [name for name in os.listdir(model / "checkpoints") if "_temp" in name]
    # Every worker started again: the run resumes from that checkpoint and finishes.
    target = saved + 4
    processes, _ = _start_workers(tmp_path, model, ["--max-steps", str(target)])
    outputs = [process.communicate() for process in processes]
    for process, (out, err) in zip(processes, outputs):
        assert process.returncode == 0, err[-3000:]
    chief_out = outputs[0][0]
    assert f"stopped (max_steps) at step {target}" in chief_out
    assert f"resumed from ckpt-{saved}" in chief_out
    assert (model / "weights.hdf5").is_file() and not (model / ".workers").exists()
