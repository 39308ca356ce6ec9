"""Export precision: `auto` follows the CPU's bf16 flags and says what it
chose; a bf16 export loaded where bf16 is emulated warns, naming the flag;
bf16 keeps layer norms and every output in float32."""

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.layers.base import norm_policy
from bert_tf.models.encoder import BertEncoder
from bert_tf import precision


def _cpuinfo(tmp_path, flags):
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / "cpuinfo"
    path.write_text(f"processor\t: 0\nflags\t\t: fpu sse2 avx2 {flags}\n\n")
    return str(path)


def test_auto_follows_the_cpu_flags(tmp_path):
    lines = []
    assert str(precision.resolve("auto", lines.append, _cpuinfo(
        tmp_path, "avx512f avx512_bf16"))) == "bf16"
    assert lines == ["precision auto: bf16 (this CPU has avx512_bf16)"]
    assert str(precision.resolve("auto", lines.append,
                                 _cpuinfo(tmp_path, "avx512f"))) == "fp32"
    assert "neither AVX512_BF16 nor AMX" in lines[-1]
    assert str(precision.resolve("auto", lines.append,
                                 _cpuinfo(tmp_path, "amx_bf16"))) == "bf16"
    assert str(precision.resolve("bf16", lines.append,
                             _cpuinfo(tmp_path, ""))) == "bf16"
    with pytest.raises(ValueError, match="--precision fp16: use one of "
                       "fp32, bf16, int8, auto"):
        precision.resolve("fp16")


def test_each_precision_states_what_it_implies(tmp_path):
    """A precision is parsed once and read: its Keras policy, whether it
    quantizes, whether it copies the graph per row class, and the CPU
    flags that make it native."""
    implied = {p.name: (p.policy, p.quantized, p.row_classes,
                        p.native(_cpuinfo(tmp_path, "avx512f")),
                        p.native(_cpuinfo(tmp_path, "amx_bf16 amx_int8")))
               for p in (precision.FP32, precision.BF16, precision.INT8)}
    assert implied == {"fp32": ("float32", False, True, True, True),
                       "bf16": ("bfloat16", False, False, False, True),
                       "int8": ("float32", True, False, False, True)}
    assert precision.Precision.parse("int8") is precision.INT8
    assert precision.Precision.parse(precision.BF16) is precision.BF16


def test_matmul_split_width_is_minilms_on_every_cpu():
    """Block matmuls run in halves from MiniLM's width (384) up, whatever
    the CPU: both kinds measured gain from the second core there."""
    assert precision.split_from_hidden() == 384
    assert [p.matmul_parts_for(width) for width in (256, 384, 768)
            for p in (precision.FP32, precision.BF16, precision.INT8)] == \
        [1, 1, 1, 2, 2, 2, 2, 2, 2]


def test_the_old_cpuinfo_argument_still_works_and_warns(tmp_path):
    """Callers from before 2026-12-07 passed the CPU's flags; the width no
    longer depends on them, and passing them says so instead of failing."""
    info = _cpuinfo(tmp_path / "avx512", "avx512f avx512_bf16")
    with pytest.warns(DeprecationWarning, match="`cpuinfo` is ignored"):
        assert precision.split_from_hidden(info) == 384
    with pytest.warns(DeprecationWarning, match="matmul_parts_for"):
        assert precision.FP32.matmul_parts_for(384, cpuinfo=info) == 2
    assert precision.SPLIT_FROM_HIDDEN_AVX2 == precision.SPLIT_FROM_HIDDEN


def test_int8_weights_are_7_bit_where_the_cpu_lacks_vnni(tmp_path):
    """Without VNNI oneDNN's int8 kernels add pairs of products in 16
    bits, which 8-bit weights overflow: an int8 export made there has
    7-bit weights (said in the log), whose sums stay exact on any CPU."""
    from bert_tf.layers import int8
    from bert_tf.serving import quantize

    lines = []
    assert [quantize.weight_limit(lines.append, _cpuinfo(tmp_path / k, f))
             for k, f in (("vnni", "avx512_vnni"), ("amx", "amx_int8"),
                          ("avx2", ""))] == [127, 127, 63]
    assert lines[0] == "int8: 8-bit weights (this CPU has avx512_vnni)"
    assert lines[2].startswith("int8: 7-bit weights (this CPU has no VNNI")
    rng = np.random.default_rng(0)
    dense = keras.layers.Dense(768, use_bias=False)
    dense.build((None, 768))
    dense.kernel.assign(rng.normal(0, 0.05, (768, 768)).astype("float32"))
    # One-sided inputs: high uint8 codes, the sums that overflow 16 bits.
    x = rng.uniform(-1, 3, (25, 768)).astype("float32")
    layer = int8.Int8Dense.from_dense(dense, np.full(768, -1.0),
                                      np.full(768, 3.0), weight_limit=63)
    assert np.abs(layer.kernel_int8).max() == 63
    error = np.abs(layer(x).numpy() - dense(x).numpy()).max()
    assert error < 0.25, error


