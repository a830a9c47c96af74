"""`Trainer`: the distributed, resumable training loop of a biLM.

A custom loop (`strategy.run` inside a `tf.function`), so the same code runs on one device,
under `MirroredStrategy` (all local devices) and under `MultiWorkerMirroredStrategy`.
One step, per replica:

    sums = model.nll_sums(batch)                     # summed forward/backward NLL, targets
    loss = 0.5 * (forward + backward) / all_reduce(targets)
    grads = all_reduce(d loss / d weights)           # the global batch's gradient
    grads = clip_by_global_norm(grads, all_clip_norm_val)
    Adagrad(grads)                                   # sparse rows of the softmax table

The forward and backward pass (`_loss_gradients`) is the device's work: compiled with XLA
when `config.jit_compile` (the sampled-softmax negatives drawn before it: the sampler has
no XLA kernel). Under `precision="mixed_float16"` the loss is scaled before the gradient
(`LossScaleOptimizer.scale_loss`), the scaled gradients are clipped at `scale * clip` (the
same as clipping the true ones at `clip`), and `apply` unscales them and skips a step
whose gradients overflowed. With `config.steps_per_execution > 1` several steps run in one
call of a traced loop and their values are read back once per call; calls end on the log,
checkpoint and evaluation steps, so those happen exactly as with one step per call (the
learning rate is set once per call).

Before each step the learning rate follows `config.learning_rate_schedule` (constant, or a
linear decay to 0 over the run's share done, `RunPlan.fraction_done`).

Each replica reads its own batch (a token budget of `batch_tokens`), so the global batch
is `num_replicas` batches. The loss is normalised by the global target count, which makes
the update independent of how the global batch is split across devices. Clipping needs
the summed gradient, so it is all-reduced before clipping; the Keras optimizer then sums
the (identical) per-replica copies again, hence the `1 / num_replicas` scale.

Warm start: a new run with `config.init_from` first copies that model's weights in
(`keras_elmo.training.warm_start`); a resumed run takes them from its checkpoint instead.

Divergence: a non-finite loss or gradient norm stops the run at once, and so does a
non-finite weight before a checkpoint (`keras_elmo.training.divergence`); nothing of the
diverged step is saved, weights.hdf5 is not written, the newest checkpoint stays the last
finite one. Signals: the first SIGINT/SIGTERM stops after the current step with a
checkpoint and weights.hdf5 (`stopped == "SIGTERM"`, `keras_elmo.training.stop_signals`).

Resume: the checkpoint holds the model, the optimizer, `step`, `epoch` and
`batches_in_epoch` (global batches of the current epoch already consumed); a resumed run
rebuilds that epoch's deterministic input order and skips those batches
(`keras_elmo.training.run_state`).

Faults: a run without room for its next checkpoint is refused before its first step, and a
storage fault of a checkpoint, the logs or weights.hdf5 stops it with one `StorageError`
line (`keras_elmo.training.checkpoint_saving`); under several workers, a task that stops
answering stops the others with one `WorkerLostError` line naming it and the last complete
checkpoint (`keras_elmo.training.worker_loss`). Either way the newest checkpoint is whole and
the same command resumes from it.

Example:
>>> trainer = Trainer(config, vocab, ModelDir("runs/tiny"))
>>> result = trainer.fit(files, max_steps=100)
>>> result["step"]
100
"""

import contextlib
import math
import sys
import time

import tensorflow as tf

from keras_elmo.process.cpu_setup import warn_if_bfloat16_is_emulated
from keras_elmo.process.storage_errors import StorageError
from keras_elmo.training import distribute
from keras_elmo.training.checkpoint_saving import kept_checkpoint
from keras_elmo.training.dataset import make_dataset
from keras_elmo.training.divergence import TrainingDivergedError, check_step
from keras_elmo.training.language_model import LanguageModel, model_inputs
from keras_elmo.training.optimizers import (SparseAdagrad, inner_optimizer, make_optimizer,
                                            scale_gradient, scheduled_learning_rate)
from keras_elmo.training.progress_log import ProgressLog
from keras_elmo.training.run_plan import RunPlan
from keras_elmo.training.run_state import RunState
from keras_elmo.training.stop_signals import StopSignals
from keras_elmo.training.worker_loss import worker_lost

