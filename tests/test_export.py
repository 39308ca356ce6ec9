"""Export and serving: the SavedModel with tokenization in the graph, read
back by a fresh Python process and by a C program on the TF C API, its op
audit, warm-up records, hostile inputs, and `bert-tf predict`."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from conftest import (assert_bf16_export_agrees, assert_int8_export_agrees,
                      assert_trimmed_matches_fixed_length, save_pair_classifier)

from bert_tf import cli
from bert_tf.serving import export as export_lib
from bert_tf.serving import runtime
from bert_tf.tasks.classification.task import WARMUP_TEXTS, load_classifier
from bert_tf.precision import cpu_bf16_flags, cpu_int8_flags
from bert_tf.text.preprocessor import BertPreprocessor

ROOT = Path(__file__).resolve().parent.parent
TEXTS = ["the film was good and long", "the film was awful", "", "dull"]
# Packing is dense (`pack_dense`): no ragged trimmer.
TF_TEXT_OPS = {"FastBertNormalize", "FastWordpieceTokenizeWithOffsets",
               "NormalizeUTF8"}


@pytest.fixture(scope="module")
def exported(toy_run, tmp_path_factory):
    directory, _ = toy_run
    out = tmp_path_factory.mktemp("export") / "toy" / "1"
    lines = []
    report = export_lib.export_model(directory / "run", out,
                                     log=lines.append, server_config=True)
    return out, report, lines, directory / "run"


def reference(run_dir, texts):
    """The in-memory model on the same strings (the training code path)."""
    model, spec, vocab = load_classifier(run_dir)
    pre = BertPreprocessor(vocab, spec.seq_length,
                           lower_case=spec.lower_case)
    inputs = pre(tf.constant(texts))
    logits = model(inputs, training=False).numpy()
    encoded = model.encoder(inputs, training=False)
    return {"logits": logits, "probabilities": tf.nn.softmax(logits).numpy(),
            "label": [spec.labels[i] for i in logits.argmax(-1)],
            "inputs": {k: v.numpy() for k, v in inputs.items()},
            "pooled_output": encoded["pooled_output"].numpy()}


@pytest.mark.slow
def test_export_layout_and_report(exported):
    out, report, lines, _ = exported
    for name in ("saved_model.pb", "variables/variables.index",
                 "assets/vocab.txt", "assets.extra/tf_serving_warmup_requests",
                 "assets.extra/signature_tensors.txt"):
        assert (out / name).is_file(), name
    assert not out.with_name("1.partial").exists()
    text = "\n".join(lines)
    assert "serving_default(text: string[None]) -> label: string[None], " \
        "logits: float32[None, 2], probabilities: float32[None, 2]" in text
    assert "preprocess(text: string[None]) -> input_mask: int32[None, 16]" \
        in text
    assert "encode(text: string[None]) -> pooled_output: float32[None, 32]" \
        in text
    assert "; fp32, " in text and " parameters; classification" in text
    assert set(report["ops"]["tf_text"]) == TF_TEXT_OPS
    config = (out.parent.parent / "models.config").read_text()
    assert 'name: "toy"' in config and 'base_path: "/models/toy"' in config
    with pytest.raises(ValueError, match="already exists"):
        export_lib.export_model(exported[3], out, log=lambda *a: None)
    with pytest.raises(ValueError, match="numeric version"):
        export_lib.export_model(exported[3], out.parent / "latest",
                                     log=lambda *a: None)


@pytest.mark.slow
def test_op_audit_core_and_tf_text_only(exported):
    out = exported[0]
    ops = export_lib.audit_ops(out)
    assert not set(export_lib.FORBIDDEN_OPS) & set(ops["core"])
    assert set(ops["tf_text"]) == TF_TEXT_OPS
    assert "MatMul" in ops["core"] and "Softmax" in ops["core"]
    loaded = export_lib.load_exported(out)
    for name, function in loaded.signatures.items():
        for key, spec in function.structured_outputs.items():
            assert isinstance(spec, tf.Tensor) or isinstance(
                spec, tf.TensorSpec), (name, key, type(spec))
            assert not isinstance(spec, tf.RaggedTensorSpec)


FRESH_PROCESS = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401 (the tf-text ops)
loaded = tf.saved_model.load(sys.argv[1])
texts = json.loads(sys.argv[2])
outputs = {}
for name in ("serving_default", "preprocess", "encode"):
    result = loaded.signatures[name](text=tf.constant(texts))
    for key, value in result.items():
        value = value.numpy()
        outputs[key] = ([v.decode() for v in value] if value.dtype == object
                        else value.tolist())
assert not [m for m in sys.modules if m.startswith("bert_tf")]
print(json.dumps(outputs))
"""


