"""What every kind's serving side shares: the base of the `tf.Module` a
kind exports, and the helpers of its graphs and of `bert-tf predict`."""

import keras
import tensorflow as tf

from bert_tf.storage import GPath
from bert_tf.text.features import bucket_lengths


def plain_variables(model):
    """The plain tf.Variables under a Keras model's variables: what an
    exported `tf.Module` tracks. A tracked Keras model would add a second
    copy of each variable that TF1-style loaders (TF Serving, the C API)
    restore while the functions read the first, uninitialized one. A
    served model's split kernels are plain already
    (`bert_tf.models.split_matmuls.SplitMatmuls`)."""
    return [v.value if isinstance(v, keras.Variable) else v
            for v in model.variables]


class TFLiteModule(tf.Module):
    """Base of the `tf.Module` each kind converts to TFLite: it tracks the
    model's plain variables (`plain_variables`); subclasses set
    `self.serve`.

    Args:
        model: the Keras model its graph runs.
        name: the module's name.
    """

    def __init__(self, model, name):
        super().__init__(name=name)
        self.model_variables = plain_variables(model)


class TaskModule(tf.Module):
    """Base of the `tf.Module` each task kind exports: it tracks the
    model's plain variables and the vocab asset; subclasses set
    `self.serve` (the `serving_default` function) and `warmup_inputs`.

    Only the plain tf.Variables under the Keras variables are tracked
    (`plain_variables`).
    """

    warmup_inputs = ()
    # What the served graph may batch: TF Serving's allowed_batch_sizes.
    BATCH_SIZES = (1, 2, 4, 8, 16, 32)

    def __init__(self, model, vocab, name, seq_length=None,
                 fixed_length=False):
        super().__init__(name=name)
        self.model_variables = plain_variables(model)
        self.vocab_file = tf.saved_model.Asset(str(vocab.path))
        self.lengths = (seq_length,) if fixed_length else \
            bucket_lengths(seq_length)

    def signatures(self):
        return {"serving_default": self.serve}

    def filler_request(self, words, batch_size=1):
        """`serving_default` inputs whose text has `words` words."""
        raise NotImplementedError

    def warmup_requests(self):
        """`serving_default` inputs TF Serving replays at load time: the
        examples, one request per length bucket (each word of the filler
        is at least one piece, so the request reaches its bucket) and the
        largest batch, so that no real request is the first of a shape."""
        requests = [dict(inputs) for inputs in self.warmup_inputs]
        requests += [self.filler_request(max(1, length - 2))
                     for length in self.lengths]
        requests.append(self.filler_request(max(1, self.lengths[0] - 2),
                                            self.BATCH_SIZES[-1]))
        return requests


def command_line_texts(args, rule="one text per line"):
    """`bert-tf predict`'s texts: the arguments, then `--input`'s lines."""
    texts = list(args.texts)
    if args.input:
        with GPath(args.input).open(errors="replace") as f:
            texts += [line.rstrip("\r\n") for line in f]
    if not texts:
        raise ValueError(f"Nothing to predict: give texts as arguments or "
                         f"--input FILE ({rule}).")
    return texts


def served_text_batches(loaded, args):
    """`(texts, NumPy outputs)` of `serving_default(text=...)` over
    `bert-tf predict`'s texts, `args.batch_size` at a time."""
    import tensorflow as tf

    texts = command_line_texts(args)
    function = loaded.signatures["serving_default"]
    for start in range(0, len(texts), args.batch_size):
        chunk = texts[start:start + args.batch_size]
        yield chunk, {k: v.numpy() for k, v in function(
            text=tf.constant(chunk)).items()}


def string_batch(value, name):
    """`value` checked at run time to be a [batch] string vector.

    Loaded signatures (Python, TF Serving, the C API) do not check shapes
    and TF folds checks written against the declared shape; a scalar would
    crash the tokenizer kernels. EnsureShape fails with "Shape of tensor
    NAME [] is not compatible with expected shape [?]".
    """
    return tf.raw_ops.EnsureShape(input=value, shape=tf.TensorShape([None]),
                                  name=name)


def same_batch(first, second, first_name, second_name):
    """`(first, second)`, failing with INVALID_ARGUMENT naming both when
    their batch sizes differ."""
    check = tf.debugging.assert_equal(
        tf.size(first), tf.size(second), message=(
            f"`{first_name}` and `{second_name}` must hold the same number "
            "of strings"))
    with tf.control_dependencies([check]):
        return tf.identity(first), tf.identity(second)
