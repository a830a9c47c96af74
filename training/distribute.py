"""Choosing the `tf.distribute` strategy of a training run, and who writes files.

* `TF_CONFIG` naming several tasks (workers + chief) -> `MultiWorkerMirroredStrategy`;
* otherwise `MirroredStrategy` over every local device (CPU or GPUs); no device strings.

Under several workers only the chief writes the model directory (options.json, vocab,
logs, weights.hdf5); the other workers save their checkpoint copies to a scratch directory
(every worker must take part in a save) that is removed afterwards.

Example:
>>> strategy = make_strategy()
>>> strategy.num_replicas_in_sync >= 1
True
"""

import json
import os

import keras
import tensorflow as tf


def cluster_size(tf_config=None):
    """Number of tasks (chief + workers) named by `TF_CONFIG` (1 when unset).

    Raises:
        ValueError: for a `TF_CONFIG` that is not JSON with a `cluster` object.
    """
    raw = os.environ.get("TF_CONFIG", "") if tf_config is None else tf_config
    if not raw.strip():
        return 1
    try:
        data = json.loads(raw)
        cluster = data.get("cluster", {})
        if not isinstance(cluster, dict):
            raise TypeError
    except (json.JSONDecodeError, TypeError, AttributeError):
        raise ValueError('TF_CONFIG must be JSON like {"cluster": {"worker": ["host:port", ...]}, '
                         f'"task": {{"type": "worker", "index": 0}}}}; received {raw[:200]!r}.'
                         ) from None
    return sum(len(cluster.get(kind, [])) for kind in ("chief", "worker")) or 1


def make_strategy():
    """`MultiWorkerMirroredStrategy` when TF_CONFIG names several tasks, else `MirroredStrategy`."""
    if cluster_size() > 1:
        return tf.distribute.MultiWorkerMirroredStrategy()
    return tf.distribute.MirroredStrategy()


def gather_rows(variable, indices, like=None):
    """`variable[indices]` read row by row from this device's copy (`ResourceGather`).

    A table that an optimizer updates row by row (`scatter_*`, as `SparseAdagrad` does the
    softmax table) is put by TensorFlow in copy-on-read mode: from then on every whole read
    (`ReadVariableOp`, what `tf.gather` of a mirrored variable does) copies the whole
    table, 28 MB for the small model on People's Daily, 1.6 GB at the published vocabulary,
    several times a step. A row read of the replica's own `tf.Variable` copies only the
    rows; its gradient is `tf.IndexedSlices` of the (mirrored) variable as before.

    Args:
        variable: a Keras or `tf.Variable`, mirrored or not.
        indices: int tensor of rows.
        like: in an optimizer's `strategy.extended.update` call, the per-device variable
            it was handed: the table's copy on that device is read. None: the replica's own
            (inside `strategy.run`) or the one copy.

    Returns:
        `(len(indices), ...)` tensor.
    """
    copy = _device_copy(variable, like)
    if isinstance(copy, tf.distribute.DistributedValues):  # no per-device copy reachable
        return tf.gather(copy, indices)
    return copy.sparse_read(indices)


def _device_copy(variable, like=None):
    """The `tf.Variable` of `variable` on this replica's device (see `gather_rows`)."""
    variable = variable.value if isinstance(variable, keras.Variable) else variable
    copies = tf.distribute.get_strategy().experimental_local_results(variable)
    if len(copies) == 1:
        return copies[0]
    if like is not None:
        return next((c for c in copies if c.device == like.device), variable)
    context = tf.distribute.get_replica_context()
    replica = None if context is None else tf.get_static_value(context.replica_id_in_sync_group)
    # Replicas of this task hold its devices in order (a worker's global ids continue).
    return variable if replica is None else copies[int(replica) % len(copies)]


def is_multi_worker(strategy):
    """True under a `MultiWorkerMirroredStrategy` with more than one task."""
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return False
    jobs = strategy.cluster_resolver.cluster_spec().as_dict()
    return sum(len(jobs.get(kind, [])) for kind in ("chief", "worker")) > 1


def is_chief(strategy):
    """True for the task that writes the model directory (always True on one machine)."""
    if not is_multi_worker(strategy):
        return True
    resolver = strategy.cluster_resolver
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return task_type == "worker" and task_id == 0 and not has_chief


def worker_checkpoint_dir(checkpoint_dir, strategy):
    """Where this task saves checkpoints: the real dir for the chief, a scratch dir else."""
    if is_chief(strategy):
        return checkpoint_dir
    resolver = strategy.cluster_resolver
    return os.path.join(os.path.dirname(checkpoint_dir), ".workers",
                        f"{resolver.task_type}_{resolver.task_id}")


def chief_value(strategy, value):
    """The chief's float `value`, on every task (a collective: call it everywhere;
    single-worker strategies return `value` as it is). For figures every task must share
    although each computes its own, like the share of `--max-minutes` on its own clock."""
    if not is_multi_worker(strategy):
        return float(value)
    local_replicas = len(strategy.extended.worker_devices)
    mine = float(value) / local_replicas if is_chief(strategy) else 0.0
    per_replica = strategy.experimental_distribute_values_from_function(
        lambda _: tf.constant(mine))
    return float(strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None))


def all_agree(strategy, flag):
    """True on every task when `flag` is True on any task (a collective: call it everywhere)."""
    if not is_multi_worker(strategy):
        return bool(flag)
    value = strategy.experimental_distribute_values_from_function(
        lambda _: tf.constant(1.0 if flag else 0.0))
    return bool(strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None) > 0)