@pytest.mark.slow
def test_fresh_process_reproduces_in_memory_model(exported):
    out, _, _, run_dir = exported
    # Served as `bert-tf predict` serves: oneDNN keeps its reordered weights.
    result = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS, str(out), json.dumps(TEXTS)],
        capture_output=True, text=True, check=True, timeout=300,
        env={**os.environ, runtime.FROZEN_WEIGHTS: "1"})
    served = json.loads(result.stdout.strip().splitlines()[-1])
    ref = reference(run_dir, TEXTS)
    np.testing.assert_allclose(served["probabilities"], ref["probabilities"],
                               atol=1e-5, rtol=0)
    np.testing.assert_allclose(served["logits"], ref["logits"], atol=1e-5,
                               rtol=0)
    assert served["label"] == ref["label"]
    for key, value in ref["inputs"].items():
        np.testing.assert_array_equal(served[key], value)
    np.testing.assert_allclose(served["pooled_output"], ref["pooled_output"],
                               atol=1e-5, rtol=0)


def _compile_serving_check(tmp_path):
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler on this machine")
    tf_dir = Path(tf.__file__).parent
    binary = tmp_path / "serving_check"
    subprocess.run(
        [compiler, "-O1", "-o", str(binary),
         str(ROOT / "export" / "serving_check.c"), f"-I{tf_dir}/include",
         f"-L{tf_dir}", "-l:libtensorflow_cc.so.2",
         "-l:libtensorflow_framework.so.2", f"-Wl,-rpath,{tf_dir}"],
        check=True, capture_output=True, timeout=300)
    return binary


