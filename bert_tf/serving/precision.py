"""The precision of an export: fp32, bf16 weights where the CPU computes
bf16 natively, or int8 matmuls where it has VNNI or AMX-INT8.

bf16 halves the bytes every matmul reads and, on CPUs with AVX512_BF16 or
AMX, doubles the arithmetic per cycle. Elsewhere oneDNN emulates it and it
is slower than fp32, so `auto` looks at the CPU and an export records its
precision: loading a bf16 export on a CPU without bf16 warns. int8
quarters the bytes and changes results a little, so `auto` never picks
it; an int8 export on a CPU without VNNI or AMX-INT8 says it is emulated.
"""

import dataclasses

from bert_tf.training.precision import (cpu_bf16_flags, cpu_int8_flags,
                                        describe_choice, warn_if_emulated)

PRECISIONS = ("fp32", "bf16", "int8", "auto")
# The Keras dtype policy each precision builds the model in: `bfloat16`
# stores the variables as bf16, so no weight is cast per call (layer norms
# stay float32: `bert_tf.layers.base.norm_policy`). int8 is built in
# float32, then its encoder's matmuls are quantized (`to_int8`).
POLICIES = {"fp32": "float32", "bf16": "bfloat16", "int8": "float32"}


def resolve(precision, log=print, cpuinfo="/proc/cpuinfo"):
    """`fp32` or `bf16` for `precision` (`auto`: bf16 where the CPU has
    AVX512_BF16 or AMX, fp32 otherwise; the choice is logged).

    Examples:
        >>> resolve("fp32")
        'fp32'
        >>> resolve("auto", log=lambda line: None, cpuinfo="/nonexistent")
        'fp32'
    """
    if precision not in PRECISIONS:
        raise ValueError(f"--precision {precision}: use one of "
                         f"{', '.join(PRECISIONS)}.")
    if precision == "int8":
        warn_if_emulated("int8", "this export", cpuinfo=cpuinfo)
    if precision != "auto":
        return precision
    flags = cpu_bf16_flags(cpuinfo)
    chosen = "bf16" if flags else "fp32"
    log("precision auto: " + describe_choice(chosen, flags))
    return chosen


def branch_by_rows(model, precision):
    """An fp32 `model`'s encoder run in one graph copy per row class
    (`BertEncoder.branch_by_rows`), so that its served matmuls may keep
    their reordered weights; returns the class bounds (() for other
    precisions)."""
    if precision != "fp32":
        return ()
    encoder = getattr(model, "encoder", model)
    encoder.branch_by_rows()
    return encoder.row_class_bounds


def add_precision_arguments(parser):
    """`bert-tf export`'s flags of precision and int8 calibration."""
    parser.add_argument(
        "--precision", choices=PRECISIONS,
        help="savedmodel/hub: fp32 (default); bf16 (bf16 weights; norms, "
             "softmax, outputs fp32; fast with AVX512_BF16/AMX, emulated elsewhere); "
             "int8 (int8 encoder matmuls on VNNI/AMX-INT8; results change "
             "slightly); auto (bf16 where this CPU has it, never int8)")
    parser.add_argument(
        "--calibration", type=int, metavar="N",
        help="int8 of a run: smooth the outlier channels its matmuls see "
             f"on N of its training examples (default {CALIBRATION_EXAMPLES}"
             "; 0: none)")
    parser.add_argument("--calibration-texts", metavar="FILE",
                        help="int8: calibrate on these texts (one per line)")


# How many of a run's training examples calibrate an int8 export.
CALIBRATION_EXAMPLES = 256
CALIBRATION_BATCH = 32


def quantize(model, precision, spec=None, vocab=None, examples=0,
             texts_file=None, log=print):
    """`model` (a task model, a pre-trainer or an encoder) with its
    encoder's matmuls on int8 weights when `precision` is `int8`,
    calibrated as `calibration(model, spec, vocab, examples, texts_file)`
    says. Returns what goes into the export's `bert_tf.json` (None unless
    int8)."""
    if precision != "int8":
        return None
    encoder = getattr(model, "encoder", model)
    seen = encoder.to_int8(calibration(model, spec, vocab, examples,
                                       texts_file, log))
    # The int8 weights are constants, not Keras weights: counted here.
    count = sum(getattr(owner, attribute).kernel_int8.size
                for block in encoder.transformer_layers
                for owner, attribute in block.int8_matmuls())
    log(f"int8: {count:,} matmul weights in int8")
    if not seen:
        log("int8: not calibrated; each matmul's input is quantized per "
            "call by its own range. --calibration-texts FILE (a few hundred "
            "of your texts) smooths outlier channels first: MiniLM "
            "embeddings then kept a cosine of 0.987 or more to fp32's, "
            "against 0.962")
        return {"calibrated": False}
    import numpy as np

    largest = max(seen, key=seen.get)
    log(f"int8: calibrated {len(seen)} matmuls; largest input "
        f"{seen[largest]:.1f} ({largest}), median "
        f"{float(np.median(list(seen.values()))):.1f}; outlier channels "
        "smoothed into the weights")
    return {"calibrated": True, "largest_input": round(seen[largest], 3),
            "largest_input_matmul": largest}


def calibration(model, spec, vocab, examples=CALIBRATION_EXAMPLES,
                texts_file=None, log=print):
    """The `calibrate` function of an int8 export: the task model over
    `examples` of its run's own training examples (a task's typed
    `spec`), or the encoder over the lines of `texts_file`; None when
    neither is asked for."""
    import tensorflow as tf

    from bert_tf import tasks
    from bert_tf.storage import GPath
    from bert_tf.text.preprocessor import BertPreprocessor

    if texts_file is not None:
        texts = [line.strip() for line in GPath(texts_file).read_text(
            errors="replace").splitlines() if line.strip()]
        if not texts:
            raise ValueError(f"--calibration-texts {texts_file}: no "
                             "non-blank line to calibrate on.")
        encoder = getattr(model, "encoder", model)
        seq_length = spec.seq_length if dataclasses.is_dataclass(spec) \
            else spec.get("seq_length", 128)
        pre = BertPreprocessor(vocab, seq_length)
        log(f"int8: calibrating on {len(texts)} texts of {texts_file}")
        return lambda: [encoder(pre(tf.constant(texts[i:i + 32])))
                        for i in range(0, len(texts), 32)]
    if not examples or not dataclasses.is_dataclass(spec):
        return None
    task = tasks.get_kind(spec.kind)(spec)
    try:
        data = task.load_data(spec)
    except (OSError, ValueError) as error:
        raise ValueError(f"int8 calibration reads the run's training data "
                         f"and could not: {error} Pass --calibration 0 "
                         "(no calibration) or --calibration-texts FILE."
                         ) from None
    batches = task.train_dataset(data, vocab, CALIBRATION_BATCH, seed=0).take(
        -(-examples // CALIBRATION_BATCH))
    log(f"int8: calibrating on {examples} training examples of "
        f"{spec.name}")
    # (features, labels[, weights]) batches: the model sees the features.
    return lambda: [model(batch[0], training=False) for batch in batches]


__all__ = ["POLICIES", "PRECISIONS", "calibration", "quantize", "resolve",
           "warn_if_emulated", "cpu_int8_flags"]
