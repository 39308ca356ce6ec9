"""The stated limit of an export: how much text one request may carry.

TF Serving has no per-request memory cap, so the export holds one: every
string input of every signature is measured in characters (Unicode code
points) before anything else runs, and a request over the limit fails with
INVALID_ARGUMENT and one line that names the input, the limit and the
flag that sets it. Under the limit, memory is bounded by the encoder's
fixed-size steps (`bert_tf.models.chunked`) plus what grows with the text
itself (its word pieces, windows and logits): about 0.1 KB per character
(docs/guides/serving.md has the measured figures).
"""
import contextlib
import inspect

# About 170,000 English words per text; a 100,000-word context (600,000
# characters) is answered, a 600,000-word one (3.6 million) refused.
MAX_INPUT_CHARS = 1_000_000
# A request's texts together: four texts at the limit.
MAX_BATCH_CHARS = 4_000_000


def export_fields(max_input_chars, max_batch_chars):
    """The limits as an export records them in `bert_tf.json`, checked
    (`check_limits`) before anything is built."""
    check_limits(max_input_chars, max_batch_chars)
    return {"max_input_chars": max_input_chars,
            "max_batch_chars": max_batch_chars}


def check_limits(max_input_chars, max_batch_chars):
    """Raises a ValueError naming the flag of a limit that is not a
    positive number, or a batch limit below the per-text one."""
    for flag, value in (("--max-input-chars", max_input_chars),
                        ("--max-batch-chars", max_batch_chars)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{flag} {value!r}: must be a whole number of "
                             "characters >= 1.")
    if max_batch_chars < max_input_chars:
        raise ValueError(f"--max-batch-chars {max_batch_chars:,} is below "
                         f"--max-input-chars {max_input_chars:,}: one text "
                         "at the limit would not fit in a request.")


def add_limit_arguments(parser):
    """`bert-tf export`'s limit flags."""
    parser.add_argument(
        "--max-input-chars", type=int, default=None, metavar="N",
        help="savedmodel and hub: the most characters (Unicode code points)"
        f" one text of a request may hold (default {MAX_INPUT_CHARS:,}); a "
        "longer one is refused with INVALID_ARGUMENT before any model work, "
        "by the signatures and the module's own functions alike.")
    parser.add_argument(
        "--max-batch-chars", type=int, default=None, metavar="N",
        help="savedmodel and hub: the most characters all the texts of one "
        "request "
        f"may hold together (default {MAX_BATCH_CHARS:,}).")


def text_checks(value, name, max_input_chars, max_batch_chars):
    """Assert ops that fail when a text of the string tensor `value` (any
    shape) holds more than `max_input_chars` characters, or all of them
    together more than `max_batch_chars`."""
    import tensorflow as tf

    chars = tf.reshape(tf.strings.length(value, unit="UTF8_CHAR"), [-1])
    longest = tf.reduce_max(tf.concat([[0], chars], 0))
    total = tf.reduce_sum(chars)
    per_text = tf.strings.format(
        f"`{name}` holds a text of {{}} characters, over the limit of "
        f"{max_input_chars} per text set by `bert-tf export "
        "--max-input-chars`", [longest])
    per_request = tf.strings.format(
        f"`{name}` holds {{}} characters in one request, over the limit of "
        f"{max_batch_chars} set by `bert-tf export --max-batch-chars` (send "
        "fewer texts per request)", [total])
    # A text over its own limit is reported as that, not as the batch.
    return [tf.debugging.Assert(longest <= max_input_chars, [per_text]),
            tf.debugging.Assert((total <= max_batch_chars) |
                                (longest > max_input_chars), [per_request])]


def limited(function, max_input_chars, max_batch_chars):
    """The tf.function `function` (with an input signature) behind the
    checks of `text_checks` on each of its string inputs: nothing of it
    runs for a request over a limit."""
    import tensorflow as tf

    specs = function.input_signature
    names = [spec.name for spec in specs]

    def checked(*args):
        # Loaded signatures do not check shapes (a scalar would reach the
        # kernels); EnsureShape fails naming the input.
        args = [tf.raw_ops.EnsureShape(input=value, shape=spec.shape,
                                       name=spec.name)
                for spec, value in zip(specs, args)]
        checks = [check for spec, value in zip(specs, args)
                  if spec.dtype == tf.string
                  for check in text_checks(value, spec.name, max_input_chars,
                                           max_batch_chars)]
        with tf.control_dependencies(checks):
            args = [tf.identity(value) for value in args]
        return function(*args)

    # Called by keyword as the module's own function was (`loaded.serve(
    # text=...)`), not only as a signature.
    checked.__signature__ = inspect.Signature(
        [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
         for name in names])
    return tf.function(checked, input_signature=specs, autograph=False)


def limit_module(module, signatures, max_input_chars, max_batch_chars):
    """Puts each of `module`'s own functions that takes text behind the
    limits (`limited`), as its signatures are: a SavedModel loaded in
    Python exposes them (`loaded.serve(text=...)`) beside the signatures.
    Returns {name: limited function} of `signatures`, the same function
    where a signature is one of the module's."""
    import tensorflow as tf

    checked = {}
    for name, value in list(vars(module).items()):
        specs = getattr(value, "input_signature", None)
        if isinstance(value, tf.types.experimental.PolymorphicFunction) \
                and specs and any(s.dtype == tf.string for s in specs):
            checked[id(value)] = limited(value, max_input_chars,
                                         max_batch_chars)
            setattr(module, name, checked[id(value)])
    return {name: checked.get(id(function)) or limited(
        function, max_input_chars, max_batch_chars)
            for name, function in signatures.items()}


def refusal_line(message):
    """The one line that says why an export refused a request, from the
    message of its INVALID_ARGUMENT (which TF wraps in node names and
    stack-trace lines).

    Examples:
        >>> refusal_line("Graph execution error:\\n\\nassertion failed: [`text` "
        ...              "holds 9 characters]\\n\\t [[{{node Assert}}]]")
        '`text` holds 9 characters'
    """
    lines = [line.strip() for line in message.splitlines()]
    for line in lines:
        if line.startswith("assertion failed: ["):
            return line[len("assertion failed: ["):].rstrip("]")
    told = [line for line in lines if line and not line.startswith((
        "Graph execution error", "Detected at node", "<stack traces",
        "[["))]
    return told[-1] if told else message


@contextlib.contextmanager
def refused_as_value_error():
    """Turns an export's refusal of a request (INVALID_ARGUMENT) into a
    ValueError of its one line, for the command line."""
    import tensorflow as tf

    try:
        yield
    except tf.errors.InvalidArgumentError as error:
        raise ValueError(refusal_line(error.message)) from None
