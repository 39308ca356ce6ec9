"""Checkpoints by name against a Hugging Face Hub on 127.0.0.1
(`hub_server.py`): download, cache hit, offline mode, token, a corrupted
and a broken-off download, a missing revision, file or repository, and the
presets that name hub repositories."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

try:
    from huggingface_hub.utils import reset_sessions
except ImportError:  # huggingface_hub 1.x: one httpx client, offline per request
    from huggingface_hub.utils import close_session as reset_sessions

from bert_tf import hf_hub as hub, sources
from hub_server import LocalHub

FAMILIES = Path(__file__).parent / "fixtures" / "families"
FILES = ("config.json", "model.safetensors", "vocab.txt",
         "tokenizer_config.json")


def _files(name, only=FILES):
    return {f: (FAMILIES / name / f).read_bytes() for f in only}


@pytest.fixture(scope="module")
def local_hub():
    server = LocalHub({
        "acme/tiny-bert": {"main": _files("bert_cased"),
                           "v1": _files("electra_base")},
        "acme/no-vocab": {"main": _files("bert_cased", FILES[:2])},
        "google-bert/bert-base-uncased": {"main": _files("bert_cased")},
        "google/electra-small-discriminator": {
            "main": _files("electra_small")},
        "distilbert/distilbert-base-uncased": {"main": _files("distilbert")},
    })
    yield server
    server.close()


@pytest.fixture
def hf_env(local_hub, tmp_path, monkeypatch):
    """huggingface_hub pointed at the local hub, with an empty cache."""
    from huggingface_hub import constants
    monkeypatch.setenv("HF_ENDPOINT", local_hub.url)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    _set_offline(monkeypatch, False)
    local_hub.requests.clear()
    yield local_hub
    reset_sessions()  # monkeypatch undoes the flag; no session keeps it


def _set_offline(monkeypatch, offline):
    from huggingface_hub import constants
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", offline)
    reset_sessions()  # sessions are made (per thread) by the flag's value


def test_download_then_cache_hit(hf_env):
    lines = []
    resolved = sources.resolve("hf://acme/tiny-bert", log=lines.append)
    layout, _, directory = resolved.partition(":")
    assert layout == "hf"
    for name in FILES:
        assert (Path(directory) / name).read_bytes() == \
            (FAMILIES / "bert_cased" / name).read_bytes()
    assert len(hf_env.gets("model.safetensors")) == 1
    assert any("Fetched model.safetensors" in line for line in lines)
    # Said before the network is asked anything.
    assert lines[0].startswith("fetching acme/tiny-bert from http") and \
        "HF_HUB_OFFLINE=1" in lines[0]
    hf_env.requests.clear()
    lines.clear()
    assert sources.resolve("hf://acme/tiny-bert", log=lines.append) == \
        resolved
    assert hf_env.requests == []  # the cache answers, no network
    assert not any("fetching" in line for line in lines)


def test_revision_is_pinned_and_a_missing_one_named(hf_env):
    directory = Path(sources.resolve("hf://acme/tiny-bert@v1")[3:])
    assert directory.name == LocalHub.commit_of("acme/tiny-bert", "v1")
    assert b'"electra"' in (directory / "config.json").read_bytes()
    with pytest.raises(hub.HubError) as error:
        sources.resolve("hf://acme/tiny-bert@nope")
    message = str(error.value)
    assert "\n" not in message and "hf://acme/tiny-bert@nope" in message
    assert "no revision 'nope'" in message and str(hub.cache_dir()) in message


def test_offline_mode_reads_the_cache_only(hf_env, monkeypatch):
    resolved = sources.resolve("hf://acme/tiny-bert")
    _set_offline(monkeypatch, True)
    hf_env.requests.clear()
    assert sources.resolve("hf://acme/tiny-bert") == resolved
    with pytest.raises(hub.HubError, match="offline mode"):
        sources.resolve("hf://google/electra-small-discriminator")
    assert hf_env.requests == []


def test_an_unreachable_hub_is_one_line_that_names_offline_mode(
        hf_env, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing there
    with pytest.raises(hub.HubError) as error:
        sources.resolve("hf://acme/never-fetched", log=lambda line: None)
    message = str(error.value)
    assert "\n" not in message and "could not be reached" in message
    assert "HF_HUB_OFFLINE=1" in message


def test_token_is_sent(hf_env, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_secret_for_tests")
    sources.resolve("hf://acme/tiny-bert")
    assert all(r[2].get("authorization") == "Bearer hf_secret_for_tests"
               for r in hf_env.requests)


def test_corrupted_download_is_deleted_never_used(hf_env):
    hf_env.corrupt.add("model.safetensors")
    try:
        with pytest.raises(hub.HubError, match="corrupt"):
            sources.resolve("hf://acme/tiny-bert")
    finally:
        hf_env.corrupt.clear()
    blobs = list((hub.cache_dir()).rglob("blobs/*"))
    good = [b.name for b in blobs]
    assert all(len(name) != 64 for name in good)  # no safetensors blob kept
    # Fetched again, the right bytes.
    directory = Path(sources.resolve("hf://acme/tiny-bert")[3:])
    assert (directory / "model.safetensors").read_bytes() == \
        (FAMILIES / "bert_cased" / "model.safetensors").read_bytes()


def test_broken_off_download_resumes(hf_env, monkeypatch):
    from huggingface_hub import constants
    # Written in 8 KB blocks (10 MB by default) so that a tiny file has some.
    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 8192)
    hf_env.drop_after["model.safetensors"] = 50_000
    try:  # huggingface_hub 1.x resumes within the same call
        resolved = sources.resolve("hf://acme/tiny-bert")
    except hub.HubError as error:  # 0.x: the next call resumes
        assert "the next try resumes it" in str(error)
        assert not list(hub.cache_dir().rglob("snapshots/*/model.safetensors"))
        resolved = sources.resolve("hf://acme/tiny-bert")
    directory = Path(resolved[3:])
    assert (directory / "model.safetensors").read_bytes() == \
        (FAMILIES / "bert_cased" / "model.safetensors").read_bytes()
    ranges = [r[2].get("range") for r in hf_env.gets("model.safetensors")]
    assert len(ranges) == 2 and ranges[0] is None
    assert ranges[1] == f"bytes={6 * 8192}-"  # the blocks that arrived


def test_missing_file_and_repository_are_one_line(hf_env):
    with pytest.raises(hub.HubError, match="has no vocab.txt"):
        sources.resolve("hf://acme/no-vocab")
    with pytest.raises(hub.HubError, match="no such model repository"):
        sources.resolve("hf://acme/nothing-here")
    with pytest.raises(ValueError, match="hf://ORG/NAME"):
        sources.resolve("hf://")
    with pytest.raises(ValueError, match="kaggle:// is not supported"):
        sources.resolve("kaggle://keras/bert/keras/bert_base_en_uncased")
    with pytest.raises(ValueError, match="a size without weights"):
        sources.resolve("bert_tiny")
    with pytest.raises(ValueError, match="did you mean bert_base_uncased"):
        sources.resolve("bert_base_uncasd")


def test_presets_name_hub_repositories(hf_env):
    from bert_tf.models.encoder import BertEncoder
    for name in ("bert_base_uncased", "electra_small_discriminator",
                 "distilbert_base_uncased"):
        assert sources.is_name(name)
        assert sources.resolve(name).startswith("hf:")
    # What was served under the preset's repository is what loaded.
    encoder = BertEncoder.from_preset("distilbert_base_uncased")
    assert encoder.config.type_vocab_size == 0
    reference = np.load(FAMILIES / "distilbert" / "reference.npz")
    out = encoder({k: reference[k] for k in (
        "input_word_ids", "input_mask", "input_type_ids")})
    mask = reference["input_mask"][..., None]
    assert np.abs((out["sequence_output"].numpy() -
                   reference["hidden_states"][-1]) * mask).max() <= 1e-4


def test_from_preset_loads_weights_and_from_size_does_not(hf_env):
    from bert_tf import BertClassifier, config
    from bert_tf.formats import read_hf
    model = BertClassifier.from_preset("hf://acme/tiny-bert", num_classes=3)
    _, weights, _ = read_hf(FAMILIES / "bert_cased")
    np.testing.assert_array_equal(
        model.encoder.embeddings.word_embeddings.embeddings.numpy(),
        weights["bert/embeddings/word_embeddings"])
    assert model.output_shape == (None, 3)
    random = BertClassifier.from_preset("electra_small_discriminator",
                                        load_weights=False, num_classes=2)
    size = config.load_preset("electra_small_discriminator")
    assert random.encoder.config == size
    assert hf_env.gets("model.safetensors") == hf_env.gets(
        "model.safetensors")[:1]  # only tiny-bert was fetched


@pytest.mark.slow
def test_cli_convert_by_name_with_hf_environment(local_hub, tmp_path):
    """`bert-tf convert --input hf://...` as a user runs it: HF_ENDPOINT
    and HF_HOME in the environment, then again offline (HF_HUB_OFFLINE)."""
    env = dict(os.environ, HF_ENDPOINT=local_hub.url,
               HF_HOME=str(tmp_path / "hf_home"))
    env.pop("HF_HUB_OFFLINE", None)
    command = [sys.executable, "-m", "bert_tf.cli", "convert", "--input",
               "hf://google/electra-small-discriminator", "--output"]
    first = subprocess.run(command + [str(tmp_path / "a")], env=env,
                           capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    assert "Converted hf checkpoint" in first.stdout
    assert str(tmp_path / "hf_home" / "hub") in first.stdout
    local_hub.requests.clear()
    offline = subprocess.run(command + [str(tmp_path / "b")],
                             env=dict(env, HF_HUB_OFFLINE="1"),
                             capture_output=True, text=True, timeout=300)
    assert offline.returncode == 0, offline.stderr
    assert local_hub.requests == []


def test_cli_offline_unknown_name_is_one_line(hf_env, monkeypatch, capsys,
                                              tmp_path):
    from bert_tf import cli
    _set_offline(monkeypatch, True)
    code = cli.main(["convert", "--input", "hf://acme/unknown", "--output",
                     str(tmp_path / "c")])
    stderr = capsys.readouterr().err
    assert code == 2 and stderr.count("\n") == 1
    assert "hf://acme/unknown" in stderr and "offline" in stderr and \
        str(hub.cache_dir()) in stderr
    assert not (tmp_path / "c").exists()
