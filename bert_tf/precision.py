"""Precision by the hardware, for training and for exports alike: bf16 is
fast only on CPUs with AVX512_BF16 or AMX (and on accelerators); elsewhere
oneDNN emulates it, slower than fp32. int8 is fast only with VNNI or
AMX-INT8. `auto` settings in the configs and `bert-tf export --precision`
ask here.

An export's precision: bf16 halves the bytes every matmul reads and, on
CPUs with AVX512_BF16 or AMX, doubles the arithmetic per cycle; an export
records its precision, and loading a bf16 export on a CPU without bf16
warns. int8 quarters the bytes and changes results a little, so `auto`
never picks it; an int8 export on a CPU without VNNI or AMX-INT8 says it
is emulated. What an export does for int8 is `bert_tf/serving/quantize.py`.
"""

import dataclasses
import os
import sys
import warnings

BF16_FLAGS = ("avx512_bf16", "amx_bf16")
# oneDNN's int8 kernels need one of these; elsewhere int8 is emulated.
INT8_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")
# Below this width the casts cost more than bf16 matmuls save on a CPU:
# the demo's RT fine-tuning on 2 AVX512_BF16 cores took 1.1 vs 0.8 minutes
# (H=128, 2 layers) in mixed_bfloat16, but 1.7 vs 1.8 (H=384, MiniLM; 283
# vs 360 ms per step).
MIN_BF16_HIDDEN = 256


def cpu_flags(cpuinfo="/proc/cpuinfo"):
    """This CPU's flags as /proc/cpuinfo lists them (Linux; none where it
    cannot be read).

    Examples:
        >>> cpu_flags("/nonexistent")
        []
    """
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            return next((line.split(":", 1)[1].split() for line in f
                         if line.startswith("flags")), [])
    except OSError:
        return []


def cpu_bf16_flags(cpuinfo="/proc/cpuinfo"):
    """The CPU flags of native bf16 arithmetic this machine has (Linux;
    none where /proc/cpuinfo cannot be read).

    Examples:
        >>> cpu_bf16_flags("/nonexistent")
        []
    """
    flags = cpu_flags(cpuinfo)
    return [flag for flag in BF16_FLAGS if flag in flags]


def cpu_int8_flags(cpuinfo="/proc/cpuinfo"):
    """The CPU flags of native int8 dot products (VNNI, AMX-INT8) this
    machine has; none where /proc/cpuinfo cannot be read.

    Examples:
        >>> cpu_int8_flags("/nonexistent")
        []
    """
    flags = cpu_flags(cpuinfo)
    return [flag for flag in INT8_FLAGS if flag in flags]


ONEDNN_SWITCH = "TF_ENABLE_ONEDNN_OPTS"


def onednn_for_training(flags=None, environ=None, tf_imported=None):
    """Turns TensorFlow's oneDNN rewrites on for a training process on a
    CPU with AVX2 and no AVX-512, where TensorFlow leaves them off: there
    they made pre-training 12-14% faster (BERT-Base b8, L4/H256 b32) and
    fine-tuning 0-6% (docs/benchmarks.md). Serving keeps TensorFlow's
    choice: at batch 1 they did not pay on that CPU.

    Returns the line to log, or None when nothing changed: the variable
    is already set (the user's choice stands), TensorFlow is already
    imported (too late to matter), or the CPU is another kind.
    `flags`: the CPU's (read when None); `environ`: `os.environ` when
    None; `tf_imported`: whether TensorFlow is loaded (looked up when
    None).

    Examples:
        >>> env = {}
        >>> onednn_for_training(["avx2", "fma"], env, False)[:23]
        'oneDNN: on for training'
        >>> env
        {'TF_ENABLE_ONEDNN_OPTS': '1'}
        >>> onednn_for_training(["avx2", "avx512f"], {}, False) is None
        True
        >>> onednn_for_training(["avx2"], {"TF_ENABLE_ONEDNN_OPTS": "0"},
        ...                     False) is None
        True
    """
    environ = os.environ if environ is None else environ
    if tf_imported is None:
        tf_imported = "tensorflow" in sys.modules
    flags = cpu_flags() if flags is None else flags
    if (ONEDNN_SWITCH in environ or tf_imported or "avx2" not in flags
            or "avx512f" in flags):
        return None
    environ[ONEDNN_SWITCH] = "1"
    return (f"oneDNN: on for training ({ONEDNN_SWITCH}=1: this CPU has "
            "AVX2 and no AVX-512, where TensorFlow leaves oneDNN's rewrites "
            "off and pre-training runs 12-14% slower; set "
            f"{ONEDNN_SWITCH}=0 to keep them off)")


