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

# The default of a kind whose work stops at `seq_length` pieces whatever
# the text (a classifier): about 170,000 English words, tokenized in about
# 0.2 s on 2 cores.
# The export options of the limits, in the order the functions take them
# (`bert_tf.serving` lists them among each writer's options).
LIMIT_OPTIONS = ("max_input_chars", "max_batch_chars", "max_batch_rows")
MAX_INPUT_CHARS = 1_000_000
# A request's texts together, by default: four texts at the limit.
BATCH_TEXTS_AT_LIMIT = 4
MAX_BATCH_CHARS = BATCH_TEXTS_AT_LIMIT * MAX_INPUT_CHARS
# Texts (strings of each input: a multiple-choice row's choices count
# one each) in one request, at most by default. Empty texts count no
# characters, yet each is a row of the encoder's work, of up to
# `seq_length` tokens: the default is what costs `WORST_REQUEST_SECONDS`
# at full rows (`default_max_batch_rows`), within these bounds.
MAX_BATCH_ROWS = 1_024
_LEAST_ROWS = 8
# UTF-8 spends at most 4 bytes on a character: a text within its
# character limit is always within 4 times as many bytes, and bytes that
# are no characters (stray continuation bytes, which the tokenizer
# repairs one by one) are bounded by that.
BYTES_PER_CHAR = 4
# A kind whose encoder reads all of a text (span QA, tagging, long-document
# classification) costs time in proportion to it, so its default limit is
# chosen by time: a request at the limit costs about this many seconds on
# the project's 2-core machines. TensorFlow shares the cores op by op, so
# normal requests that arrive meanwhile wait about that long: at 5 s, with
# one request in 50 at the limit, their p99 stays within about twice that
# of a load without (`benchmarks/load_test.py`, docs/guides/serving.md);
# at 10 s it was 3.5 times. It is also a sixth of TF Serving's default
# REST timeout (30 s).
WORST_REQUEST_SECONDS = 5
# Measured (MiniLM-L6 QA and NER exports, 2-core AMD EPYC, TF 2.20,
# 2026-11-27; docs/guides/serving.md): 5.4-5.5 s per 100,000 characters.
_MINILM_L6 = {"num_layers": 6, "hidden_size": 384, "intermediate_size": 1536}
_MINILM_SECONDS_PER_CHAR = 5.5e-5
# The default never drops below a long article.
_LEAST_DEFAULT = 10_000
# Measured (the demo's MiniLM-L6 sentiment and multiple-choice exports,
# fp32, 900 full rows of 64 tokens, 2-core Intel Xeon with AMX, TF 2.20,
# 2026-11-28): 6.2 and 6.5 s for 57,600 tokens.
_MINILM_SECONDS_PER_TOKEN = 1.1e-4


def _token_flops(encoder):
    """An encoder's matmul work per token (in units that cancel)."""
    hidden, inner = encoder["hidden_size"], encoder["intermediate_size"]
    return encoder["num_layers"] * (4 * hidden * hidden + 2 * hidden * inner)


