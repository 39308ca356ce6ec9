"""TensorBoard scalars whose write failures are one line, not a traceback
from deep inside the summary writer."""

import tensorflow as tf

from bert_tf.safe_io import guarded_write


def write_scalars(writer, directory, prefix, values, step):
    """Writes `values` as `prefix/name` scalars at `step` and flushes them
    to the event files in `directory`."""
    with guarded_write(directory, "the TensorBoard logs"):
        with writer.as_default(step=step):
            for name, value in values.items():
                tf.summary.scalar(f"{prefix}/{name}", value)
        writer.flush()