def describe_choice(chosen, flags):
    """Why `auto` chose `chosen`, for the log."""
    if flags:
        return f"{chosen} (this CPU has {', '.join(flags)})"
    return (f"{chosen} (this CPU has neither AVX512_BF16 nor AMX: bf16 "
            "would be emulated and slower)")


def accelerator_bf16():
    """(has an accelerator, it computes bf16 natively): a TPU, or GPUs all
    of compute capability 8.0 (Ampere) or later; older GPUs emulate bf16."""
    import tensorflow as tf

    if tf.config.list_logical_devices("TPU"):
        return True, True
    gpus = tf.config.list_physical_devices("GPU")
    capabilities = [tf.config.experimental.get_device_details(gpu).get(
        "compute_capability") or (0, 0) for gpu in gpus]
    return bool(gpus), bool(gpus) and min(capabilities) >= (8, 0)


def training_policy(name, log=print, cpuinfo="/proc/cpuinfo",
                    accelerator=None, hidden_size=None):
    """The Keras mixed-precision policy of a config's `mixed_precision`:
    `auto` is `mixed_bfloat16` on a TPU, an Ampere or later GPU or a CPU
    with native bf16 (there, for encoders at least `MIN_BF16_HIDDEN`
    wide), `float32` otherwise (logged); other names pass through.
    `accelerator`: (present, native bf16), found when None.

    Examples:
        >>> training_policy("float32")
        'float32'
        >>> training_policy("auto", log=lambda line: None, cpuinfo="/nonexistent",
        ...                 accelerator=(False, False))
        'float32'
    """
    if name != "auto":
        return name
    present, native = accelerator_bf16() if accelerator is None \
        else accelerator
    if present:
        chosen = "mixed_bfloat16" if native else "float32"
        log(f"mixed_precision auto: {chosen} (an accelerator "
            f"{'with' if native else 'without'} native bf16)")
        return chosen
    flags = cpu_bf16_flags(cpuinfo)
    if flags and hidden_size is not None and hidden_size < MIN_BF16_HIDDEN:
        log(f"mixed_precision auto: float32 (hidden size {hidden_size} is "
            f"under {MIN_BF16_HIDDEN}: on a CPU bf16 pays only for wider "
            "encoders)")
        return "float32"
    chosen = "mixed_bfloat16" if flags else "float32"
    log("mixed_precision auto: " + describe_choice(chosen, flags))
    return chosen


def resolve_precision(cfg, log=print, hidden_size=None):
    """`cfg` (a pre-training or fine-tuning config) with `mixed_precision:
    auto` replaced by the policy this machine runs fastest for an encoder
    `hidden_size` wide."""
    import dataclasses

    cfg = dataclasses.replace(cfg, mixed_precision=training_policy(
        cfg.mixed_precision, log, hidden_size=hidden_size))
    note = xla_bf16_note(cfg.mixed_precision, cfg.trainer.jit_compile)
    if note:
        log(note)
    return cfg


def xla_bf16_note(policy, jit_compile, accelerator=None):
    """A line saying that XLA slows bf16 training on a CPU, or "".

    XLA's CPU backend does not hand bf16 matmuls to oneDNN's AMX/AVX512_BF16
    kernels, so there it trains slower than the plain graph does
    (`benchmarks/model_throughput.py`, 2 AMX cores: BERT-Base pre-training
    1.65 vs 2.61 sequences/s, L4/H256 22.6 vs 32.4).

    Examples:
        >>> xla_bf16_note("mixed_bfloat16", True, accelerator=(True, True))
        ''
        >>> xla_bf16_note("mixed_bfloat16", True, accelerator=(False, False))[:48]
        'trainer.jit_compile with mixed_bfloat16 on a CPU'
    """
    if policy != "mixed_bfloat16" or not jit_compile:
        return ""
    present, _ = accelerator_bf16() if accelerator is None else accelerator
    if present:
        return ""
    return ("trainer.jit_compile with mixed_bfloat16 on a CPU: XLA does not "
            "use oneDNN's bf16 kernels, so steps run slower than without it "
            "(set trainer.jit_compile: false)")


