"""One config form per kind: the kind's typed dataclass reads the `task:`
section (unknown and mistyped keys fail when the config is read), is the
spec saved beside the best weights, and reads spec files of older
versions with a warning."""

import os
import warnings

import pytest
import yaml

from bert_tf import config as config_lib
from bert_tf import finetune, tasks
from bert_tf.tasks.span_qa.config import SpanQAConfig


def _finetune_yaml(tmp_path, task, **top):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"task": task, "vocab": "vocab.txt",
                                    "encoder": "bert_tiny", **top}))
    return path


def test_every_fine_tuned_kind_has_a_typed_config():
    for kind in tasks.fine_tuned_kinds():
        cls = tasks.get_config_class(kind)
        assert cls.__dataclass_fields__["kind"].default == kind
        assert tasks.get_task_class(kind).config_class is cls


def test_kind_keys_are_typed_and_checked_when_read(tmp_path):
    cfg = finetune.load(_finetune_yaml(tmp_path, {
        "kind": "span_qa", "name": "sample:wnut_qa", "doc_stride": 32}))
    _, task_config = finetune.task_of(cfg)
    assert isinstance(task_config, SpanQAConfig)
    assert task_config.doc_stride == 32 and task_config.n_best_size == 20
    with pytest.raises(ValueError, match=r"Unknown config key "
                       r"'task.doc_strid'; valid keys under 'task': .*"
                       r"doc_stride"):
        finetune.load(_finetune_yaml(tmp_path, {"kind": "span_qa",
                                                "doc_strid": 32}))
    # Another kind's key is unknown to this kind.
    with pytest.raises(ValueError, match="Unknown config key "
                       "'task.max_query_length'"):
        finetune.load(_finetune_yaml(tmp_path, {"kind": "classification",
                                                "max_query_length": 32}))
    with pytest.raises(ValueError, match=r"task.doc_stride = 'x': expected "
                       "int"):
        finetune.load(_finetune_yaml(tmp_path, {"kind": "span_qa",
                                                "doc_stride": "x"}))
    with pytest.raises(ValueError, match="task.n_best_size = 0: must be >= "
                       "1"):
        finetune.load(_finetune_yaml(tmp_path, {"kind": "span_qa",
                                                "n_best_size": 0}))
    with pytest.raises(ValueError, match="task.kind = 'ner': use one of "
                       "classification, multiple_choice"):
        finetune.load(_finetune_yaml(tmp_path, {"kind": "ner"}))
    with pytest.raises(ValueError, match="task.kind = 'embeddings'"):
        finetune.load(_finetune_yaml(tmp_path, {"kind": "embeddings"}))


def test_run_fields_are_not_set_in_the_task_section(tmp_path):
    with pytest.raises(ValueError, match="task.seq_length: the run writes "
                       "it from the fine-tuning config's seq_length"):
        finetune.load(_finetune_yaml(tmp_path, {"seq_length": 64}))
    with pytest.raises(ValueError, match="task.encoder: the run writes it"):
        finetune.load(_finetune_yaml(tmp_path, {"encoder": {}}))


def test_moved_and_renamed_keys_still_load_with_a_warning(tmp_path):
    path = _finetune_yaml(tmp_path, {"name": "sample:rt_sentiment"},
                          pooling="mean", dropout=0.2)
    with pytest.warns(FutureWarning, match="'pooling' is deprecated: it "
                      "is now 'task.pooling'"):
        cfg = finetune.load(path)
    assert cfg.head_dropout == 0.2
    assert finetune.task_of(cfg)[1].pooling == "mean"
    with pytest.raises(ValueError, match="pooling and task.pooling are both "
                       "set"):
        config_lib.from_dict(config_lib.FinetuneConfig, {
            "pooling": "mean", "task": {"pooling": "cls"}})


