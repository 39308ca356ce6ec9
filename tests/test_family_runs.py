"""Each new family, named as a user names it, fine-tunes, exports (the
SavedModel on raw strings, TF Hub format, TFLite) and answers: cased BERT
by preset, ELECTRA by `hf://`, DistilBERT by preset (and on the TF C API),
all fetched from the local hub of `hub_server.py`."""

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import finetune
from bert_tf.models.encoder import BertEncoder
from bert_tf.serving import export as export_lib
from bert_tf.serving.hub import export_hub
from bert_tf.serving.tflite import TFLiteModel, export_tflite
from hub_server import LocalHub
from test_export import run_serving_check
from test_hf_hub import _files, _set_offline
from toy_task import toy_config, write_toy_task

TEXTS = ["the film was good and long", "the film was awful", "", "dull",
         "The FILM was GOOD!"]
QUIET = dict(log=lambda *a: None)
FAMILIES = {  # name as given in `init:` -> (repository, fixture)
    "bert_base_cased": ("google-bert/bert-base-cased", "bert_cased"),
    "hf://google/electra-small-discriminator@main": (
        "google/electra-small-discriminator", "electra_small"),
    "distilbert_base_uncased": ("distilbert/distilbert-base-uncased",
                                "distilbert"),
}


@pytest.fixture(scope="module")
def family_hub(tmp_path_factory):
    from huggingface_hub import constants
    server = LocalHub({repo: {"main": _files(fixture)}
                       for repo, fixture in FAMILIES.values()})
    patch = pytest.MonkeyPatch()
    patch.setenv("HF_ENDPOINT", server.url)
    patch.setattr(constants, "HF_HUB_CACHE",
                  str(tmp_path_factory.mktemp("hf_cache")))
    _set_offline(patch, False)
    yield server
    patch.undo()
    server.close()


@pytest.fixture(scope="module", params=list(FAMILIES))
def family_run(request, family_hub, tmp_path_factory):
    name = request.param
    directory = tmp_path_factory.mktemp("family")
    write_toy_task(directory)
    cfg = toy_config(directory, init=name, vocab="", epochs=3)
    result = finetune.run(cfg, **QUIET)
    return name, directory / "run", result


@pytest.mark.slow
def test_family_fine_tunes_exports_and_answers(family_run, tmp_path):
    name, run_dir, result = family_run
    assert result.test["accuracy"] >= 0.9, (name, result.test)
    saved = export_lib.export_model(run_dir, tmp_path / "m" / "1",
                                    **QUIET)["path"]
    answers = export_lib.predict_texts(export_lib.load_exported(saved),
                                       TEXTS)
    assert answers["label"].tolist()[:2] == [b"positive", b"negative"] or \
        answers["label"].tolist()[:2] == ["positive", "negative"]
    lite = export_tflite(run_dir, tmp_path / "m.tflite", **QUIET)
    got = TFLiteModel(lite["path"])(TEXTS)
    np.testing.assert_allclose(got["probabilities"],
                               answers["probabilities"], atol=1e-5)
    if name.startswith("distilbert"):  # no token types, on the C API too
        rows = [line.split("\t") for line in
                run_serving_check(saved, TEXTS, tmp_path)]
        assert [r[0] for r in rows] == [
            a.decode() if isinstance(a, bytes) else a
            for a in answers["label"].tolist()]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FAMILIES))
def test_family_hub_format_export_by_name(family_hub, name, tmp_path):
    out = tmp_path / "hub"
    export_hub(name, out, seq_length=16, **QUIET)
    import tensorflow_text  # noqa: F401 (the preprocessor's ops)
    preprocess = tf.saved_model.load(str(out / "preprocess"))
    encoder = tf.saved_model.load(str(out / "encoder"))
    inputs = preprocess(tf.constant(TEXTS[:2]))
    served = encoder(inputs)["sequence_output"].numpy()
    ours = BertEncoder.from_preset(name)(
        {k: v.numpy() for k, v in inputs.items()})["sequence_output"]
    mask = inputs["input_mask"].numpy()[..., None]
    assert np.abs((served - ours.numpy()) * mask).max() <= 1e-5
    assert Path(out / "preprocess" / "assets").is_dir()


@pytest.mark.slow
def test_a_fetched_name_resolves_offline(family_run, family_hub):
    """After the run fetched it, the same `init:` needs no network."""
    name, run_dir, _ = family_run
    patch = pytest.MonkeyPatch()
    _set_offline(patch, True)
    try:
        family_hub.requests.clear()
        cfg = toy_config(run_dir.parent, init=name, vocab="")
        init = finetune.resolve_init(cfg)
        assert family_hub.requests == []
        assert init.description.startswith("hf checkpoint")
    finally:
        patch.undo()
        _set_offline(pytest.MonkeyPatch(), False)
