"""A task of a multi-worker run that stopped answering, told in one line.

Under `MultiWorkerMirroredStrategy` every step is a collective of all tasks. When one dies
(`kill -9`, a machine lost) the next collective of the others fails, within TensorFlow's
heartbeat timeout, with an `UnavailableError` ("The following tasks are unhealthy (stopped
sending heartbeats): /job:worker/replica:0/task:1"), or with a gRPC "Connection refused" /
"Socket closed" naming the peer's `host:port`; `Aborted`, `Cancelled`, `DeadlineExceeded`
and `Internal` errors can carry the same. `worker_lost` reads which task it was (its
`/job:NAME/.../task:N`, or its address in the cluster spec) and returns a
`WorkerLostError` that says so, which checkpoint is the last complete one and how to go
on: start every worker again with the same command; the run resumes from that checkpoint,
losing the steps after it.

Example:
>>> try:  # doctest: +SKIP
...     trainer.fit(files)
... except tf.errors.OpError as error:
...     raise worker_lost(strategy, error, "the last complete checkpoint is ckpt-200") or error
"""

import os
import re

import tensorflow as tf

from keras_elmo.training import distribute

#: The TensorFlow errors a lost peer shows up as.
_PEER_ERRORS = (tf.errors.UnavailableError, tf.errors.AbortedError, tf.errors.CancelledError,
                tf.errors.DeadlineExceededError, tf.errors.InternalError)
#: `/job:worker/replica:0/task:1` or `/job:worker/task:1`.
_TASK = re.compile(r"/job:(\w+)(?:/replica:\d+)?/task:(\d+)")
#: Words of TensorFlow's and gRPC's messages about a peer that is gone, and what they mean.
_SYMPTOMS = (("stopped sending heartbeats", "it stopped sending heartbeats"),
             ("connection refused", "connection refused"),
             ("socket closed", "its connection closed"),
             ("failed to connect", "connection failed"),
             ("connection reset", "its connection was reset"),
             ("unhealthy", "it was reported unhealthy"))


class WorkerLostError(ConnectionError):
    """A task of the run stopped answering; `str()` is the one line the command prints.

    Example:
    >>> print(WorkerLostError("worker 1 (127.0.0.1:2222)", "connection refused",
    ...                       "the last complete checkpoint is ckpt-200 (step 200)"))
    worker 1 (127.0.0.1:2222) stopped answering (connection refused), so this task stopped too; the last complete checkpoint is ckpt-200 (step 200); start every worker again with the same command (the same TF_CONFIG) to resume there: the steps after it are lost.
    """

    #: Exit code (sysexits.h's EX_TEMPFAIL: run it again once the cause is fixed).
    exit_code = getattr(os, "EX_TEMPFAIL", 75)

    def __init__(self, task, symptom, kept):
        super().__init__(task, symptom, kept)
        self.task, self.symptom, self.kept = task, symptom, kept

    def __str__(self):
        return (f"{self.task} stopped answering ({self.symptom}), so this task stopped too; "
                f"{self.kept}; start every worker again with the same command (the same "
                "TF_CONFIG) to resume there: the steps after it are lost.")


def worker_lost(strategy, error, kept):
    """A `WorkerLostError` when `error` is a multi-worker collective's failure because
    another task is gone; None for any other error.

    Args:
        strategy: the run's `tf.distribute.Strategy`.
        error: the exception a step, a collective or a save raised.
        kept: the last complete checkpoint, in words.
    """
    if not (distribute.is_multi_worker(strategy) and isinstance(error, _PEER_ERRORS)):
        return None
    text = str(error)
    lowered = text.lower()
    symptom = next((said for words, said in _SYMPTOMS if words in lowered), None)
    task = _other_task(strategy, text)
    if symptom is None and task is None:
        return None
    return WorkerLostError(task or "another task of the run",
                           symptom or type(error).__name__, kept)


def _other_task(strategy, text):
    """`"worker 1 (host:port)"`: the first task other than this one that `text` names."""
    resolver = strategy.cluster_resolver
    me = (resolver.task_type, int(resolver.task_id))
    jobs = resolver.cluster_spec().as_dict()
    named = [(job, int(index)) for job, index in _TASK.findall(text)]
    named += [(job, index) for job, addresses in jobs.items()
              for index, address in enumerate(addresses) if address in text]
    for job, index in named:
        if (job, index) != me and index < len(jobs.get(job, [])):
            return f"{job} {index} ({jobs[job][index]})"
    return None
