"""Progress that reads well where it is read: Keras' bar on a terminal (or
in a notebook), and plain lines, no terminal codes, in a log file."""

import sys
import time


class PlainProgress:
    """`keras.utils.Progbar`'s `update` as one plain line per call.

    Examples:
        >>> bar = PlainProgress(10, unit_name="step")
        >>> bar.update(5, [("loss", 0.61234)])  # doctest: +ELLIPSIS
        step 5/10 - ... s - loss 0.6123
    """

    def __init__(self, target, unit_name="step"):
        self.target, self.unit_name = target, unit_name
        self.stateful_metrics = set()
        self._started = time.perf_counter()
        self._last = None

    def update(self, current, values=None, finalize=None):
        if current == self._last and not values:
            return
        self._last = current
        parts = [f"{self.unit_name} {current}/{self.target}",
                 f"{time.perf_counter() - self._started:.0f} s"]
        parts += [f"{name} {value:.4g}" for name, value in values or ()]
        print(" - ".join(parts), flush=True)


def progress_bar(target, unit_name="step"):
    """Keras' progress bar where stdout is a terminal or a notebook, else
    `PlainProgress` (e.g. `bert-tf finetune ... > log.txt`)."""
    interactive = getattr(sys.stdout, "isatty", lambda: False)() or \
        "ipykernel" in sys.modules
    if interactive:
        import keras

        return keras.utils.Progbar(target, unit_name=unit_name)
    return PlainProgress(target, unit_name)
