"""Shared fixtures: tiny configs, real weights from the sample cache."""

import os
import re

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from pathlib import Path  # noqa: E402

# The Python processes the tests start import TensorFlow as a base install
# does, without Keras's optional imports of the extras' packages (see
# base_install_site/sitecustomize.py): 2.2 CPU-seconds less per process.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [
    str(Path(__file__).resolve().parent / "base_install_site"),
    os.environ.get("PYTHONPATH")]))

import gc  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

# The independent PyTorch reference outputs (scripts/make_reference_fixtures.py),
# shared with the demo.
FIXTURES = Path(__file__).resolve().parents[1] / "examples" / "reference"
TINY = dict(vocab_size=120, hidden_size=32, num_layers=2, num_heads=2,
            intermediate_size=64, max_position_embeddings=64)
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# The files that take longest (measured), longest first. `make test` hands
# whole files to 3 processes in collection order (--dist loadfile
# --no-loadscope-reorder): long files first, so no long file runs alone at
# the end.
LONGEST_FILES = (
    "test_span_qa.py", "test_trainer.py", "test_notebooks.py",
    "test_resume.py", "test_readme.py", "test_long_document.py",
    "test_storage_faults.py", "test_tagging.py", "test_embeddings.py",
    "test_request_memory.py", "test_family_runs.py", "test_export.py",
    "test_distill.py", "test_hub_format.py", "test_multiple_choice.py",
    "test_pretrainer.py", "test_fill_mask.py")


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture(scope="module", autouse=True)
def _survivors_frozen():
    """At the end of each test file, what is still alive (imported
    modules, session fixtures, traced functions kept in caches) moves out
    of the collector's sight (`gc.freeze`): a full collection then scans
    only the objects of the file running, not everything the files before
    left (about 0.9 s a collection on test_export's process). Eight
    export-heavy files on 2 processes: collector time 59 -> 26 s, user
    CPU 368 -> 334 s. Objects frozen still go when their last reference
    does; a cycle among them stays until the process ends."""
    yield
    gc.collect()
    gc.freeze()


@pytest.fixture
def tiny_config():
    return dict(TINY)


def cpu_has_avx512():
    """Whether this CPU has AVX-512: without it, oneDNN's int8 kernel with
    a bf16 output aborts the process (seen on an AVX2 EPYC)."""
    from bert_tf.precision import cpu_flags

    return "avx512f" in cpu_flags()


def int8_weight_limit():
    """The largest int8 weight code an export on this CPU uses: 8-bit
    weights overflow the 16-bit sums of oneDNN's int8 kernels on CPUs
    without VNNI (`bert_tf.serving.quantize.weight_limit`)."""
    from bert_tf.serving.quantize import weight_limit

    return weight_limit(log=lambda line: None)