def run_serving_check(export_dir, texts, tmp_path):
    """stdout lines of the C API program (export/serving_check.c) serving
    `texts` from `export_dir`, with no Python in the serving path."""
    binary = _compile_serving_check(tmp_path)
    libraries = [a for lib in export_lib.tf_text_op_libraries()
                 for a in ("-l", str(lib))]
    result = subprocess.run(
        [str(binary), *libraries, str(export_dir), *texts],
        capture_output=True, text=True, timeout=300,
        env={"TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()


@pytest.mark.slow
def test_c_api_program_serves_without_python(exported, tmp_path):
    out, _, _, run_dir = exported
    binary = _compile_serving_check(tmp_path)
    libraries = [a for lib in export_lib.tf_text_op_libraries()
                 for a in ("-l", str(lib))]
    result = subprocess.run(
        [str(binary), *libraries, str(out), *TEXTS], capture_output=True,
        text=True, timeout=300, env={"TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, result.stderr
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    ref = reference(run_dir, TEXTS)
    assert [r[0] for r in rows] == ref["label"]
    probabilities = np.array([[float(p) for p in r[1].split()] for r in rows])
    np.testing.assert_allclose(probabilities, ref["probabilities"],
                               atol=1e-5, rtol=0)


MIXED_BATCHES = """
import ctypes, json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401 (the tf-text ops)
serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
texts = json.loads(sys.argv[2])
batches = [texts[:1], texts * 8, texts[:1], texts * 40]
for batch in batches + batches:
    serve(text=tf.constant(batch))
from tensorflow.python.util import _pywrap_util_port
ctypes.CDLL(None).fflush(None)
print("oneDNN " + ("on" if _pywrap_util_port.IsMklEnabled() else "off"))
print("-- warm --", flush=True)
labels = []
for batch in batches:
    labels.append([v.decode() for v in serve(text=tf.constant(batch))[
        "label"].numpy()])
ctypes.CDLL(None).fflush(None)
print(json.dumps(labels), flush=True)
"""


@pytest.mark.slow
def test_fp32_export_keeps_reordered_weights_across_batch_sizes(exported):
    """An fp32 export runs its encoder in one copy per row class, so a
    process serving it with oneDNN's frozen weights reorders each weight
    once, whatever mix of batch sizes comes (one kernel, one layout)."""
    out, _, _, run_dir = exported
    info = json.loads((out / "assets.extra" / "bert_tf.json").read_text())
    assert info["row_classes"] == [7, 81]
    assert info["matmul_parts"] == 1  # a tiny encoder: its matmuls whole
    assert runtime.keeps_reordered_weights(info)
    result = subprocess.run(
        [sys.executable, "-c", MIXED_BATCHES, str(out), json.dumps(TEXTS)],
        capture_output=True, text=True, check=True, timeout=300,
        env={**os.environ, runtime.FROZEN_WEIGHTS: "1", "ONEDNN_VERBOSE": "1"})
    warm, served = result.stdout.split("-- warm --\n")
    matmuls = [line for line in served.splitlines()
               if ",inner_product," in line or ",matmul," in line]
    weight_reorders = [line for line in served.splitlines()
                       if ",reorder," in line and ":blocked:AB" in line]
    # TensorFlow runs fp32 matmuls on oneDNN by default only on CPUs with
    # AVX-512 VNNI, BF16 or AMX; elsewhere (AVX2) on Eigen, reordering no
    # weights either.
    assert matmuls or "oneDNN off" in warm, warm[-300:]
    assert not weight_reorders, weight_reorders[:3]
    labels = json.loads(served.strip().splitlines()[-1])
    want = reference(run_dir, TEXTS)["label"]
    assert labels == [want[:1], want * 8, want[:1], want * 40]


HOSTILE = [
    b"",
    b"   \t\n  ",
    " ".join(["the film was good"] * 2500).encode(),  # 10,000 words
    b"invalid \xff\xfe utf-8 \xc3\x28 bytes",
    b"nul\x00inside",
    "emoji \U0001F600\U0001F3AC\U0001F44D".encode(),
    "\u4e2d\u6587\u7535\u5f71\u5f88\u597d".encode(),
    "\u0647\u0630\u0627 \u0641\u064a\u0644\u0645 \u202e\u0631\u0627\u0626\u0639"
    .encode(),
    b"ctrl\x01\x02\x1b[31m\x7f\x85 chars",
]


@pytest.mark.slow
def test_hostile_inputs_through_the_export(exported):
    loaded = export_lib.load_exported(exported[0])
    serve = loaded.signatures["serving_default"]
    pre = loaded.signatures["preprocess"]
    batch = tf.constant(HOSTILE)
    outputs = serve(text=batch)
    probabilities = outputs["probabilities"].numpy()
    assert probabilities.shape == (len(HOSTILE), 2)
    assert np.isfinite(probabilities).all()
    np.testing.assert_allclose(probabilities.sum(1), 1.0, atol=1e-5)
    # Each one alone gives the same answer as inside the mixed batch.
    for i, text in enumerate(HOSTILE):
        alone = serve(text=tf.constant([text]))["probabilities"].numpy()
        np.testing.assert_allclose(alone[0], probabilities[i], atol=1e-5)
    # Over-long text keeps its first seq_length - 2 pieces.
    ids = pre(text=batch)["input_word_ids"].numpy()
    mask = pre(text=batch)["input_mask"].numpy()
    assert mask[2].sum() == 16 and ids[2][-1] == 3  # ... [SEP]
    short = pre(text=tf.constant([b"the film was good the film was good "
                                  b"the film was good the film was"]))
    np.testing.assert_array_equal(ids[2], short["input_word_ids"][0])
    assert mask[0].sum() == 2 and mask[1].sum() == 2  # [CLS] [SEP]
    assert serve(text=tf.constant([], tf.string))["label"].shape == (0,)


@pytest.mark.slow
def test_wrong_inputs_are_rejected_with_clear_messages(exported):
    serve = export_lib.load_exported(exported[0]).signatures[
        "serving_default"]
    with pytest.raises(TypeError, match="missing a required argument: "
                                        "'text'"):
        serve()
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="expected to be a string tensor but is a int32"):
        serve(text=tf.constant([1, 2]))
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"Shape of tensor text \[\] is not compatible"):
        serve(text=tf.constant("a bare string"))
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"text \[1,2\] is not compatible"):
        serve(text=tf.constant([["a", "b"]]))


def _read_varint(data, i):
    value = shift = 0
    while True:
        byte = data[i]
        value |= (byte & 0x7F) << shift
        i, shift = i + 1, shift + 7
        if byte < 0x80:
            return value, i


def _fields(data):
    """{field number: [payload bytes]} of a message's length-delimited
    fields (an independent reader of the hand-written protos)."""
    fields, i = {}, 0
    while i < len(data):
        key, i = _read_varint(data, i)
        assert key & 7 == 2
        length, i = _read_varint(data, i)
        fields.setdefault(key >> 3, []).append(data[i:i + length])
        i += length
    return fields


@pytest.mark.slow
def test_warmup_requests_are_prediction_logs(exported):
    out = exported[0]
    records = list(tf.data.TFRecordDataset(
        str(out / "assets.extra" / "tf_serving_warmup_requests")))
    # The examples, one filler per length bucket (8 and 16), the largest
    # batch.
    assert len(records) == len(WARMUP_TEXTS) + 3
    loaded = export_lib.load_exported(out)
    for record, text in zip(records, WARMUP_TEXTS):
        predict_log = _fields(record.numpy())[6][0]  # PredictionLog.predict_log
        request = _fields(_fields(predict_log)[1][0])  # PredictLog.request
        spec = _fields(request[1][0])
        assert spec[1] == [b"toy"] and spec[3] == [b"serving_default"]
        entry = _fields(request[2][0])  # inputs map entry
        assert entry[1] == [b"text"]
        proto = tf.make_tensor_proto([""])
        proto.ParseFromString(entry[2][0])
        value = tf.make_ndarray(proto)
        assert value.tolist() == [text.encode()]
        result = loaded.signatures["serving_default"](text=tf.constant(value))
        assert result["label"].shape == (1,)


@pytest.mark.slow
def test_trimmed_graph_answers_like_the_fixed_length_graph(exported,
                                                          tmp_path):
    out, _, lines, run_dir = exported
    assert "sequence lengths 8, 16" in "\n".join(lines)
    batching = (out.parent.parent / "batching_parameters.txt").read_text()
    assert "max_batch_size { value: 32 }" in batching
    assert "allowed_batch_sizes: 1\n" in batching
    long_text = "the film was good " * 10
    requests = [{"text": [t]} for t in TEXTS + [long_text]]
    requests.append({"text": TEXTS + [long_text]})
    assert_trimmed_matches_fixed_length(run_dir, out, tmp_path, requests)


@pytest.mark.slow
def test_bf16_export_agrees_with_fp32(exported, tmp_path):
    out, _, _, run_dir = exported
    requests = [{"text": TEXTS}, {"text": HOSTILE}]
    shares = assert_bf16_export_agrees(run_dir, out, tmp_path, requests)
    assert shares == {"label": 1.0}
    # `bert-tf predict`, its own process, serves a bf16 export with oneDNN
    # keeping its weights reordered (blocked layouts; bert_tf.serving.runtime).
    env = {k: v for k, v in os.environ.items() if k != runtime.FROZEN_WEIGHTS}
    result = subprocess.run(
        [sys.executable, "-m", "bert_tf.cli", "predict", "--model",
         str(tmp_path / "bf16" / "1"), *TEXTS], capture_output=True,
        text=True, check=True, timeout=300, env={**env, "ONEDNN_VERBOSE": "1"})
    lines = result.stdout.splitlines()
    if cpu_bf16_flags():  # elsewhere oneDNN emulates bf16 its own way
        assert any(",inner_product," in line and "wei:bf16:a:blocked:AB"
                   in line for line in lines
                   if line.startswith("onednn_verbose"))
    labels = [line.split("\t")[0] for line in lines
              if not line.startswith("onednn_verbose")]
    want = export_lib.predict_texts(export_lib.load_exported(out), TEXTS)
    assert labels == [v.decode() for v in want["label"]]


def test_bf16_export_holds_split_kernels_once_and_teaches(exported,
                                                         tmp_path,
                                                         monkeypatch):
    """A bf16 export holds each block kernel as its two slices (the
    query/key/value kernel's head groups, the output layers' row slices,
    the intermediate's column slices; the served graph runs them side by
    side), not beside the whole kernel; a teacher read from the export
    gets the kernels back whole."""
    from bert_tf import precision
    from bert_tf.distill.teacher import teacher_of

    # Exports split from MiniLM's or BERT-Base's width; the tiny model is
    # split here.
    monkeypatch.setattr(precision, "split_from_hidden", lambda *a: 0)
    _, _, _, run_dir = exported
    out = tmp_path / "bf16" / "1"
    export_lib.export_model(run_dir, out, log=lambda *a: None,
                            precision="bf16")
    names = [v.name for v in export_lib.load_exported(out).model_variables]
    for part in ("_part", "_rows", "_heads"):
        halves = [n for n in names if part in n]
        assert halves and len(halves) % 2 == 0
        assert all(n.replace(f"{part}0", f"{part}1") in names
                   and n.replace(f"{part}0", "") not in names
                   for n in halves if f"{part}0" in n)
    assert all("/output_dense/" in n for n in names if "_rows" in n)
    assert all("/qkv/" in n for n in names if "_heads" in n)
    model, _, _ = load_classifier(run_dir)
    _, teacher, _, _ = teacher_of(out)
    want = {v.path: v.numpy() for v in model.variables}
    kernels = [v for v in teacher.variables if v.path.endswith("kernel")
               and "transformer_layer" in v.path]
    assert kernels
    for v in kernels:  # the run's float32 kernels, rounded to bf16
        np.testing.assert_allclose(
            np.asarray(v.numpy(), "float32"), want[v.path], rtol=1e-2,
            atol=1e-2)


def onednn_int8_matmuls(stdout):
    """The oneDNN verbose lines of int8 matmuls (u8 activations, s8
    weights) in a process's stdout."""
    return [line for line in stdout.splitlines()
            if line.startswith("onednn_verbose") and ",inner_product," in line
            and "src:u8" in line and "wei:s8" in line]


@pytest.mark.slow
def test_int8_export_agrees_with_fp32(exported, tmp_path):
    out, _, _, run_dir = exported
    requests = [{"text": TEXTS}, {"text": HOSTILE}]
    shares = assert_int8_export_agrees(run_dir, out, tmp_path, requests,
                                       atol=2e-2)
    assert shares == {"label": 1.0}
    int8 = tmp_path / "int8" / "1"
    empty = export_lib.load_exported(int8).signatures["serving_default"](
        text=tf.constant([], tf.string))
    assert empty["probabilities"].shape == (0, 2)
    # No Python in the serving path: the C API program serves it too.
    rows = [line.split("\t") for line in run_serving_check(
        int8, TEXTS, tmp_path)]
    want = export_lib.predict_texts(export_lib.load_exported(out), TEXTS)
    assert [r[0] for r in rows] == [v.decode() for v in want["label"]]
    # A fresh process with no quantization package runs oneDNN's int8
    # kernels: VNNI or AMX-INT8 where the CPU has them.
    result = subprocess.run(
        [sys.executable, "-m", "bert_tf.cli", "predict", "--model",
         str(int8), *TEXTS], capture_output=True, text=True, check=True,
        timeout=300, env={**os.environ, "ONEDNN_VERBOSE": "1"})
    kernels = onednn_int8_matmuls(result.stdout)
    assert kernels
    if cpu_int8_flags():
        assert all("vnni" in line or "amx" in line for line in kernels), \
            kernels[:3]
    labels = [line.split("\t")[0] for line in result.stdout.splitlines()
              if not line.startswith("onednn_verbose")]
    assert labels == [v.decode() for v in want["label"]]


def test_auto_never_picks_int8_and_emulated_int8_warns(tmp_path):
    from bert_tf import precision as precision_lib

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("flags\t: avx2 avx512_vnni amx_int8 amx_bf16\n")
    assert precision_lib.resolve("auto", log=lambda *a: None,
                                 cpuinfo=str(cpuinfo)) is precision_lib.BF16
    avx2 = tmp_path / "avx2"
    avx2.write_text("flags\t: avx2 fma\n")
    assert precision_lib.resolve("auto", log=lambda *a: None,
                                 cpuinfo=str(avx2)) is precision_lib.FP32
    with pytest.warns(RuntimeWarning, match="emulates them"):
        assert precision_lib.resolve("int8", cpuinfo=str(avx2)) is \
            precision_lib.INT8


@pytest.mark.slow
def test_pair_and_regression_exports(tmp_path):
    from toy_task import ENCODER, VOCAB

    for labels, name in (([], "sts"), (["no", "yes"], "pairs")):
        best = save_pair_classifier(tmp_path / name / "best", labels,
                                    ENCODER, VOCAB)
        out = tmp_path / "export" / name / "3"
        export_lib.export_model(best, out, log=lambda *a: None,
                                server_config=True)
        loaded = export_lib.load_exported(out)
        result = export_lib.predict_texts(
            loaded, ["the film was good", "bad"], ["the film", "dull film"])
        pre = loaded.signatures["preprocess"](
            text=tf.constant(["the film was good"]),
            text_b=tf.constant(["the film"]))
        assert pre["input_type_ids"].numpy()[0].tolist() == \
            [0] * 6 + [1] * 3 + [0] * 3
        if labels:
            assert result["probabilities"].shape == (2, 2)
        else:
            assert result["score"].shape == (2,) and "label" not in result
            np.testing.assert_allclose(result["score"],
                                       result["logits"][:, 0])
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match="same number of strings"):
            loaded.signatures["serving_default"](
                text=tf.constant(["a", "b"]), text_b=tf.constant(["a"]))
    config = (tmp_path / "export" / "models.config").read_text()
    assert config.count("config {") == 2


