"""Stopping a run on request: SIGTERM on any worker stops every worker
at the end of the same loop, after a checkpoint of that step, and the run
ends with `TrainingStopped` (exit code 143); the same command continues
it."""

import signal
import threading

import tensorflow as tf


class TrainingStopped(RuntimeError):
    """SIGTERM stopped the run after a checkpoint; rerun to continue."""

    exit_code = 143  # 128 + SIGTERM: ended on request, not finished

    def __init__(self, step, checkpoint):
        super().__init__(
            f"stopped by SIGTERM at step {step} after writing {checkpoint}; "
            "run the same command again to continue from there.")
        self.step, self.checkpoint = step, checkpoint


class StopRequests:
    """While open (in the main thread), SIGTERM asks the run to stop; the
    handler before is put back on leaving.

    Args:
        strategy: the run's `tf.distribute.Strategy` (its workers vote).
        log: where the request is logged.
    """

    def __init__(self, strategy, log=print):
        self.strategy = strategy
        self.log = log
        self.requested = False
        self._previous = None

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._on_sigterm)
        return self

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None
        return False

    def _on_sigterm(self, signum, frame):
        self.requested = True
        self.log("SIGTERM: stopping after this loop, with a checkpoint")

    def agreed(self):
        """Whether any worker was asked to stop (all workers agree, so
        they save the same step together)."""
        if self.strategy.num_replicas_in_sync == 1:
            return self.requested
        flag = tf.constant(int(self.requested))
        votes = self.strategy.experimental_distribute_values_from_function(
            lambda context: flag)
        return int(self.strategy.reduce("SUM", votes, axis=None)) > 0