def default_max_input_chars(encoder, reads_whole_text):
    """The default `--max-input-chars` of an export of `encoder` (its
    config as a dict): `MAX_INPUT_CHARS` if its kind reads a bounded part
    of each text, else the characters that cost `WORST_REQUEST_SECONDS`
    (rounded to two figures, at least 10,000 and at most
    `MAX_INPUT_CHARS`).

    Examples:
        >>> default_max_input_chars(_MINILM_L6, True)
        90000
        >>> default_max_input_chars({"num_layers": 12, "hidden_size": 768,
        ...                          "intermediate_size": 3072}, True)
        11000
        >>> default_max_input_chars(_MINILM_L6, False)
        1000000
    """
    if not reads_whole_text:
        return MAX_INPUT_CHARS
    seconds_per_char = _MINILM_SECONDS_PER_CHAR * _token_flops(encoder) / \
        _token_flops(_MINILM_L6)
    chars = WORST_REQUEST_SECONDS / seconds_per_char
    figures = 10 ** max(len(str(int(chars))) - 2, 0)
    return int(min(MAX_INPUT_CHARS,
                   max(_LEAST_DEFAULT, chars // figures * figures)))


def resolve(kind, spec, encoder, max_input_chars=None, max_batch_chars=None,
            max_batch_rows=None, log=print):
    """An export's limits, as `export_fields` records them: those given,
    else the defaults for its kind (a kind class: `reads_whole_text`) and
    `encoder` (an `EncoderConfig`; `default_max_input_chars`), checked."""
    import dataclasses

    whole_text = kind.reads_whole_text(spec)
    if max_input_chars is None:
        max_input_chars = default_max_input_chars(
            dataclasses.asdict(encoder), whole_text)
        if whole_text:
            log(f"limit: {max_input_chars:,} characters per text, the "
                f"default for a {kind.kind} model of this size: a request "
                f"at the limit costs about {WORST_REQUEST_SECONDS} s on 2 "
                "CPU cores (--max-input-chars sets it)")
    if max_batch_chars is None:
        max_batch_chars = BATCH_TEXTS_AT_LIMIT * max_input_chars
    if max_batch_rows is None:
        # A spec is a kind's typed config, or an export-only kind's dict.
        seq_length = (spec.get("seq_length") if isinstance(spec, dict) else
                      getattr(spec, "seq_length", None)) or 128
        max_batch_rows = default_max_batch_rows(dataclasses.asdict(encoder),
                                                seq_length)
    return export_fields(max_input_chars, max_batch_chars, max_batch_rows,
                         whole_text)


def default_max_batch_rows(encoder, seq_length):
    """The default `--max-batch-rows` of an export of `encoder` (its config
    as a dict) whose rows hold up to `seq_length` tokens: the rows that
    cost `WORST_REQUEST_SECONDS` when full (rounded to two figures, at
    least 8 and at most `MAX_BATCH_ROWS`).

    Examples:
        >>> default_max_batch_rows(_MINILM_L6, 64), default_max_batch_rows(
        ...     _MINILM_L6, 384)
        (710, 110)
        >>> default_max_batch_rows({"num_layers": 12, "hidden_size": 768,
        ...                         "intermediate_size": 3072}, 128)
        44
        >>> default_max_batch_rows({"num_layers": 2, "hidden_size": 32,
        ...                         "intermediate_size": 64}, 128)
        1024
    """
    seconds_per_row = _MINILM_SECONDS_PER_TOKEN * seq_length * \
        _token_flops(encoder) / _token_flops(_MINILM_L6)
    rows = int(WORST_REQUEST_SECONDS / seconds_per_row)
    figures = 10 ** max(len(str(rows)) - 2, 0)
    return min(MAX_BATCH_ROWS, max(_LEAST_ROWS, rows // figures * figures))


def export_fields(max_input_chars, max_batch_chars,
                  max_batch_rows=MAX_BATCH_ROWS, pads_to_longest=False):
    """The limits as an export records them in `bert_tf.json`, checked
    (`check_limits`) before anything is built. `pads_to_longest`: the
    kind pads every text of a request to its longest (span QA, tagging,
    long documents), so rows x longest text counts against
    `max_batch_chars` too."""
    check_limits(max_input_chars, max_batch_chars, max_batch_rows)
    return {"max_input_chars": max_input_chars,
            "max_batch_chars": max_batch_chars,
            "max_batch_rows": max_batch_rows,
            "pads_to_longest": bool(pads_to_longest)}


def limits_of(spec):
    """The keyword limits of `text_checks` from an export's spec (an
    export written before rows were limited gets today's default)."""
    return {"max_input_chars": spec["max_input_chars"],
            "max_batch_chars": spec["max_batch_chars"],
            "max_batch_rows": spec.get("max_batch_rows", MAX_BATCH_ROWS),
            "pads_to_longest": spec.get("pads_to_longest", False)}


def check_given(max_input_chars, max_batch_chars, max_batch_rows=None):
    """`check_limits` of the limits given (None: the default), before
    anything is built; a batch limit is checked against a given text limit
    only."""
    check_limits(max_input_chars, max_batch_chars, max_batch_rows,
                 given_only=True)


def check_limits(max_input_chars, max_batch_chars,
                 max_batch_rows=MAX_BATCH_ROWS, given_only=False):
    """Raises a ValueError naming the flag of a limit that is not a
    positive number, or a batch limit below the per-text one; with
    `given_only`, a None limit (the default, chosen later) passes."""
    for option, value in zip(LIMIT_OPTIONS, (
            max_input_chars, max_batch_chars, max_batch_rows)):
        if value is None and given_only:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or \
                value < 1:
            raise ValueError(f"--{option.replace('_', '-')} {value!r}: "
                             "must be a whole number >= 1.")
    if None in (max_input_chars, max_batch_chars):
        return
    if max_batch_chars < max_input_chars:
        raise ValueError(f"--max-batch-chars {max_batch_chars:,} is below "
                         f"--max-input-chars {max_input_chars:,}: one text "
                         "at the limit would not fit in a request.")


def add_limit_arguments(parser):
    """`bert-tf export`'s limit flags."""
    parser.add_argument(
        "--max-input-chars", type=int, default=None, metavar="N",
        help="savedmodel and hub: the most characters (Unicode code points)"
        " one text of a request may hold; a longer one is refused with "
        "INVALID_ARGUMENT before any model work, by the signatures and the "
        "module's own functions alike. Default: for kinds that read all "
        "of a text (QA, NER, long documents), whose time grows with it, "
        f"what costs about {WORST_REQUEST_SECONDS} s on 2 CPU cores "
        "(MiniLM-L6: 90,000; BERT-Base: 11,000); for other kinds "
        f"{MAX_INPUT_CHARS:,}. The export prints the limit it wrote.")
    parser.add_argument(
        "--max-batch-chars", type=int, default=None, metavar="N",
        help="savedmodel and hub: the most characters all the texts of one "
        "request may hold together (default: four texts at "
        "--max-input-chars); for kinds that pad every text to the longest "
        "(QA, NER, long documents), also texts x the longest one.")
    parser.add_argument(
        "--max-batch-rows", type=int, default=None, metavar="N",
        help="savedmodel and hub: the most texts one request may hold, "
        "empty ones included, in each input (a multiple-choice request's "
        "choices count one each). Default: what costs about "
        f"{WORST_REQUEST_SECONDS} s on 2 CPU cores when every text fills "
        "seq_length (MiniLM-L6 at 128 tokens: 350; BERT-Base: 44), at most "
        f"{MAX_BATCH_ROWS:,}.")


def text_checks(value, name, max_input_chars, max_batch_chars,
                max_batch_rows=MAX_BATCH_ROWS, pads_to_longest=False):
    """Assert ops that fail, cheapest first, when the string tensor `value`
    (any shape) holds more than `max_batch_rows` texts, a text of more
    than `BYTES_PER_CHAR` x `max_input_chars` bytes or `max_input_chars`
    characters, or more than `max_batch_chars` characters in all (with
    `pads_to_longest`, also as texts x the longest text)."""
    import tensorflow as tf

    flat = tf.reshape(value, [-1])
    rows = tf.size(flat)
    max_bytes = BYTES_PER_CHAR * max_input_chars
    # Bytes first: the character count reads every byte of every text.
    longest_bytes = tf.reduce_max(tf.strings.length(flat))
    chars = tf.strings.length(flat, unit="UTF8_CHAR")
    # Of no text, the int32 minimum: within the limit.
    longest = tf.reduce_max(chars)
    total = tf.reduce_sum(chars)
    rules = [
        (rows <= max_batch_rows, "`{name}` holds {{}} texts in one request, "
         f"over the limit of {max_batch_rows} set by `bert-tf export "
         "--max-batch-rows` (send fewer texts per request)", rows),
        (longest_bytes <= max_bytes, "`{name}` holds a text of {{}} bytes, "
         f"over the limit of {max_bytes} ({BYTES_PER_CHAR} bytes per "
         f"character of `bert-tf export --max-input-chars` "
         f"{max_input_chars})", longest_bytes),
        (longest <= max_input_chars, "`{name}` holds a text of {{}} "
         f"characters, over the limit of {max_input_chars} per text set by "
         "`bert-tf export --max-input-chars`", longest),
        (total <= max_batch_chars, "`{name}` holds {{}} characters in one "
         f"request, over the limit of {max_batch_chars} set by `bert-tf "
         "export --max-batch-chars` (send fewer texts per request)", total)]
    if pads_to_longest:
        # int64: rows x chars overflows int32 on a hostile request.
        padded = tf.cast(rows, tf.int64) * tf.cast(tf.maximum(longest, 0),
                                                   tf.int64)
        rules.append((padded <= max_batch_chars, "`{name}` pads {{}} "
                      "characters in one request (its texts x the longest "
                      f"one), over the limit of {max_batch_chars} set by "
                      "`bert-tf export --max-batch-chars` (send a long text "
                      "in a request of its own)", padded))
    # Each check runs only after the one before passed: a request is
    # refused for the first rule it breaks.
    checks = []
    for holds, message, figure in rules:
        with tf.control_dependencies(checks):
            checks = [tf.debugging.Assert(holds, [tf.strings.format(
                message.format(name=name), [figure])])]
    return checks


def limited(function, max_input_chars, max_batch_chars, **more):
    """The tf.function `function` (with an input signature) behind the
    checks of `text_checks` on each of its string inputs (`more`: its
    other limits): nothing of it runs for a request over a limit."""
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
                                           max_batch_chars, **more)]
        with tf.control_dependencies(checks):
            args = [tf.identity(value) for value in args]
        return function(*args)

    # Called by keyword as the module's own function was (`loaded.serve(
    # text=...)`), not only as a signature.
    checked.__signature__ = inspect.Signature(
        [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
         for name in names])
    return tf.function(checked, input_signature=specs, autograph=False)


def limit_module(module, signatures, max_input_chars, max_batch_chars,
                 **more):
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
                                         max_batch_chars, **more)
            setattr(module, name, checked[id(value)])
    return {name: checked.get(id(function)) or limited(
        function, max_input_chars, max_batch_chars, **more)
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