@pytest.mark.slow
def test_predict_cli(exported, tmp_path, capsys):
    out = exported[0]
    (tmp_path / "in.txt").write_text("the film was great\nawful\n")
    assert cli.main(["predict", "--model", str(out), "the film was good",
                     "--input", str(tmp_path / "in.txt")]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3
    label, probability, text = lines[0].split("\t")
    assert label in ("negative", "positive") and 0.5 <= float(
        probability) <= 1 and text == "the film was good"
    assert cli.main(["predict", "--model", str(tmp_path / "nope"), "x"]) == 2
    assert "is not a SavedModel" in capsys.readouterr().err
    # A classifier takes no --question (that is a span_qa export's flag).
    assert cli.main(["predict", "--model", str(out), "--question",
                     "who?"]) == 2
    err = capsys.readouterr().err
    assert "--question: not a flag of a classification model" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_rest_and_grpc_client_requests(exported):
    """The client's REST (row and columnar JSON) and gRPC requests, read as
    TF Serving reads them, give the direct call's answer."""
    from serving_requests import answers, assert_same_answers
    out, _, _, run_dir = exported
    direct = assert_same_answers(answers(out, {"text": TEXTS}))
    assert [label.decode() for label in direct["label"]] == \
        reference(run_dir, TEXTS)["label"]


@pytest.mark.slow
def test_an_export_writes_outside_out_only_where_asked(tmp_path,
                                                       monkeypatch):
    """`--out ~/m/1`: nothing in HOME but m/1 (and m); `--server-config`
    writes models.config and batching parameters in m, later exports keep
    that one up to date, a models.config not written by an export is
    left alone, and a folder's name cannot add entries."""
    from bert_tf.models.encoder import BertEncoder
    from bert_tf.tasks.classification.model import BertClassifier
    from bert_tf.text.vocab import Vocab
    from toy_task import VOCAB as TOKENS

    VOCAB = Vocab(tuple(TOKENS))
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))

    def export(out, **kwargs):
        model = BertClassifier(BertEncoder(
            vocab_size=len(VOCAB.tokens), hidden_size=16, num_layers=1,
            num_heads=2, intermediate_size=32), 2)
        lines = []
        export_lib.export_keras_model(
            model, Path(os.path.expanduser(out)), vocab=VOCAB,
            log=lines.append, labels=["no", "yes"], seq_length=16,
            **kwargs)
        return lines

    lines = export("~/m/1")
    assert sorted(p.name for p in home.iterdir()) == ["m"]
    assert sorted(p.name for p in (home / "m").iterdir()) == ["1"]
    assert f"wrote nothing outside {home / 'm' / '1'}" in lines[-1]
    models = home / "models"
    with pytest.raises(ValueError, match="--server-config .*: models.config "
                                         "lists the models under its own"):
        export(models / "a" / "1", server_config=str(home))
    export(models / "a" / "1", server_config=str(models))
    assert sorted(p.name for p in models.iterdir()) == [
        "a", "batching_parameters.txt", "models.config"]
    # The root holds our models.config: a later export keeps it up to
    # date unasked; a quote in a folder's name is escaped.
    export(models / 'b"}' / "1")
    config = (models / "models.config").read_text()
    assert config.count("config {") == 2
    assert r'name: "b\"}"' in config, config
    assert sorted(p.name for p in home.iterdir()) == ["m", "models"]
    foreign = tmp_path / "srv"
    (foreign).mkdir()
    (foreign / "models.config").write_text("model_config_list {}\n")
    export(foreign / "s" / "1")
    assert (foreign / "models.config").read_text() == \
        "model_config_list {}\n"
    assert not (foreign / "batching_parameters.txt").exists()