def test_int8_attention_follows_the_cpu_flags_and_is_refused_where_it_aborts(
        tmp_path):
    """An int8 export's attention is bf16 where the CPU has native bf16,
    fp32 elsewhere (said in the log). Loading one whose attention is bf16
    is refused in one line on a CPU without AVX-512 (oneDNN aborts the
    process there) and warns on one with AVX-512 but no native bf16."""
    from bert_tf.serving import quantize

    lines = []
    assert quantize.attention_dtype(lines.append, _cpuinfo(
        tmp_path, "avx512_vnni amx_int8 amx_bf16")) == "bfloat16"
    assert quantize.attention_dtype(lines.append, _cpuinfo(
        tmp_path, "avx512_vnni")) == "float32"
    assert lines == ["int8: attention in bf16 (this CPU has amx_bf16)",
                     "int8: attention in fp32 (this CPU has neither "
                     "AVX512_BF16 nor AMX)"]
    with pytest.raises(ValueError, match=r"^export/x/1: its int8 export "
                       "runs the attention in bf16, which needs AVX-512.*"
                       "aborts the process.*Export it again"):
        quantize.check_attention_runs_here(
            {"attention": "bf16"}, "export/x/1", _cpuinfo(tmp_path,
                                                          "avx2 fma"))
    with pytest.warns(RuntimeWarning, match="export/x/1: its int8 export "
                      "runs the attention in bf16.*Export it again"):
        quantize.check_attention_runs_here(
            {"attention": "bf16"}, "export/x/1", _cpuinfo(
                tmp_path, "avx2 avx512f avx512_vnni"))
    with pytest.warns(RuntimeWarning, match="emulated"):  # flags unknown
        quantize.check_attention_runs_here({"attention": "bf16"}, "x",
                                           "/nonexistent")
    with pytest.warns(DeprecationWarning, match="check_attention_runs_here"):
        quantize.warn_if_attention_emulated(None, "x")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for record, flags in (({"attention": "bf16"}, "avx512_bf16"),
                              ({"attention": "fp32"}, "avx2"), (None, "")):
            quantize.check_attention_runs_here(record, "x", _cpuinfo(
                tmp_path, flags))


def test_emulated_bf16_warns_naming_the_flag(tmp_path):
    with pytest.warns(RuntimeWarning, match="--precision bf16.*neither "
                      "AVX512_BF16 nor AMX.*--precision fp32"):
        precision.warn_if_emulated("bf16", "export/x/1",
                                   _cpuinfo(tmp_path, "avx2"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        precision.warn_if_emulated("bf16", "x", _cpuinfo(tmp_path,
                                                         "avx512_bf16"))
        precision.warn_if_emulated("fp32", "x", _cpuinfo(tmp_path, ""))


def test_bf16_encoder_keeps_norms_embeddings_and_residuals_in_float32():
    # The embedding tables stay float32: only gathered, they cost no
    # arithmetic, and rounding them cost RT probabilities up to 1.5e-2
    # (1.1e-2 with float32 tables).
    assert norm_policy("bfloat16") == "float32"
    encoder = BertEncoder.from_preset("bert_tiny", dtype="bfloat16")
    def is_kept(v):
        return "norm" in v.path or "embeddings" in v.path

    kept = [v for v in encoder.weights if is_kept(v)]
    others = [v for v in encoder.weights if not is_kept(v)]
    assert {v.dtype for v in kept} == {"float32"}
    assert any("word_embeddings" in v.path for v in kept)
    assert others and {v.dtype for v in others} == {"bfloat16"}
    ids = np.full((2, 8), 1000, "int32")
    out = encoder({"input_word_ids": ids, "input_mask": np.ones_like(ids),
                   "input_type_ids": np.zeros_like(ids)})
    assert out["sequence_output"].dtype == tf.float32


def test_fp32_encoder_is_unchanged_by_the_norm_policy():
    encoder = BertEncoder.from_preset("bert_tiny")
    assert {v.dtype for v in encoder.weights} == {"float32"}


def test_training_auto_follows_the_hardware(tmp_path):
    from bert_tf.precision import training_policy

    lines = []
    assert training_policy("auto", lines.append, _cpuinfo(
        tmp_path, "avx512_bf16"), accelerator=(False, False)) == "mixed_bfloat16"
    assert lines[-1] == ("mixed_precision auto: mixed_bfloat16 (this CPU "
                         "has avx512_bf16)")
    assert training_policy("auto", lines.append, _cpuinfo(tmp_path, "avx2"),
                           accelerator=(False, False)) == "float32"
    assert training_policy("auto", lines.append, _cpuinfo(tmp_path, "avx2"),
                           accelerator=(True, True)) == "mixed_bfloat16"
    # A V100 or T4 (before Ampere) emulates bf16: float32 there.
    assert training_policy("auto", lines.append, _cpuinfo(tmp_path,
                           "avx512_bf16"), accelerator=(True, False)) == \
        "float32"
    assert lines[-1] == ("mixed_precision auto: float32 (an accelerator "
                         "without native bf16)")
    # On a CPU, narrow encoders stay float32 (slower in bf16, measured).
    assert training_policy("auto", lines.append, _cpuinfo(
        tmp_path, "avx512_bf16"), accelerator=(False, False),
        hidden_size=128) == "float32"
    assert training_policy("auto", lines.append, _cpuinfo(
        tmp_path, "avx512_bf16"), accelerator=(False, False),
        hidden_size=384) == "mixed_bfloat16"
    assert training_policy("mixed_float16", lines.append) == "mixed_float16"