def random_inputs(batch=3, length=12, vocab=120, seed=0, pad_from=None):
    """Encoder inputs with the last row padded from `pad_from` on."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, vocab, size=(batch, length)).astype("int32")
    mask = np.ones_like(ids)
    if pad_from is not None:
        ids[-1, pad_from:] = 0
        mask[-1, pad_from:] = 0
    types = np.zeros_like(ids)
    types[:, length // 2:] = 1
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}


def assert_close_at_real_tokens(got, want, input_mask, atol=1e-5):
    """Token outputs [batch, seq, ...] of a served encoder equal `want` at
    every real token; at a padded position it copies a real token's row
    (`bert_tf.layers.transformer.TokenRows`): that means nothing."""
    real = np.asarray(input_mask).astype(bool)
    np.testing.assert_allclose(np.asarray(got)[real], np.asarray(want)[real],
                               atol=atol)


def pretraining_batch(batch=4, length=16, vocab=120, predictions=3, seed=0):
    rng = np.random.default_rng(seed)
    features = random_inputs(batch, length, vocab, seed)
    positions = np.stack([rng.choice(np.arange(1, length), predictions,
                                     replace=False) for _ in range(batch)])
    features.update(
        masked_lm_positions=positions.astype("int32"),
        masked_lm_ids=np.take_along_axis(features["input_word_ids"],
                                         positions, 1),
        masked_lm_weights=np.ones((batch, predictions), "float32"),
        next_sentence_labels=rng.integers(0, 2, size=(batch,)).astype(
            "int32"))
    return features


@pytest.fixture(scope="session")
def minilm_dir():
    """The real all-MiniLM-L6-v2 files (fetched once into the cache)."""
    from bert_tf import samples
    return samples.fetch("minilm")


@pytest.fixture(scope="session")
def antiberty_dir():
    from bert_tf import samples
    return samples.fetch("antiberty") / "AntiBERTy_md_smooth"


@pytest.fixture(scope="session")
def minilm(minilm_dir, tmp_path_factory):
    """MiniLM imported through the HF importer, as a `Pretrained`."""
    from bert_tf import checkpoints
    out = tmp_path_factory.mktemp("minilm")
    return checkpoints.convert("hf", minilm_dir, out, log=lambda *a: None)


@pytest.fixture(scope="session")
def bert_vocab(minilm_dir):
    """The real bert-base-uncased vocab (shipped with MiniLM)."""
    from bert_tf.text.vocab import read_vocab
    return read_vocab(minilm_dir / "vocab.txt")


@pytest.fixture(scope="session")
def sample_documents():
    from bert_tf.data import documents
    docs, _ = documents.load_documents(["sample:wikipedia", "sample:lee"])
    return docs


@pytest.fixture(scope="session")
def sample_pairs(sample_documents, bert_vocab, tmp_path_factory):
    """Sentence pairs from the real sample corpora (seq 128, dupe 2)."""
    from bert_tf.data import pairs
    from bert_tf.text.tokenizer import BertTokenizer
    out = tmp_path_factory.mktemp("pairs")
    stats = pairs.write_pairs(sample_documents, BertTokenizer(bert_vocab),
                              out, seq_length=128, dupe_factor=2, seed=1,
                              num_shards=4, log=lambda *a: None)
    return out, stats


def finetune_toy(tmp_path_factory, name, write, make_config):
    """(directory, result): `write(directory)` writes a toy task's files,
    `make_config(directory)` is its fine-tuning config, run quietly."""
    from bert_tf import finetune
    directory = tmp_path_factory.mktemp(name)
    write(directory)
    return directory, finetune.run(make_config(directory),
                                   log=lambda *a: None)


@pytest.fixture(scope="session")
def toy_run(tmp_path_factory):
    """A BERT (L1/H32) fine-tuned on the toy task: (directory, result)."""
    from toy_task import toy_config, write_toy_task
    return finetune_toy(tmp_path_factory, "toy", write_toy_task, toy_config)


def save_pair_classifier(best, labels, encoder_args, tokens):
    """A random pair classifier (`labels` empty: regression, seq 12) saved
    as a fine-tuning run's `best/` directory; returns `best`."""
    import yaml

    from bert_tf import checkpoints
    from bert_tf.models.encoder import BertEncoder
    from bert_tf.tasks.classification.model import BertClassifier
    from bert_tf.text.vocab import Vocab

    best.mkdir(parents=True)
    model = BertClassifier(BertEncoder(**encoder_args), len(labels) or 1)
    spec = {"task": best.parent.name, "labels": list(labels),
            "regression": not labels, "pair": True,
            "metrics": ["accuracy"], "seq_length": 12, "lower_case": True,
            "dropout": 0.1, "encoder": encoder_args}
    (best / "classifier.yaml").write_text(yaml.safe_dump(spec))
    Vocab(tuple(tokens)).save(best / "vocab.txt")
    checkpoints.model_checkpoint(model.encoder, classifier=model.head) \
        .write(str(best / "model.ckpt"))
    return best