@dataclasses.dataclass(frozen=True)
class Precision:
    """An export's precision and what it implies: parsed once
    (`Precision.parse`, from `--precision` or an export's `bert_tf.json`),
    then read, never compared as a string.

    Attributes:
        name: as `--precision` and `bert_tf.json` spell it.
        policy: the Keras dtype policy the model is built in: `bfloat16`
            stores the variables as bf16, so no weight is cast per call
            (layer norms stay float32: `bert_tf.layers.base.norm_policy`);
            int8 is built in float32, then its encoder's matmuls are
            quantized (`BertEncoder.to_int8`).
        quantized: the encoder's matmuls become `Int8Dense` layers, which
            may be calibrated (`bert_tf.serving.quantize`).
        row_classes: the served encoder runs in one graph copy per row
            class (`bert_tf.models.served`), so that fp32 matmuls keep
            their reordered weights.
        cpu_flags: the CPU flags that make it native; none: native
            everywhere.
        matmul_parts: the column slices each served block matmul runs
            in (the feed-forward output's: row slices), side by side on
            the inter-op threads
            (`bert_tf.models.split_matmuls.SplitMatmuls`): 2 in every precision,
            since oneDNN's kernels barely use a second core at a text's
            rows (docs/guides/serving.md, "Threads within an op"), for
            encoders at least `SPLIT_FROM_HIDDEN` wide
            (`matmul_parts_for`).
    """

    name: str
    policy: str
    quantized: bool = False
    row_classes: bool = False
    cpu_flags: tuple = ()
    matmul_parts: int = 1

    def __str__(self):
        return self.name

    def matmul_parts_for(self, hidden_size, cpuinfo=None):
        """`matmul_parts` for an encoder of `hidden_size`; 1 below
        `split_from_hidden()`, whose matmuls are too small to gain from
        the second core. `cpuinfo` is ignored since 2026-12-07 (the
        width no longer depends on the CPU) and warns.

        Examples:
            >>> [FP32.matmul_parts_for(width) for width in (768, 384, 256)]
            [2, 2, 1]
        """
        _warn_cpuinfo_ignored(cpuinfo, "Precision.matmul_parts_for")
        return self.matmul_parts \
            if hidden_size >= split_from_hidden() else 1

    def native(self, cpuinfo="/proc/cpuinfo"):
        """Whether this CPU runs it natively (not emulated).

        Examples:
            >>> FP32.native("/nonexistent"), BF16.native("/nonexistent")
            (True, False)
        """
        if not self.cpu_flags:
            return True
        return any(flag in cpu_flags(cpuinfo) for flag in self.cpu_flags)

    @classmethod
    def parse(cls, name, log=print, cpuinfo="/proc/cpuinfo"):
        """The precision `name` names (a `Precision` passes through);
        `auto` is bf16 where the CPU has AVX512_BF16 or AMX, fp32
        otherwise (the choice is logged). int8 on a CPU that emulates it
        warns.

        Examples:
            >>> Precision.parse("fp32").policy
            'float32'
            >>> str(Precision.parse("auto", log=lambda line: None,
            ...                     cpuinfo="/nonexistent"))
            'fp32'
        """
        if isinstance(name, cls):
            return name
        if name not in PRECISIONS:
            raise ValueError(f"--precision {name}: use one of "
                             f"{', '.join(PRECISIONS)}.")
        if name == "auto":
            flags = cpu_bf16_flags(cpuinfo)
            chosen = BF16 if flags else FP32
            log("precision auto: " + describe_choice(chosen.name, flags))
            return chosen
        precision = BY_NAME[name]
        if precision.quantized:
            precision.warn_if_emulated("this export", cpuinfo)
        return precision

    def warn_if_emulated(self, where, cpuinfo="/proc/cpuinfo"):
        """Warns when this CPU emulates it: `where` names the export."""
        if self.native(cpuinfo):
            return
        if self.quantized:
            warnings.warn(
                f"{where}: int8 matmuls need AVX512_VNNI, AVX_VNNI or "
                "AMX-INT8, which this CPU lacks: oneDNN emulates them here, "
                "slower than int8 should be, and an export made on a CPU "
                "with them has 8-bit weights, whose sums can overflow here. "
                "Serve an fp32 export on this machine, or export int8 on it "
                "(7-bit weights).", RuntimeWarning, stacklevel=3)
        else:
            warnings.warn(
                f"{where} was exported with --precision {self.name}, but "
                "this CPU has neither AVX512_BF16 nor AMX: bf16 is emulated "
                "here and slower than fp32. Export it again with --precision "
                "fp32 (or auto) for this machine.", RuntimeWarning,
                stacklevel=3)


