"""`RunState`: what a training run saves and resumes from.

The model and optimizer variables and three counters: `step` (global steps taken), `epoch`
and `batches_in_epoch` (global batches of the current epoch already consumed, so that a
resumed run rebuilds that epoch's deterministic input order and skips them). The chief
writes numbered checkpoints into the model directory; every other task of a multi-worker
job must save too (the save is a collective) and writes into a scratch folder
(`MODEL_DIR/.workers/<task>`) that `discard_worker_copy` removes at the end.

No checkpoint is written from non-finite weights: `save` checks them first and raises
`TrainingDivergedError`, completed with which checkpoint is kept and what to do
(`diverged`), so the newest checkpoint is always the last finite one.

Storage: a save checks the free space first and a storage fault during it leaves no part
of the new checkpoint (`keras_elmo.training.checkpoint_saving`); what a killed save left is
removed when the next run starts. `check_space` refuses a run that has no room for its
next checkpoint before it trains a step.

Example:
>>> state = RunState(model, optimizer, model_dir, strategy, keep=3)
>>> state.restore_latest()      # None on a new run
>>> state.step.assign_add(1); state.save()
'runs/tiny/checkpoints/ckpt-1'
"""

import contextlib
import os
import shutil

import tensorflow as tf

from keras_elmo.training import distribute
from keras_elmo.training.checkpoint_saving import (CHECKPOINT_NAME, check_space,
                                                   remove_incomplete, save_checkpoint)
from keras_elmo.training.divergence import TrainingDivergedError, check_weights
from keras_elmo.training.model_dir import make_checkpoint, restore


class RunState:
    """The counters, checkpoint and checkpoint manager of one task of a training run.

    Args:
        model: the `LanguageModel` (built).
        optimizer: its built Keras optimizer.
        model_dir: `keras_elmo.training.model_dir.ModelDir`.
        strategy: the run's `tf.distribute.Strategy` (the counters are created in its scope).
        keep: int, checkpoints to keep.
    """

    def __init__(self, model, optimizer, model_dir, strategy, keep):
        self.model, self.model_dir = model, model_dir
        with strategy.scope():
            self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
            self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False, name="epoch")
            self.batches_in_epoch = tf.Variable(0, dtype=tf.int64, trainable=False,
                                                name="batches_in_epoch")
        self.checkpoint = make_checkpoint(model, optimizer, step=self.step, epoch=self.epoch,
                                          batches_in_epoch=self.batches_in_epoch)
        self.chief = distribute.is_chief(strategy)
        self.save_dir = distribute.worker_checkpoint_dir(model_dir.checkpoint_dir, strategy)
        remove_incomplete(self.save_dir)  # a killed run's partial save (under the run lock)
        self.manager = tf.train.CheckpointManager(self.checkpoint, self.save_dir,
                                                  max_to_keep=keep,
                                                  checkpoint_name=CHECKPOINT_NAME)
        self.strategy = strategy

    def restore_latest(self):
        """Restores the newest checkpoint of the model directory; returns its path or None."""
        path = self.model_dir.latest_checkpoint()
        if path is not None:
            restore(self.checkpoint, path, self.model)
        return path

    def save(self):
        """Saves a checkpoint numbered by the step (every task must call it); returns its path.

        Raises:
            TrainingDivergedError: a weight is not finite (nothing is saved).
        """
        try:
            check_weights(int(self.step.numpy()), self.model.variables)
        except TrainingDivergedError as error:
            raise self.diverged(error) from None
        return save_checkpoint(self.manager, int(self.step.numpy()), self._saved_variables(),
                               self.strategy)

    def check_space(self):
        """Refuses (`StorageError`) a run whose checkpoint directory has no room for its
        next checkpoint, before any step (every task must call it)."""
        check_space(self.save_dir, self._saved_variables(), self.strategy)

    def _saved_variables(self):
        """The variables a checkpoint holds (model, optimizer, counters)."""
        return [v for group in (self.checkpoint.model, self.checkpoint.optimizer)
                for v in group.values()] + [self.step, self.epoch, self.batches_in_epoch]

    def save_unless_saved(self):
        """Saves unless the newest checkpoint is of the current step already."""
        newest = self.manager.latest_checkpoint
        if newest is None or not newest.endswith(f"-{int(self.step.numpy())}"):
            self.save()

    def diverged(self, error):
        """`error` (a `TrainingDivergedError`) completed with what was kept and what to do."""
        newest = self.manager.latest_checkpoint
        kept = (f"the newest checkpoint, {os.path.basename(newest)}, is finite and is the one "
                "a rerun resumes from" if newest else "no checkpoint of this run was written")
        return TrainingDivergedError(f"{error} Stopped; {kept}; weights.hdf5 was not written. "
                                     "Lower --learning-rate or --clip-norm (in a new "
                                     "MODEL_DIR).")

    def discard_worker_copy(self):
        """A non-chief task's scratch checkpoints go (and `.workers/` once empty)."""
        if self.chief:
            return
        shutil.rmtree(self.save_dir, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.rmdir(os.path.dirname(self.save_dir))