def assert_trimmed_matches_fixed_length(run_dir, bucketed, tmp_path, requests):
    """Exports `run_dir` again with `fixed_length=True` and checks that the
    trimmed export `bucketed` (each batch cut to its longest row) answers
    every request of `requests` as it does (numbers within 1e-5), and that
    only the trimmed graph cuts."""
    import tensorflow as tf

    from bert_tf.serving import export as export_lib

    fixed = tmp_path / "fixed" / "1"
    export_lib.export_model(run_dir, fixed, log=lambda *a: None,
                            fixed_length=True)
    serve = {name: export_lib.load_exported(path).signatures[
        "serving_default"] for name, path in (("bucketed", bucketed),
                                              ("fixed", fixed))}
    for request in requests:
        inputs = {k: tf.constant(v) for k, v in request.items()}
        got, want = (serve[name](**inputs) for name in ("bucketed", "fixed"))
        assert set(got) == set(want)
        for key, value in want.items():
            if value.dtype == tf.string:
                assert got[key].numpy().tolist() == value.numpy().tolist()
            else:
                np.testing.assert_allclose(got[key].numpy(), value.numpy(),
                                           atol=1e-5, err_msg=key)
    # Finding the longest row is one more Max (reduce_max) op per cut.
    counts = [export_lib.graph_op_types(path).get("Max", 0)
              for path in (bucketed, fixed)]
    assert counts[0] > counts[1]


def served_weight_dtypes(export_dir, loaded):
    """{name: dtype} of an export's weights: its variables, and the
    constants its graphs read them as (`bert_tf.models.served`), which keep
    the variables' names."""
    import tensorflow as tf

    from bert_tf.serving import export as export_lib

    weights = {v.name: v.dtype for v in loaded.model_variables}
    saved = export_lib.read_saved_model(export_dir)
    for function in saved.meta_graphs[0].graph_def.library.function:
        for node in function.node_def:
            if node.op == "Const" and node.name.endswith(
                    ("kernel", "bias", "gamma", "beta", "embeddings")):
                weights[node.name + ":0"] = tf.dtypes.as_dtype(
                    node.attr["dtype"].type)
    return weights


def assert_bf16_keeps_norms_and_tables_float32(dtypes):
    """By name (`{name: dtype}`): every layer norm (gamma, beta) and every
    embedding table of a bf16 model is float32, and every matmul kernel is
    bfloat16."""
    import tensorflow as tf

    if not isinstance(dtypes, dict):  # variables
        dtypes = {v.name: v.dtype for v in dtypes}
    dtypes = {k: v for k, v in dtypes.items() if v.is_floating}
    kept = sorted(name for name in dtypes if "norm" in name or
                  "embeddings/embeddings" in name)
    parts = ("embeddings/layer_norm/gamma", "attention_norm/gamma",
             "output_norm/beta", "word_embeddings/embeddings",
             "position_embeddings/embeddings")
    for part in parts:
        assert any(part in name for name in kept), (part, kept)
    wrong = [name for name in kept if dtypes[name] != tf.float32]
    assert not wrong, f"must stay float32, but are not: {wrong}"
    # A bf16 export holds each block kernel as its slices (columns, rows or
    # head groups: `bert_tf.models.split_matmuls.SplitMatmuls`).
    kernels = [name for name in dtypes if re.search(
        r"kernel(_(part|rows|heads)\d+)?:0$", name) and
        "transformer_layer" in name]
    assert kernels and all(dtypes[k] == tf.bfloat16 for k in kernels), {
        k: dtypes[k] for k in kernels}