_SUM = tf.distribute.ReduceOp.SUM


class Trainer:
    """Trains a `LanguageModel` on a corpus into a `ModelDir`.

    Args:
        config: `TrainingConfig` with `n_tokens_vocab` set.
        vocab: `keras_elmo.training.vocabulary.Vocabulary` of that size.
        model_dir: `keras_elmo.training.model_dir.ModelDir` (already `prepare`d by the chief).
        strategy: a `tf.distribute.Strategy` (default: `distribute.make_strategy()`).
        log_every: int, steps between progress lines / TensorBoard points.
        stream: text stream of the progress line.
    """

    def __init__(self, config, vocab, model_dir, strategy=None, log_every=50, stream=None):
        if config.n_tokens_vocab != len(vocab):
            raise ValueError(f"The config's n_tokens_vocab ({config.n_tokens_vocab}) differs "
                             f"from the vocabulary size ({len(vocab)}).")
        self.config, self.vocab, self.model_dir = config, vocab, model_dir
        self.strategy = strategy or distribute.make_strategy()
        self.chief = distribute.is_chief(self.strategy)
        if config.precision == "mixed_bfloat16" and not any(
                "GPU" in device for device in self.strategy.extended.worker_devices):
            warn_if_bfloat16_is_emulated(training=True)  # one line where the CPU emulates it
        with self.strategy.scope():
            self.model = LanguageModel.from_training_config(
                config, vocabulary=model_dir.token_vocabulary(config.options))
            self.optimizer = make_optimizer(config)
            self.optimizer.build(self.model.trainable_variables)
        self.state = RunState(self.model, self.optimizer, model_dir, self.strategy,
                              keep=config.keep_checkpoints)
        self.step, self.epoch = self.state.step, self.state.epoch
        self.batches_in_epoch, self.manager = self.state.batches_in_epoch, self.state.manager
        self.log_every = log_every
        self.stream = stream
        self._step_fn = self._steps_fn = None
        self._loss_scaling = config.precision == "mixed_float16"
        self._gradients = (tf.function(self._loss_gradients, jit_compile=True, autograph=False)
                           if config.jit_compile else self._loss_gradients)

    # --- state (`RunState`) ----------------------------------------------------------------
    def restore_latest(self):
        """Restores the newest checkpoint of the model directory; returns its path or None."""
        return self.state.restore_latest()

    def save(self):
        """Saves a checkpoint numbered by the step (every task must call it)."""
        return self.state.save()

    # --- one step ------------------------------------------------------------------------
    def _replica_step(self, batch):
        context = tf.distribute.get_replica_context()
        variables = self.model.trainable_variables
        inputs, token_ids = model_inputs(batch), batch["token_ids"]
        global_count = context.all_reduce(_SUM, self.model.target_count(inputs))
        negatives = None
        if self.config.jit_compile and self.model.use_sampled_softmax:
            # The sampler has no XLA kernel: drawn here, before the compiled function.
            negatives = self.model.sample_negatives(inputs, token_ids)
        sums, grads = self._gradients(inputs, token_ids, global_count, negatives)
        if not isinstance(inner_optimizer(self.optimizer), SparseAdagrad):
            grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
                     for g in grads]  # Adam updates whole tables
        grads = context.all_reduce(_SUM, grads)  # the softmax rows stay IndexedSlices
        # Under loss scaling the gradients are `scale` times the true ones (scale a power
        # of 2): clipping them at `scale * clip` is clipping the true ones at `clip`, and
        # the optimizer divides by `scale` in `apply`.
        scale = self._loss_scale()
        grads, norm = tf.clip_by_global_norm(grads, self.config.all_clip_norm_val * scale)
        replicas = 1.0 / context.num_replicas_in_sync  # the optimizer sums the replicas again
        self.optimizer.apply([scale_gradient(g, replicas) for g in grads], variables)
        tokens = tf.math.count_nonzero(batch["char_ids"][..., 0], dtype=tf.int64)
        return sums["forward"], sums["backward"], sums["count"], tokens, norm / scale

    def _loss_gradients(self, inputs, token_ids, global_count, negatives):
        """`(sums, gradients)` of one replica's batch: the work of the device, compiled
        with XLA when `config.jit_compile` (every shape then follows from the batch's)."""
        with tf.GradientTape() as tape:
            sums = self.model.nll_sums(inputs, token_ids, training=True,
                                       negatives=negatives)
            loss = 0.5 * (sums["forward"] + sums["backward"]) / tf.maximum(global_count, 1.0)
            if self._loss_scaling:
                loss = self.optimizer.scale_loss(loss)
        return sums, tape.gradient(loss, self.model.trainable_variables)

    def _loss_scale(self):
        """The dynamic loss scale (1.0 without loss scaling), float32 scalar."""
        if not self._loss_scaling:
            return tf.constant(1.0)
        return tf.cast(tf.convert_to_tensor(self.optimizer.dynamic_scale), tf.float32)

    def _build_step(self, element_spec):
        # No autograph: the step's branches are on Python values, and converting the model's
        # code adds to every trace at each run's start (docs/performance.md).
        @tf.function(input_signature=[element_spec], autograph=False)
        def step_fn(batch):
            return self._step_values(batch)
        return step_fn

    # `steps_fn`'s loop needs autograph; this keeps it from converting the model's code (its
    # branches are on Python values), as `step_fn`, traced without autograph, does not.
    @tf.autograph.experimental.do_not_convert
    def _step_values(self, batch):
        """One step on a distributed batch: `(sums, tokens, grad norm)` over all replicas."""
        forward, backward, count, tokens, norm = self.strategy.run(
            self._replica_step, args=(batch,))
        reduce = lambda value: self.strategy.reduce(_SUM, value, axis=None)  # noqa: E731
        return ({"forward": reduce(forward), "backward": reduce(backward),
                 "count": reduce(count)}, reduce(tokens),
                self.strategy.reduce(tf.distribute.ReduceOp.MEAN, norm, axis=None))

    def train_step(self, distributed_batch, element_spec):
        """One optimisation step on a distributed batch; returns (sums, tokens, grad norm).

        `element_spec` (the distributed dataset's) fixes the one trace every step reuses:
        tasks of a multi-worker job must never retrace at different times.
        """
        if self._step_fn is None:
            self._step_fn = self._build_step(element_spec)
        return self._step_fn(distributed_batch)

    def _runner(self, dataset):
        """`run(n)`: the next `n` training steps of `dataset` (fewer when it ends), as a
        list of per-step `(sums, tokens, grad norm)` numpy values. Under
        `steps_per_execution > 1` the steps run in one call of a traced loop and are read
        back once; the loop stops after a step whose loss (or, without loss scaling,
        gradient norm) is not finite, so nothing runs after a diverged step."""
        iterator = iter(dataset)
        if self.config.steps_per_execution == 1:
            def run_one(_):
                batch = next(iterator, None)
                if batch is None:
                    return []
                sums, tokens, norm = self.train_step(batch, dataset.element_spec)
                return [({k: v.numpy() for k, v in sums.items()}, tokens.numpy(),
                         norm.numpy())]
            return run_one
        if self._steps_fn is None:
            self._steps_fn = self._build_steps()

        def run(count):
            done, values = self._steps_fn(iterator, tf.constant(count, tf.int32))
            values = [v.numpy() for v in values]  # the one read-back of the call
            return [({"forward": values[0][i], "backward": values[1][i],
                      "count": values[2][i]}, values[3][i], values[4][i])
                    for i in range(int(done))]
        return run

    def _build_steps(self):
        """The traced loop of up to `count` steps over a distributed iterator."""
        loss_scaling = self._loss_scaling

        @tf.function
        def steps_fn(iterator, count):
            arrays = [tf.TensorArray(dtype, size=0, dynamic_size=True)
                      for dtype in (tf.float32, tf.float32, tf.float32, tf.int64, tf.float32)]
            done = tf.constant(0)
            for _ in tf.range(count):
                optional = iterator.get_next_as_optional()
                if not optional.has_value():
                    break
                sums, tokens, norm = self._step_values(optional.get_value())
                values = (sums["forward"], sums["backward"], sums["count"], tokens, norm)
                arrays = [a.write(done, v) for a, v in zip(arrays, values)]
                done += 1
                finite = tf.math.is_finite(sums["forward"] + sums["backward"])
                if not loss_scaling:
                    finite = tf.logical_and(finite, tf.math.is_finite(norm))
                if not finite:
                    break
            return done, [a.stack() for a in arrays]
        return steps_fn

    def _steps_to_run(self, max_steps, eval_every):
        """Steps of the next call: at most `steps_per_execution`, ending on the next log,
        checkpoint or evaluation step and never past `max_steps`."""
        step = int(self.step.numpy())
        count = self.config.steps_per_execution
        for every in (self.log_every, self.config.checkpoint_every_steps, eval_every):
            if every:
                count = min(count, every - step % every)
        if max_steps is not None:
            count = min(count, max(max_steps - step, 1))
        return count

    def distributed_dataset(self, files, epoch, skip_batches=0):
        """The distributed dataset of one epoch, skipping already-consumed global batches."""
        def dataset_fn(input_context):
            return make_dataset(files, self.vocab, self.config, epoch=epoch,
                                token_vocabulary=self.model.backbone.vocabulary,
                                skip_batches=skip_batches, input_context=input_context)
        return self.strategy.distribute_datasets_from_function(dataset_fn)

    # --- the loop ------------------------------------------------------------------------
    def fit(self, files, max_steps=None, max_minutes=None, evaluate=None, eval_every=None):
        """Trains until `n_epochs` are done, `step == max_steps` or `max_minutes` passed.

        Resumes from the newest checkpoint of the model directory if there is one. Saves a
        checkpoint every `checkpoint_every_steps` steps and at the end (a SIGINT/SIGTERM
        ends the run early, after its current step, the same way).

        Args:
            files: list of str, the training corpus files.
            max_steps: int or None, the global step to stop at.
            max_minutes: float or None, minutes of this run (evaluations included).
            evaluate: optional callable -> dict (`evaluation.perplexity.evaluate`'s), run
                every `eval_every` steps and logged (line and TensorBoard scalars).
            eval_every: int or None, steps between evaluations.

        Raises:
            TrainingDivergedError: a non-finite loss, gradient norm or weight (naming the
                step and the newest, finite, checkpoint); nothing of it is saved.
            StorageError: no room for a checkpoint, or a storage fault of a write.
            WorkerLostError: another task of a multi-worker run stopped answering.

        Returns:
            dict: `step`, `epoch`, `resumed_from` (checkpoint path or None), `warm_started`
            (`keras_elmo.training.warm_start.warm_start`'s report, or None), `stopped`
            (`"epochs"`, `"max_steps"`, `"max_minutes"`, or `"SIGINT"` / `"SIGTERM"`
            when a signal asked for a stop), `seconds`, `last` (the last
            progress figures: loss, perplexity, tokens_per_second, ...), `history` (every
            progress report of this run).
        """
        try:
            return self._fit(files, max_steps, max_minutes, evaluate, eval_every)
        except tf.errors.OpError as error:
            lost = worker_lost(self.strategy, error, kept_checkpoint(self.state.save_dir))
            if lost is None:
                raise
            raise lost from None

    def _fit(self, files, max_steps, max_minutes, evaluate, eval_every):
        resumed_from = self.restore_latest()
        self.state.check_space()  # no room for a checkpoint: refused before any step
        warm_started = None
        if resumed_from is None and self.config.init_from is not None:
            from keras_elmo.training.warm_start import warm_start

            warm_started = warm_start(self.model, self.config.init_from, self.vocab)
        plan = RunPlan(int(self.step.numpy()), max_steps, max_minutes, self.config.n_epochs,
                       self.config.n_train_tokens)
        log = ProgressLog(self.log_every, self.model_dir.logs_dir if self.chief else None,
                          self.stream, plan=plan)
        if self.chief:
            print(f"tracing the training step at step {int(self.step.numpy())} (the first step "
                  "takes longer)", file=self.stream, flush=True)
        start = time.monotonic()
        replicas = self.strategy.num_replicas_in_sync
        every = self.config.checkpoint_every_steps
        stopped = "epochs"
        signals = StopSignals().__enter__()
        try:
            while int(self.epoch.numpy()) < self.config.n_epochs and stopped == "epochs":
                epoch = int(self.epoch.numpy())
                dataset = self.distributed_dataset(files, epoch, int(self.batches_in_epoch.numpy()))
                run = self._runner(dataset)
                while True:
                    if self._should_stop(max_steps, max_minutes, start):
                        stopped = "max_steps" if _reached(self.step, max_steps) else "max_minutes"
                        break
                    self._schedule_learning_rate(plan, log, epoch, start)
                    wanted = self._steps_to_run(max_steps, eval_every if evaluate else None)
                    results = run(wanted)  # fewer at the end of the epoch
                    for sums, tokens, norm in results:
                        step = int(self.step.numpy()) + 1
                        norm = self._check_step(step, sums, norm)
                        self.step.assign_add(1)
                        self.batches_in_epoch.assign_add(replicas)
                        log.update(step, epoch, sums, int(tokens), self._learning_rate(), norm)
                    step = int(self.step.numpy())
                    if results and step % every == 0:
                        self.save()
                    if results and evaluate is not None and eval_every and step % eval_every == 0:
                        began = time.monotonic()
                        result = evaluate()
                        log.heldout(step, result, seconds=time.monotonic() - began)
                    if results and distribute.all_agree(self.strategy, signals.signum is not None):
                        stopped = signals.name or "SIGTERM"  # another task got the signal
                        break
                    if len(results) < wanted:  # the epoch's data is done
                        self.epoch.assign_add(1)
                        self.batches_in_epoch.assign(0)
                        break
            last = log.report(int(self.step.numpy()), max(int(self.epoch.numpy()) - 1, 0)
                              if stopped == "epochs" else int(self.epoch.numpy()),
                              self._learning_rate(), final=True)
            self.state.save_unless_saved()
        finally:
            signals.__exit__(None, None, None)
            # A log that cannot be closed must not hide the error that stopped the run.
            with contextlib.suppress(StorageError) if sys.exc_info()[0] else \
                    contextlib.nullcontext():
                log.close()
            self.state.discard_worker_copy()
        if self.chief:
            self.model_dir.write_weights(self.model.backbone)  # the trained biLM itself
        return {"step": int(self.step.numpy()), "epoch": int(self.epoch.numpy()),
                "resumed_from": resumed_from, "warm_started": warm_started,
                "stopped": stopped,
                "seconds": time.monotonic() - start, "last": last or log.last,
                "history": log.history}

    def _schedule_learning_rate(self, plan, log, epoch, start):
        """Sets the optimizer's rate for the next step (`config.learning_rate_schedule`)."""
        if self.config.learning_rate_schedule == "constant":
            return
        done = plan.fraction_done(int(self.step.numpy()), epoch, log.epoch_tokens,
                                  time.monotonic() - start)
        done = distribute.chief_value(self.strategy, done)  # one rate on every task
        inner_optimizer(self.optimizer).learning_rate.assign(
            scheduled_learning_rate(self.config, done))

    def _learning_rate(self):
        return inner_optimizer(self.optimizer).learning_rate.numpy()

    def _check_step(self, step, sums, norm):
        """Stops at once on a non-finite loss or gradient norm (nothing of it is saved);
        returns the norm to log. Under loss scaling a non-finite gradient is a skipped
        step (the scale was too large; the optimizer halved it): logged as norm 0."""
        norm = float(norm)
        if self._loss_scaling and not math.isfinite(norm):
            norm = 0.0
        try:
            check_step(step, sums, norm)
            return norm
        except TrainingDivergedError as error:
            raise self.state.diverged(error) from None

    def _should_stop(self, max_steps, max_minutes, start):
        if _reached(self.step, max_steps):  # the same on every task
            return True
        if max_minutes is None:
            return False
        # Clocks differ between tasks: stop everywhere as soon as one task's time is up.
        return distribute.all_agree(self.strategy, time.monotonic() - start >= 60.0 * max_minutes)


def _reached(step, max_steps):
    return max_steps is not None and int(step.numpy()) >= max_steps