# The smallest hidden width whose exports split their block matmuls, on
# every CPU measured. MiniLM-L6 (384) on 2 cores, one thread within an
# op, whole -> split: on an AVX-512 EPYC, batch 1 fp32 9.35 -> 6.53 ms,
# bf16 5.81 -> 4.49, int8 5.11 -> 5.04, batch 32 +57% to +86% (two runs,
# 2026-12-07; when the halves were still concatenated between layers,
# int8 at batch 1 had lost: 1.7 -> 3.2-3.5 ms); on an AVX2 EPYC, fp32
# 13.2 -> 10.5 ms, batch 32 95 -> 166 sentences/s (docs/benchmarks.md).
SPLIT_FROM_HIDDEN = 384
# Its AVX2 value before 2026-12-07, when AVX-512 CPUs split from 768;
# kept for callers of that name, to go with the `cpuinfo` shim below.
SPLIT_FROM_HIDDEN_AVX2 = SPLIT_FROM_HIDDEN


def _warn_cpuinfo_ignored(cpuinfo, where):
    if cpuinfo is not None:
        warnings.warn(
            f"{where}: `cpuinfo` is ignored since 2026-12-07; exports split "
            f"their matmuls from {SPLIT_FROM_HIDDEN} wide on every CPU. "
            "Drop the argument.", DeprecationWarning, stacklevel=3)


def split_from_hidden(cpuinfo=None):
    """The smallest hidden width whose exports split their block matmuls
    (`SPLIT_FROM_HIDDEN`). An export keeps the choice of the code that
    made it: `bert_tf.json` records `matmul_parts`. `cpuinfo` is ignored
    since 2026-12-07 (the width no longer depends on the CPU) and warns.

    Examples:
        >>> split_from_hidden()
        384
    """
    _warn_cpuinfo_ignored(cpuinfo, "split_from_hidden")
    return SPLIT_FROM_HIDDEN


FP32 = Precision("fp32", "float32", row_classes=True, matmul_parts=2)
BF16 = Precision("bf16", "bfloat16", cpu_flags=BF16_FLAGS, matmul_parts=2)
INT8 = Precision("int8", "float32", quantized=True, cpu_flags=INT8_FLAGS,
                 matmul_parts=2)
BY_NAME = {p.name: p for p in (FP32, BF16, INT8)}
PRECISIONS = (*BY_NAME, "auto")


def resolve(precision, log=print, cpuinfo="/proc/cpuinfo"):
    """`Precision.parse` (the name before it, kept for callers)."""
    return Precision.parse(precision, log, cpuinfo)


def warn_if_emulated(precision, where, cpuinfo="/proc/cpuinfo"):
    """Warns when bf16 or int8 (a name or a `Precision`) is set up on a
    CPU that emulates it."""
    precision = BY_NAME.get(precision, precision)
    if isinstance(precision, Precision):
        precision.warn_if_emulated(where, cpuinfo)


def add_precision_arguments(parser):
    """`bert-tf export`'s flags of precision and int8 calibration."""
    parser.add_argument(
        "--precision", choices=PRECISIONS,
        help="savedmodel/hub: fp32 (default); bf16 (bf16 weights and "
             "attention; norms, residuals, outputs fp32; fast with "
             "AVX512_BF16/AMX, emulated elsewhere); "
             "int8 (int8 encoder matmuls on VNNI/AMX-INT8, the attention "
             "in bf16 where this CPU has AVX512_BF16/AMX; results change "
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

