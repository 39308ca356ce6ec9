"""What an export does to its model for its precision (chosen in
`bert_tf/precision.py`): int8 quantization of the encoder's matmuls,
calibrated on the run's own training examples or on given texts, and the
served form each export traces, with the fp32 graph copy per row class
that keeps oneDNN's reordered weights.
"""

import dataclasses

from bert_tf.precision import (BF16_FLAGS, CALIBRATION_BATCH,
                               CALIBRATION_EXAMPLES, cpu_bf16_flags,
                               cpu_flags, cpu_int8_flags)

def served(model, precision):
    """`model` (a task model, a pre-trainer or an encoder) as its export
    in `precision` (a `bert_tf.precision.Precision`) traces it
    (`bert_tf.models.served.ServedModel`). fp32 runs its encoder in one
    graph copy per row class, so that its served matmuls may keep their
    reordered weights (`bert_tf.serving.runtime`); its block matmuls run
    in `Precision.matmul_parts_for` its width column slices."""
    from bert_tf.models.chunked import ROW_CLASS_BOUNDS
    from bert_tf.models.served import ServedModel

    hidden = getattr(model, "encoder", model).config.hidden_size
    return ServedModel(model, ROW_CLASS_BOUNDS if precision.row_classes
                       else (), precision.matmul_parts_for(hidden))


def quantize(model, precision, spec=None, vocab=None, examples=0,
             texts_file=None, log=print):
    """`model` (a task model, a pre-trainer or an encoder) with its
    encoder's matmuls on int8 weights when `precision` is `int8`,
    calibrated as `calibration(model, spec, vocab, examples, texts_file)`
    says. Returns what goes into the export's `bert_tf.json` (None unless
    int8)."""
    if not precision.quantized:
        return None
    import tensorflow as tf

    from bert_tf.layers import int8 as int8_lib

    if not int8_lib.available():
        raise ValueError(
            f"--precision int8: this TensorFlow ({tf.__version__}) has no "
            f"oneDNN int8 matmul ({int8_lib.QUANTIZED_MATMUL}); export "
            "fp32 or bf16, or use an x86 Linux build of TensorFlow.")
    encoder = getattr(model, "encoder", model)
    attention = attention_dtype(log)
    limit = weight_limit(log)
    seen = encoder.to_int8(calibration(model, spec, vocab, examples,
                                       texts_file, log), attention=attention,
                           weight_limit=limit)
    record = {"attention": "bf16" if attention == "bfloat16" else "fp32",
              "weight_bits": int(limit).bit_length() + 1}
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
        return {"calibrated": False, **record}
    import numpy as np

    largest = max(seen, key=seen.get)
    log(f"int8: calibrated {len(seen)} matmuls; largest input "
        f"{seen[largest]:.1f} ({largest}), median "
        f"{float(np.median(list(seen.values()))):.1f}; outlier channels "
        "smoothed into the weights")
    return {"calibrated": True, "largest_input": round(seen[largest], 3),
            "largest_input_matmul": largest, **record}


def attention_dtype(log=print, cpuinfo="/proc/cpuinfo"):
    """The dtype an int8 export's attention runs in: `bfloat16` where this
    CPU has AVX512_BF16 or AMX (scores, softmax and context in bf16; BERT-
    Base, 32 RT sentences on 2 AMX cores: see docs/benchmarks.md), else
    `float32`, where bf16 would be emulated.

    Examples:
        >>> attention_dtype(log=lambda line: None, cpuinfo="/nonexistent")
        'float32'
    """
    flags = cpu_bf16_flags(cpuinfo)
    chosen = "bfloat16" if flags else "float32"
    log(f"int8: attention in {'bf16' if flags else 'fp32'} " + (
        f"(this CPU has {', '.join(flags)})" if flags else
        "(this CPU has neither AVX512_BF16 nor AMX)"))
    return chosen


def weight_limit(log=print, cpuinfo="/proc/cpuinfo"):
    """The largest int8 weight code of an int8 export: 127 where this CPU
    has VNNI or AMX-INT8, else 63. Without VNNI oneDNN's int8 kernels add
    each pair of uint8 x int8 products in 16 bits (`vpmaddubsw`), which
    8-bit weights overflow; 7-bit weights cannot (on 2 AVX2 EPYC cores, a
    [25, 768] x [768, 768] matmul of one-sided inputs: largest error 0.54
    with 8-bit weights, 0.14 with 7-bit).

    Examples:
        >>> weight_limit(log=lambda line: None, cpuinfo="/nonexistent")
        63
    """
    flags = cpu_int8_flags(cpuinfo)
    log("int8: " + (f"8-bit weights (this CPU has {', '.join(flags)})"
                    if flags else "7-bit weights (this CPU has no VNNI or "
                    "AMX-INT8: its int8 kernels add products in 16 bits)"))
    return 127 if flags else 63


def check_attention_runs_here(int8_record, where, cpuinfo="/proc/cpuinfo"):
    """Refuses an int8 export whose attention runs in bf16 (`int8_record`:
    its `bert_tf.json`'s `int8`) on a CPU without AVX-512, where oneDNN's
    int8 kernel with a bf16 output aborts the process at the first request
    (2 AVX2 EPYC cores, TF 2.20); warns where it has AVX-512 but neither
    AVX512_BF16 nor AMX, where bf16 is emulated and slower.

    Raises:
        ValueError: one line naming the export and the rule.
    """
    import warnings

    if (int8_record or {}).get("attention") != "bf16":
        return
    flags = cpu_flags(cpuinfo)
    if any(flag in flags for flag in BF16_FLAGS):
        return
    if flags and "avx512f" not in flags:
        raise ValueError(
            f"{where}: its int8 export runs the attention in bf16, which "
            "needs AVX-512: on this CPU oneDNN's int8 kernel with a bf16 "
            "output aborts the process (TF Serving too). Export it again "
            "on this machine (the attention is then fp32).")
    warnings.warn(
        f"{where}: its int8 export runs the attention in bf16, but this CPU "
        "has neither AVX512_BF16 nor AMX: bf16 is emulated here and slower. "
        "Export it again on this machine (the attention is then fp32).",
        RuntimeWarning, stacklevel=3)


def warn_if_attention_emulated(int8_record, where, cpuinfo="/proc/cpuinfo"):
    """Deprecated: `check_attention_runs_here`, which also refuses an
    export that would abort the process."""
    import warnings

    warnings.warn("bert_tf.serving.quantize.warn_if_attention_emulated is "
                  "now check_attention_runs_here", DeprecationWarning,
                  stacklevel=2)
    check_attention_runs_here(int8_record, where, cpuinfo)


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


__all__ = ["attention_dtype", "calibration", "check_attention_runs_here",
           "quantize", "served", "warn_if_attention_emulated",
           "weight_limit"]