def assert_bf16_export_agrees(run_dir, fp32_export, tmp_path, requests,
                              atol=1e-2, export=None, precision="bf16"):
    """Exports `run_dir` with `precision` (`bf16`, or `int8` through
    `assert_int8_export_agrees`; or calls `export(out)`) and checks that
    the export records it, stores its weights as it should (bf16: as bf16,
    the layer norms' and embedding tables' as float32; int8: float32
    variables only, the encoder's matmuls on int8 constants run by TF's
    quantized matmul op), returns float32 numbers within `atol` of the
    fp32 export `fp32_export` and the same strings and counts, for every
    request of `requests`. Returns {output: share of equal rows} of the
    string and int outputs."""
    import json

    import tensorflow as tf

    from bert_tf.serving import export as export_lib

    out = tmp_path / precision / "1"
    if export is None:
        export_lib.export_model(run_dir, out, log=lambda *a: None,
                                precision=precision)
    else:
        export(out)
    info = json.loads((out / "assets.extra" / "bert_tf.json").read_text())
    assert info["precision"] == precision
    loaded = export_lib.load_exported(out)
    weights = served_weight_dtypes(out, loaded)
    dtypes = {dtype for dtype in weights.values() if dtype.is_floating}
    if precision == "bf16":
        assert dtypes == {tf.bfloat16, tf.float32}, dtypes
        assert_bf16_keeps_norms_and_tables_float32(weights)
    else:
        assert dtypes == {tf.float32}, dtypes
        assert not any("intermediate/kernel" in name for name in weights)
        ops = export_lib.graph_op_types(out)
        assert ops.get("_QuantizedMatMul", 0) >= 4, ops
    serve = {precision: loaded.signatures["serving_default"],
             "fp32": export_lib.load_exported(fp32_export).signatures[
                 "serving_default"]}
    same = {}  # key -> [equal rows, rows] of string and int outputs
    for request in requests:
        inputs = {k: tf.constant(v) for k, v in request.items()}
        got, want = (serve[name](**inputs) for name in (precision, "fp32"))
        assert set(got) == set(want)
        for key, value in want.items():
            assert got[key].dtype == value.dtype, key
            if value.dtype.is_floating:
                np.testing.assert_allclose(got[key].numpy(), value.numpy(),
                                           atol=atol, err_msg=key)
            else:
                rows = got[key].numpy() == value.numpy()
                rows = rows.reshape(len(rows), -1).all(axis=1)
                count = same.setdefault(key, [0, 0])
                count[0] += int(rows.sum())
                count[1] += len(rows)
    return {key: equal / rows for key, (equal, rows) in same.items()}


def assert_int8_export_agrees(*args, **kwargs):
    """`assert_bf16_export_agrees` of an int8 export."""
    return assert_bf16_export_agrees(*args, precision="int8", **kwargs)


def save_tiny_checkpoint(directory, tokens, num_layers, masked_lm=False):
    """A random tiny encoder (H 16, seed 0; with the masked-LM head if
    `masked_lm`) saved as a bert_tf checkpoint directory; returns
    (encoder, pretrainer or None)."""
    import keras

    from bert_tf import checkpoints
    from bert_tf.models.encoder import BertEncoder
    from bert_tf.models.pretrainer import BertPretrainer
    from bert_tf.text.vocab import Vocab

    keras.utils.set_random_seed(0)
    encoder = BertEncoder(vocab_size=len(tokens), hidden_size=16,
                          num_layers=num_layers, num_heads=2,
                          intermediate_size=32, max_position_embeddings=64)
    pretrainer = BertPretrainer(encoder, nsp=False) if masked_lm else None
    checkpoints.save_pretrained(directory, encoder, Vocab(tuple(tokens)),
                                pretrainer)
    return encoder, pretrainer


def pretrain_config(tmp_path, pairs_dir, **trainer):
    """A tiny pre-training config over `pairs_dir` in `tmp_path`."""
    import yaml
    cfg = {
        "encoder": {"vocab_size": 30522, "hidden_size": 32, "num_layers": 1,
                    "num_heads": 2, "intermediate_size": 64,
                    "max_position_embeddings": 128},
        "data": {"train_files": str(pairs_dir),
                 "vocab": str(pairs_dir / "vocab.txt"), "seq_length": 64,
                 "max_predictions_per_seq": 10, "global_batch_size": 8,
                 "shuffle_buffer": 500, "seed": 3},
        "optimizer": {"learning_rate": 1e-3, "warmup_steps": 5,
                      "decay_steps": 100},
        "trainer": dict({"model_dir": str(tmp_path / "run"),
                         "train_steps": 30, "steps_per_loop": 5,
                         "checkpoint_every": 10}, **trainer),
    }
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "pretrain.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def free_ports(count):
    import socket
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports

# Not a test module: the toy-kind test copies it into a temporary plugin
# package; imported here (doctest collection), it would register its kind.
collect_ignore = ["toy_kind_plugin.py"]
