"""Saving a training checkpoint so that a storage fault costs the new checkpoint only.

TensorFlow writes checkpoint N as the shards of `ckpt-N_temp/`, merges them into
`ckpt-N.index` and `ckpt-N.data-*`, then rewrites the `checkpoint` state file through
`checkpoint.tmp<hex>`. A full disk, a quota or a read-only filesystem can stop it at any of
these, and so can `kill -9`. None of what it leaves is named by the state file, whose newest
entry stays the last complete checkpoint, the one a rerun resumes from; `remove_incomplete`
removes those leftovers (after a failed save, and when a run starts, under its lock) so they
hold no space.

Before a save the free space is checked against the checkpoint's size (the bytes of its
variables, or of the newest checkpoint's files when that is more), so that a full disk is
one line before the write, not a failure inside it (`check_space`). Under several workers
every task checks its own directory and all stop together (`distribute.all_agree`): a task
that stopped alone would leave the others waiting in their next collective.

Example:
>>> save_checkpoint(manager, 20, variables, strategy)  # doctest: +SKIP
'runs/tiny/checkpoints/ckpt-20'
>>> kept_checkpoint("runs/tiny/checkpoints")  # doctest: +SKIP
'the last complete checkpoint is ckpt-20 (step 20)'
"""

import errno
import glob
import os
import re

import tensorflow as tf

from keras_elmo.process.atomic_file import remove_quietly
from keras_elmo.process.storage_errors import StorageError, free_bytes, storage_guard
from keras_elmo.training import distribute

#: The prefix of the checkpoints' names (`ckpt-20.index`).
CHECKPOINT_NAME = "ckpt"
_NUMBERED = re.compile(rf"^{CHECKPOINT_NAME}-(\d+)(?:\.index|\.data-\d+-of-\d+|_temp.*)$")
#: TensorFlow's temporary of the state file (`checkpoint.tmp` + a uuid4 hex).
_STATE_TEMPORARY = re.compile(r"^checkpoint\.tmp[0-9a-f]{32}$")


def latest_step(directory):
    """`(path, step)` of the newest checkpoint the state file of `directory` names, or
    `(None, None)` (also when the state file cannot be read)."""
    try:
        state = tf.train.get_checkpoint_state(directory)
    except Exception:  # noqa: BLE001 - a damaged state file: `ModelDir` reports it
        return None, None
    if state is None or not state.model_checkpoint_path:
        return None, None
    path = state.model_checkpoint_path
    step = path.rsplit("-", 1)[-1]
    return path, int(step) if step.isdigit() else None


def kept_checkpoint(directory):
    """What a failed save or write left for a rerun, in words.

    Example:
    >>> kept_checkpoint("runs/tiny/checkpoints")  # doctest: +SKIP
    'the last complete checkpoint is ckpt-20 (step 20)'
    """
    path, step = latest_step(directory)
    if path is None:
        return "no checkpoint of this run is complete yet"
    return f"the last complete checkpoint is {os.path.basename(path)}" + (
        f" (step {step})" if step is not None else "")


def remove_incomplete(directory, failed=None):
    """Removes what unfinished saves left in `directory`: `ckpt-N_temp` folders, state
    file temporaries, and the files of checkpoints newer than the newest the state file
    names (a save stopped between its merge and the state file); when it names none, those
    of checkpoint `failed` only (the save that just failed). Never a checkpoint the state
    file names, nor an older one.

    Returns:
        list of the removed paths.
    """
    if not os.path.isdir(directory):
        return []
    _, newest = latest_step(directory)
    removed = []
    for name in sorted(os.listdir(directory)):
        numbered = _NUMBERED.match(name)
        if numbered and "_temp" not in name:
            number = int(numbered.group(1))
            stale = number > newest if newest is not None else number == failed
        else:
            stale = bool(numbered or _STATE_TEMPORARY.match(name))
        if not stale:
            continue
        path = os.path.join(directory, name)
        remove_quietly(path)
        removed.append(path)
    return removed


def checkpoint_bytes(variables, directory=None):
    """Bytes a checkpoint of `variables` takes, at least: their values, or the newest
    checkpoint's files in `directory` when those are larger."""
    values = sum(tf.TensorShape(v.shape).num_elements() * tf.as_dtype(v.dtype).size
                 for v in variables)
    path, _ = latest_step(directory) if directory else (None, None)
    files = sum(os.path.getsize(name) for name in glob.glob(glob.escape(path) + ".*")) \
        if path else 0
    return max(values, files)


def check_space(directory, variables, strategy, what="the next checkpoint"):
    """Refuses to go on when `directory` has less free than a checkpoint takes, on every
    task at once (a collective under several workers: call it on every task).

    Raises:
        StorageError: `ENOSPC`, naming how much is needed and how much is free (on the task
            whose disk is full; the others name it as another task's).
    """
    needed = checkpoint_bytes(variables, directory)
    free = free_bytes(directory)
    short = needed > free
    if not distribute.all_agree(strategy, short):
        return
    if short:
        raise StorageError(errno.ENOSPC, directory, what, intact=kept_checkpoint(directory),
                           needed=needed, free=free)
    raise StorageError(errno.ENOSPC, directory, f"{what} (another worker has no space for "
                       "its copy)", intact=kept_checkpoint(directory))


def save_checkpoint(manager, number, variables, strategy):
    """`manager.save(checkpoint_number=number)` after the free space was checked; a storage
    fault removes what the save left and is one `StorageError` line naming the last complete
    checkpoint.

    Args:
        manager: the run's `tf.train.CheckpointManager`.
        number: int, the checkpoint's number (the step).
        variables: the checkpoint's variables (their bytes are its size, at least).
        strategy: the run's `tf.distribute.Strategy`.

    Returns:
        the checkpoint's path prefix.
    """
    directory = manager.directory
    what = f"checkpoint {CHECKPOINT_NAME}-{number}"
    check_space(directory, variables, strategy, what)
    with storage_guard(directory, what, intact=lambda: kept_checkpoint(directory)):
        try:
            return manager.save(checkpoint_number=number)
        except BaseException:
            remove_incomplete(directory, failed=number)
            raise
