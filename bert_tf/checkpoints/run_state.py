"""A training run's checkpoints and best weights, kept for the trainer
(`bert_tf/training/trainer.py`), which only runs the loops.

- The training state: the model's roots (`layout.model_roots`) plus the
  state roots the trainer passes (optimizer, step, dropout seeds, input
  iterator), under `model_dir/checkpoints`. Every worker takes part in
  saving; only the chief keeps the files (the others write to a scratch
  directory of their own), and every worker resumes from the chief's: a
  worker killed between the chief's save and its own would restart a step
  behind its peers.
- The best model: its weights alone in `model_dir/best`, with `best.json`
  (the metric, its value, the step and the results), written whole or not
  at all (`run_files.save_best`).
"""

import json

import tensorflow as tf

from bert_tf.checkpoints import layout, run_files
from bert_tf.config_io import WEIGHTS_PREFIX
from bert_tf.storage import GPath


class RunCheckpoints:
    """The checkpoints and best weights of one run (module docstring).

    Args:
        model: a model with `encoder` and `checkpoint_heads()`.
        state: {root: trackable} the trainer checkpoints beside the model.
        model_dir: the run directory.
        is_chief: this worker keeps the files.
        worker_id: this worker's task id (non-chief workers only).
        keep: how many training checkpoints to keep.
        best_metric: the evaluation result that picks the best weights
            (None: no best is chosen by metric).
        log: where notes go.
    """

    def __init__(self, model, state, model_dir, is_chief, worker_id=0,
                 keep=3, best_metric=None, log=print):
        self.model_dir, self.log = GPath(model_dir), log
        self.keep, self.best_metric, self.best = keep, best_metric, None
        self.checkpoint = tf.train.Checkpoint(**layout.model_roots(model),
                                              **state)
        self.model_only = tf.train.Checkpoint(**layout.model_roots(model))
        self.directory = self.model_dir / "checkpoints"
        own = self.directory if is_chief else \
            self.model_dir / "scratch" / f"worker_{worker_id}"
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, str(own), max_to_keep=keep)
        self.is_chief = is_chief
        self.best_dir = self.model_dir / "best" if is_chief else \
            own.parent / "best"
        if run_files.recover_best(self.best_dir):
            log(f"put back {self.best_dir}: the last best-model write was "
                "cut off before it finished")

    @property
    def latest(self):
        """The chief's latest checkpoint, which every worker resumes from."""
        return tf.train.latest_checkpoint(str(self.directory))

    def restore(self):
        """Restores the newest checkpoint that reads (unreadable ones are
        reported and skipped; see `run_files`), and the best so far;
        returns its path (None: nothing to resume)."""
        latest = run_files.newest_readable(self.directory, self.log,
                                           tidy=self.is_chief)
        if latest and latest != self.manager.latest_checkpoint:
            self.manager = tf.train.CheckpointManager(
                self.checkpoint, self.manager.directory,
                max_to_keep=self.keep)
        if not latest:
            return None
        try:
            # Every object of this run must be in the file; the file's own
            # bookkeeping (`save_counter`) need not be restored, and saying
            # so keeps TF from warning about it when the run ends.
            self.checkpoint.read(latest).assert_existing_objects_matched() \
                .expect_partial()
        except (ValueError, AssertionError) as error:
            reason = str(error).strip().splitlines()[0][:300].rstrip(".")
            raise ValueError(
                f"Cannot resume from {latest}: it does not fit this run "
                f"({reason}). It was written with another model config "
                "or optimizer (bert_tf before FusedAdamW kept Adam's "
                "moments per variable). Nothing was changed: use a new "
                "trainer.model_dir (to pre-train on from these weights: "
                f"init_checkpoint={GPath(latest).parent}).") from None
        best_file = self.model_dir / "best" / "best.json"
        if self.best_metric and best_file.is_file():
            self.best = json.loads(best_file.read_text())
        return latest

    def save(self, step):
        """Writes the training state of `step`; returns its path."""
        return run_files.save(self.manager, step)

    def consider(self, results, step):
        """Keeps the model's weights as the best if `results` beat the best
        so far on `best_metric`; returns True if they did."""
        if not self.best_metric or not results:
            return False
        if self.best_metric not in results:
            raise ValueError(
                f"best_metric {self.best_metric!r} is not among the "
                f"evaluation results {sorted(results)}.")
        value = results[self.best_metric]
        if self.best is not None and value <= self.best["value"]:
            return False
        self.save_best({"metric": self.best_metric, "value": value,
                        "step": step, "results": results})
        return True

    def save_best(self, best=None):
        """Writes the model's weights (no optimizer) and `best` (to
        best.json) to `best_dir`, whole or not at all."""
        run_files.save_best(self.model_only, self.best_dir, best)
        if best is not None:
            self.best = best

    def restore_best(self):
        """Reads the weights `save_best` wrote back into the model (the
        model keeps its traced functions)."""
        self.model_only.read(str(self.best_dir / WEIGHTS_PREFIX)) \
            .assert_existing_objects_matched().expect_partial()