def test_spec_files_of_older_versions_load(tmp_path):
    best = tmp_path / "best"
    best.mkdir()
    (best / "task.yaml").write_text(yaml.safe_dump({
        "kind": "span_qa", "task": "sample:wnut_qa", "seq_length": 64,
        "lower_case": True, "dropout": 0.1, "encoder": {"num_layers": 1},
        "version_2": True, "doc_stride": 16, "max_query_length": 8,
        "max_answer_length": 10, "n_best_size": 5, "null_threshold": 1.5,
        "shared_norm": False}))
    with pytest.warns(FutureWarning, match="task.yaml: Config key 'task' is "
                      "deprecated: it is now 'name'"):
        _, spec = tasks.read_spec(tmp_path)
    assert isinstance(spec, SpanQAConfig)
    assert (spec.name, spec.seq_length, spec.null_threshold) == (
        "sample:wnut_qa", 64, 1.5)
    # A legacy classifier.yaml (no kind) is a classification spec.
    (best / "task.yaml").unlink()
    (best / "classifier.yaml").write_text(yaml.safe_dump({
        "task": "local", "seq_length": 16, "labels": ["a", "b"],
        "lower_case": True, "dropout": 0.1, "encoder": {}}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        _, spec = tasks.read_spec(tmp_path)
    assert spec.kind == "classification" and spec.labels == ["a", "b"]
    (best / "classifier.yaml").write_text("labels: [a]\nlabel_names: [b]\n")
    with pytest.raises(ValueError, match="classifier.yaml: Unknown config "
                       "key 'label_names'; valid keys: kind, name"):
        tasks.read_spec(tmp_path)


TOY_KIND_RUN = """
import sys
from bert_tf import cli, tasks
root = sys.argv[1]
assert "toy_length" in tasks.fine_tuned_kinds(), tasks.available_kinds()
for argv in (
        ["finetune", "--config", f"{root}/toy.yaml"],
        ["export", "--run", f"{root}/run", "--out",
         f"{root}/export/toy/1"],
        ["export", "--format", "tflite", "--run", f"{root}/run",
         "--out", f"{root}/toy.tflite"],
        ["predict", "--model", f"{root}/export/toy/1",
         "the film", "the film was good and long and new"],
        ["predict", "--model", f"{root}/toy.tflite",
         "the film", "the film was good and long and new"]):
    print("RAN", argv[0], cli.main(argv), flush=True)
"""


@pytest.mark.slow
def test_a_kind_from_outside_the_library_runs_end_to_end(tmp_path):
    """A kind in a temporary folder, found through the `bert_tf.kinds`
    entry point: fine-tuned, exported as a SavedModel and as TFLite, and
    answering through `bert-tf predict`, with no library file touched."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    import yaml

    from toy_task import ENCODER, VOCAB
    from bert_tf.text.vocab import Vocab

    plugins = tmp_path / "plugins"
    (plugins / "toy_length_kind").mkdir(parents=True)
    shutil.copy(Path(__file__).parent / "toy_kind_plugin.py",
                plugins / "toy_length_kind" / "__init__.py")
    info = plugins / "toy_length_kind-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: toy-length-kind\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[bert_tf.kinds]\ntoy_length = toy_length_kind\n")
    Vocab(tuple(VOCAB)).save(tmp_path / "vocab.txt")
    (tmp_path / "toy.yaml").write_text(yaml.safe_dump({
        "task": {"kind": "toy_length"}, "vocab": str(tmp_path / "vocab.txt"),
        "encoder": dict(ENCODER), "seq_length": 16, "batch_size": 32,
        "epochs": 4, "optimizer": {"learning_rate": 3e-3},
        "trainer": {"model_dir": str(tmp_path / "run"), "seed": 1}}))
    result = subprocess.run(
        [sys.executable, "-c", TOY_KIND_RUN, str(tmp_path)],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(plugins)})
    out = result.stdout
    assert result.returncode == 0, out[-2000:] + result.stderr[-3000:]
    for command in ("finetune", "export", "export", "predict", "predict"):
        assert f"RAN {command} 0" in out, out[-2000:] + result.stderr[-2000:]
    assert "toy_length" in out and "no Flex" in out
    answers = [line for line in out.splitlines()
               if line.startswith(("long\t", "short\t"))]
    assert answers == ["short\tthe film",
                       "long\tthe film was good and long and new"] * 2, out


def test_each_kind_declares_itself_and_its_model_class_is_public():
    """What the library's tables used to keep by hand is read from the
    kinds: their model classes (all public in `bert_tf`), which have a
    TFLite graph and which can teach a student."""
    import bert_tf
    from bert_tf.distill import teaching_kinds
    from bert_tf.serving import export_only_kinds
    from bert_tf.serving.tflite import tflite_kinds

    for kind in tasks.fine_tuned_kinds():
        model_class = tasks.get_kind(kind).model_class
        assert getattr(bert_tf, model_class.__name__) is model_class, kind
        assert model_class.__name__ in bert_tf.__all__
    assert tflite_kinds() == ["classification", "embeddings",
                              "multiple_choice", "span_qa", "tagging"]
    assert teaching_kinds() == ["classification", "span_qa", "tagging"]
    assert export_only_kinds("savedmodel") == ["embeddings", "fill_mask"]
