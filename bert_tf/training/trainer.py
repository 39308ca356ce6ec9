"""A training loop around `strategy.run` that works on one CPU, many GPUs,
several workers (MultiWorkerMirroredStrategy, where Keras 3 `fit` fails:
keras#20585) and TPUs.

`steps_per_loop` steps run inside one `tf.function`; between loops the
trainer logs, evaluates, checkpoints and checks for SIGTERM. The
checkpoint holds the model, the optimizer, the global step, the dropout
seeds and (on one device) the input iterator; under multi-device
strategies a seeded input is fast-forwarded by the restored step instead.
Either way a restarted run continues exactly where the last checkpoint
left it: the same weights, the same next batch.
"""

import inspect
import math
import time

import keras
import tensorflow as tf

from bert_tf.config import TrainerConfig  # noqa: F401 (re-export)
from bert_tf.safe_io import check_writable
from bert_tf.storage import GPath
from bert_tf import keras_compat
from bert_tf.progress import progress_bar
from bert_tf.checkpoints.run_state import RunCheckpoints
from bert_tf.training import distribute, summaries
from bert_tf.training.stopping import (  # noqa: F401 (TrainingStopped: API)
    StopRequests, TrainingStopped)


def _to_next(step, every):
    """Steps from `step` to the next multiple of `every` (0: no limit)."""
    return (step // every + 1) * every - step if every else float("inf")


class NonFiniteLossError(RuntimeError):
    """The loss became NaN or Inf; the last good checkpoint is kept."""


class Trainer:
    """Trains a model with `encoder`, `checkpoint_heads()` and its loss
(`compute_loss`, own or compiled): a `BertPretrainer` or a task model.

    Args:
        strategy: a `tf.distribute.Strategy`.
        model_fn: builds the model (called under the strategy scope).
        optimizer_fn: builds the Keras optimizer (under the scope).
        train_dataset_fn: `InputContext -> tf.data.Dataset` of global-batch
            feature dicts (see `pretraining_dataset`).
        config: a `TrainerConfig`.
        eval_dataset_fn: like `train_dataset_fn`, for evaluation.
        global_batch_size: for the examples/s figure.
        evaluate_fn: `model -> {metric: value}`, replacing the batch-wise
            evaluation over `eval_dataset_fn` (e.g. GLUE metrics over a
            whole dev set).
        best_metric: after each evaluation, keep the model with the highest
            value of this metric in `model_dir/best/` (model.ckpt.* and
            best.json); resumed runs remember the best so far.
        clipnorm: clip the global gradient norm here (after summing over
            replicas; Keras's `global_clipnorm` clips each replica's partial
            gradient). Create the optimizer without clipping then.
        log: where text lines go.
        checkpoint_input: keep the input iterator's position in the
            checkpoints (False for input that cannot be saved, such as
            the tf.data service's).

    Examples:
        >>> from bert_tf.models.encoder import BertEncoder
        >>> from bert_tf.tasks.classification.model import BertClassifier
        >>> def model_fn():
        ...     model = BertClassifier(BertEncoder(vocab_size=20, hidden_size=8,
        ...         num_layers=1, num_heads=2, intermediate_size=16), 2)
        ...     model.compile(loss=keras.losses.SparseCategoricalCrossentropy(
        ...         from_logits=True))
        ...     return model
        >>> def dataset_fn(context):
        ...     x = {"input_word_ids": tf.ones([4, 6], tf.int32),
        ...          "input_mask": tf.ones([4, 6], tf.int32),
        ...          "input_type_ids": tf.zeros([4, 6], tf.int32)}
        ...     return tf.data.Dataset.from_tensors((x, tf.ones([4]))).repeat()
        >>> trainer = Trainer(
        ...     tf.distribute.get_strategy(), model_fn,
        ...     lambda: keras.optimizers.AdamW(0.01), dataset_fn,
        ...     TrainerConfig(model_dir=str(example_files.tmp / "trainer"),
        ...                   train_steps=4, steps_per_loop=2), log=print)
        >>> import contextlib, io
        >>> with contextlib.redirect_stdout(io.StringIO()) as progress:
        ...     results = trainer.train()
        >>> results["loss"] < 0.69, progress.getvalue().splitlines()[-1]
        ... # doctest: +ELLIPSIS
        (True, 'wrote checkpoint ...trainer/checkpoints/ckpt-4')
    """

    def __init__(self, strategy, model_fn, optimizer_fn, train_dataset_fn,
                 config, eval_dataset_fn=None, global_batch_size=None,
                 clipnorm=None, log=print, evaluate_fn=None,
                 best_metric=None, checkpoint_input=True):
        self.strategy = strategy
        self.clipnorm = clipnorm
        self.global_batch_size = global_batch_size
        self.config = config.validate()
        self.log = log
        self.model_dir = GPath(config.model_dir)
        self.is_chief = distribute.is_chief(strategy)
        if self.is_chief:  # a bad location fails before any work
            check_writable(self.model_dir, "the run (trainer.model_dir)")
        with strategy.scope():
            self.model = model_fn()
            self.optimizer = optimizer_fn()
            self.optimizer.build(self.model.trainable_variables)
            first = None
            if getattr(self.model, "compiled", False):
                # Keras builds compiled losses and metrics lazily, which
                # inside `strategy.run` would create variables in a replica
                # context; build them here from the dataset's spec.
                self.model.optimizer = self.optimizer
                first = train_dataset_fn(tf.distribute.InputContext())
                keras_compat.build_compiled(self.model, first.element_spec)
            self.step = tf.Variable(
                0, dtype=tf.int64, trainable=False, name="global_step",
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        self.iterator = iter(strategy.distribute_datasets_from_function(
            _reusing(first, train_dataset_fn)))
        self.eval_dataset_fn = eval_dataset_fn
        self.evaluate_fn = evaluate_fn
        self.history, self.eval_history = [], []  # this process's loops
        self.train_dataset_fn = train_dataset_fn
        self.checkpoints = RunCheckpoints(
            self.model, self._state(checkpoint_input), self.model_dir,
            self.is_chief, getattr(strategy.cluster_resolver, "task_id", 0),
            config.keep_checkpoints, best_metric, log)
        self.writer = (tf.summary.create_file_writer(
            str(self.model_dir / "tensorboard")) if self.is_chief else
            tf.summary.create_noop_writer())
        self._train_loop = self._make_train_loop()
        self._eval_loop = None

    def _state(self, checkpoint_input):
        """{root: trackable} of the training state beside the model."""
        # Dropout draws from Keras seed generators whose state is not a
        # weight; without it a resumed run would drop different units.
        dropout_seeds = tf.train.Checkpoint(**{
            f"seed_{i}": v for i, v in enumerate(
                v for v in self.model.variables
                if v.path.endswith("seed_generator_state"))})
        state = dict(optimizer=self.optimizer, global_step=self.step,
                     dropout_seeds=dropout_seeds)
        # Where a resumed run's input continues: the iterator's own state
        # (one device), or a fast-forward by the restored step (the
        # distributed iterators of multi-device strategies cannot be
        # saved; a seeded pipeline is a function of the step).
        self.resume_input = "none" if not checkpoint_input else (
            "iterator" if keras_compat.is_trackable(self.iterator)
            else "fast_forward")
        if self.resume_input == "iterator":
            state["train_iterator"] = self.iterator
        elif self.resume_input == "none":
            self.log("note: the input comes from a service and is not "
                     "checkpointed; a resumed run draws fresh batches")
        return state

    # The run's files, kept by `self.checkpoints` (RunCheckpoints).
    best_dir = property(lambda self: self.checkpoints.best_dir)
    checkpoint_dir = property(lambda self: self.checkpoints.directory)
    manager = property(lambda self: self.checkpoints.manager)
    latest_checkpoint = property(lambda self: self.checkpoints.latest)

    @property
    def best(self):
        """The best evaluation so far ({"metric", "value", "step",
        "results"}), or None."""
        return self.checkpoints.best

    @best.setter
    def best(self, value):
        self.checkpoints.best = value

    # --- the loops -----------------------------------------------------------

    def _make_train_loop(self):
        model, optimizer = self.model, self.optimizer

        def step_fn(batch):
            x, y, weights = keras.utils.unpack_x_y_sample_weight(batch)
            with tf.GradientTape() as tape:
                outputs = model(x, training=True)
                loss = model.compute_loss(x=x, y=y, y_pred=outputs,
                                          sample_weight=weights)
                scaled = optimizer.scale_loss(loss)
            # Variables the loss does not reach (the pooler of a model
            # pre-trained without NSP) get no gradient and no update.
            pairs = [(g, v) for g, v in zip(
                tape.gradient(scaled, model.trainable_variables),
                model.trainable_variables) if g is not None]
            gradients, variables = [g for g, _ in pairs], [v for _, v in pairs]
            if self.clipnorm:
                gradients = self._clip_global(gradients)
            optimizer.apply_gradients(zip(gradients, variables))
            if y is not None:  # compiled metrics (labels outside x)
                model.compute_metrics(x, y, outputs, weights)
            return loss

        if self.config.jit_compile:
            step_fn = tf.function(step_fn, jit_compile=True)

        # A loop written out, without AutoGraph: converting the model's,
        # the loss's and the optimizer's code took seconds of every run's
        # first step.
        @tf.function(autograph=False)
        def train_loop(iterator, steps):
            def body(index, total):
                per_replica = self.strategy.run(step_fn,
                                                args=(next(iterator),))
                # Each replica's loss is already 1/replicas of the mean.
                total += self.strategy.reduce("SUM", per_replica, axis=None)
                self.step.assign_add(1)
                return index + 1, total

            _, total = tf.while_loop(lambda index, _: index < steps, body,
                                     (tf.constant(0), tf.constant(0.0)))
            return total / tf.cast(steps, tf.float32)

        return train_loop

    def _clip_global(self, gradients):
        """Clips the replica-summed gradient; returns each replica's 1/n."""
        context = tf.distribute.get_replica_context()
        replicas = context.num_replicas_in_sync
        gradients = [tf.convert_to_tensor(g) for g in gradients]
        if replicas > 1:
            gradients = context.all_reduce("SUM", gradients)
        gradients, _ = tf.clip_by_global_norm(gradients, self.clipnorm)
        # The optimizer sums over replicas again: hand it 1/n each.
        return [g / replicas for g in gradients] if replicas > 1 else \
            gradients

    def _make_eval_loop(self):
        model = self.model

        def step_fn(batch):
            x, y, weights = keras.utils.unpack_x_y_sample_weight(batch)
            outputs = model(x, training=False)
            if y is not None:
                model.compute_metrics(x, y, outputs, weights)
            return model.compute_loss(x=x, y=y, y_pred=outputs,
                                      sample_weight=weights, training=False)

        @tf.function(autograph=False)  # as the train loop
        def eval_loop(iterator, steps):
            def body(index):
                self.strategy.run(step_fn, args=(next(iterator),))
                return index + 1

            tf.while_loop(lambda index: index < steps, body,
                          (tf.constant(0),))

        return eval_loop

    # --- resuming and stopping -----------------------------------------------

    def _fast_forward(self, step):
        """A fresh input iterator past the batches of `step` steps."""
        replicas = self.strategy.num_replicas_in_sync
        takes_skip = "skip_batches" in inspect.signature(
            self.train_dataset_fn).parameters

        def dataset_fn(context):
            # Each step takes one batch per replica this pipeline feeds.
            skip = step * (replicas // context.num_input_pipelines)
            if takes_skip:  # skips before the costly transforms
                return self.train_dataset_fn(context, skip_batches=skip)
            return self.train_dataset_fn(context).skip(skip)

        self.iterator = iter(
            self.strategy.distribute_datasets_from_function(dataset_fn))
        self.log(f"input fast-forwarded past the {step} steps already "
                 "trained (the data order continues; nothing is replayed)")

    # --- public API ----------------------------------------------------------

    def restore(self):
        """Restores the newest checkpoint that reads; returns its path."""
        latest = self.checkpoints.restore()
        if latest:
            self.log(f"restored {latest} at step {int(self.step.numpy())}")
            distribute.check_same_step(self.strategy, int(self.step.numpy()))
        return latest

    def metrics(self):
        results = {}
        for metric in self.model.metrics:
            if metric.name == "loss":
                continue
            value = metric.result()
            if isinstance(value, dict):  # compiled metrics
                results.update({k: float(v) for k, v in value.items()})
            else:
                results[metric.name] = float(value)
        return results

    def _reset_metrics(self):
        for metric in self.model.metrics:
            metric.reset_state()

    def evaluate(self, steps=None):
        """Mean metrics over `steps` evaluation batches (fresh iterator)."""
        if self.evaluate_fn is not None:
            return dict(self.evaluate_fn(self.model))
        if self.eval_dataset_fn is None:
            return {}
        if self._eval_loop is None:
            self._eval_loop = self._make_eval_loop()
        self._reset_metrics()
        iterator = iter(self.strategy.distribute_datasets_from_function(
            self.eval_dataset_fn))
        self._eval_loop(iterator, tf.constant(steps or
                                              self.config.eval_steps))
        results = self.metrics()
        self._reset_metrics()
        return results

    def _after_evaluation(self, results, step):
        self._write_scalars("eval", results, step)
        self.eval_history.append(dict(results, step=step))
        self.log(f"step {step} evaluation: " + ", ".join(
            f"{k} {v:.4f}" for k, v in results.items()))
        if self.checkpoints.consider(results, step):
            self.log(f"new best {self.best['metric']} "
                     f"{self.best['value']:.4f} at step {step}: wrote "
                     f"{self.best_dir}")

    def save_best_weights(self, best=None):
        """Writes the model's weights and `best` to `best_dir`."""
        self.checkpoints.save_best(best)

    def restore_best_weights(self):
        """Reads the best weights back into the model."""
        self.checkpoints.restore_best()

    def save(self):
        step = int(self.step.numpy())
        path = self.checkpoints.save(step)
        self._saved_step = step
        self.log(f"wrote checkpoint {path}")
        return path

    def train(self):
        """Runs to `train_steps`, resuming from the latest checkpoint.

        Returns:
            dict of the last loop's training metrics and the final
            evaluation (prefixed `eval_`).

        Raises:
            NonFiniteLossError: the loss became NaN/Inf; the run stops and
                the last good checkpoint stays the latest.
            TrainingStopped: SIGTERM (on any worker): every worker finished
                the loop, a checkpoint of that step was written.
        """
        restored = self.restore()
        start_step = int(self.step.numpy())
        self._saved_step = start_step if restored else None
        if start_step and self.resume_input == "fast_forward":
            self._fast_forward(start_step)
        self._stops = StopRequests(self.strategy, self.log)
        try:
            with self._stops:
                return self._train_from(start_step)
        except (tf.errors.UnavailableError, tf.errors.AbortedError) as error:
            # A peer worker died (its collectives are aborted): say so
            # plainly; the remedy is a restart of the whole job.
            reason = error.message.split(" Collective ops is aborted by: ")
            raise RuntimeError(
                f"another worker stopped responding ("
                f"{reason[-1].splitlines()[0][:200]}); stopped at step "
                f"{int(self.step.numpy())}, the latest checkpoint is "
                f"{self.latest_checkpoint}. Restart every worker "
                "with the same command to continue from it.") from None

    def _train_from(self, start_step):
        config = self.config
        progbar = progress_bar(config.train_steps)
        progbar.update(start_step)
        results = {}
        while int(self.step.numpy()) < config.train_steps:
            step = int(self.step.numpy())
            # Loops end on checkpoint and evaluation boundaries.
            steps = min(config.steps_per_loop, config.train_steps - step,
                        _to_next(step, config.checkpoint_every),
                        _to_next(step, config.eval_every))
            self._reset_metrics()
            started = time.perf_counter()
            loss = float(self._train_loop(self.iterator, tf.constant(steps)))
            seconds = time.perf_counter() - started
            step = int(self.step.numpy())
            if not math.isfinite(loss):
                raise NonFiniteLossError(
                    f"Loss became {loss} in the {steps} steps before step "
                    f"{step}; stopped without saving. The last good "
                    f"checkpoint is {self.latest_checkpoint}. Lower "
                    "the learning rate, enable clipping, or check the data.")
            results = dict(self.metrics(), loss=loss)
            if self.global_batch_size:
                results["examples/s"] = \
                    self.global_batch_size * steps / seconds
            results["learning_rate"] = float(
                self.optimizer.learning_rate.numpy()
                if hasattr(self.optimizer.learning_rate, "numpy") else
                self.optimizer.learning_rate)
            self._write_scalars("train", results, step)
            self.history.append(dict(results, step=step))
            # The model's own metrics, each a value of this loop.
            shown = [(k, v) for k, v in results.items()
                     if k != "learning_rate"]
            progbar.stateful_metrics.update(k for k, _ in shown)
            progbar.update(step, shown)
            if step % config.checkpoint_every == 0 or \
                    step >= config.train_steps:
                self.save()
            if self._stops.agreed():
                path = self.save() if self._saved_step != step else \
                    self.manager.latest_checkpoint
                raise TrainingStopped(step, path)
            if config.eval_every and step % config.eval_every == 0 and \
                    step < config.train_steps:
                self._after_evaluation(self.evaluate(), step)
        final = self.evaluate()
        if final:
            self._after_evaluation(final, int(self.step.numpy()))
            results.update({f"eval_{k}": v for k, v in final.items()})
        if self._saved_step != int(self.step.numpy()):
            self.save()
        return results

    def _write_scalars(self, prefix, values, step):
        summaries.write_scalars(self.writer, self.model_dir / "tensorboard",
                                prefix, values, step)


def _reusing(dataset, dataset_fn):
    """`dataset_fn`, answering with `dataset` (already built, for its spec)
    in the one-pipeline, one-replica context it was built for: the input
    pipeline's functions are not traced twice."""

    def dataset_for(context):
        if dataset is not None and context.num_input_pipelines == 1 and \
                context.num_replicas_in_sync == 1:
            return dataset
        return dataset_fn(context)

    return dataset_for
