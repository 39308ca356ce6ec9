import io
import zipfile

import pytest

from bert_tf import samples


def test_unknown_asset():
    with pytest.raises(ValueError, match="known: antiberty"):
        samples.fetch("imagenet")


def test_warm_cache_works_offline(monkeypatch, minilm_dir):
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    assert samples.fetch("minilm") == minilm_dir


def test_no_cache_and_no_registry_is_one_clear_sentence(monkeypatch,
                                                        tmp_path):
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    with pytest.raises(RuntimeError) as e:
        samples.fetch("lee", cache=tmp_path)
    message = str(e.value)
    assert message.startswith("Could not download gensim==4.3.3 from the "
                              "package registry")
    assert "not in the cache" in message
    assert not any(tmp_path.rglob("*.cor"))


def test_a_changed_file_is_refused(tmp_path):
    asset = samples.Asset("pkg", "1", {"pkg/data.txt": "0" * 64},
                          strip="pkg/")
    archive = tmp_path / "pkg.whl"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("pkg/data.txt", "tampered")
    with pytest.raises(RuntimeError, match="has SHA-256 .* expected 0000"):
        samples._extract(asset, archive, tmp_path / "out")
    assert not (tmp_path / "out" / "data.txt").exists()


def test_shipped_configs_name_their_weights_through_the_cache(
        tmp_path, monkeypatch, capsys, minilm_dir):
    """With BERT_TF_CACHE set to an empty directory, every shipped MiniLM
    config fails in one line naming `bert-tf samples minilm` and that
    directory; after `bert-tf samples minilm`, each resolves its weights
    and vocab from it. No config names a home path."""
    from pathlib import Path

    from bert_tf import cli, config as config_lib, distill, finetune

    configs = Path(__file__).resolve().parents[1] / "configs"
    shipped = sorted(p for p in configs.rglob("*.yaml")
                     if "sample:minilm" in p.read_text())
    assert len(shipped) >= 10
    for path in configs.rglob("*.yaml"):
        assert "~/.cache" not in path.read_text(), path
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("BERT_TF_CACHE", str(cache))
    run_dir = tmp_path / "run"
    argv = ["finetune", "--config",
            str(configs / "finetune" / "rt_sentiment_minilm.yaml"),
            "--set", f"trainer.model_dir={run_dir}"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"sample:minilm is not in the cache {cache}" in err
    assert "`bert-tf samples minilm`" in err
    assert cli.main(["samples", "minilm"]) == 0
    assert str(cache / minilm_dir.name) in capsys.readouterr().out
    for path in shipped:
        cfg = (distill.load(path) if "distill" in path.parts else
               config_lib.load_config(path, config_lib.FinetuneConfig))
        init = finetune.resolve_init(cfg)
        assert str(init.vocab_path).startswith(str(cache)), path
        assert init.description == "random init" or \
            str(cache) in init.description, (path, init.description)
