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


def test_a_planted_symlink_in_the_cache_is_never_written_through(tmp_path):
    """The cache writes a new file of its own and renames it: a symlink
    planted at the target (or at the old `.partial` name) is replaced,
    and what it points to is untouched."""
    import hashlib
    data = b"sample data\n"
    asset = samples.Asset("pkg", "1", {"pkg/data.txt": hashlib.sha256(
        data).hexdigest()}, strip="pkg/")
    archive = tmp_path / "pkg.whl"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("pkg/data.txt", data)
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    out = tmp_path / "out"
    out.mkdir()
    (out / "data.txt").symlink_to(victim)
    (out / "data.txt.partial").symlink_to(victim)
    samples._extract(asset, archive, out)
    assert victim.read_text() == "keep me"
    assert not (out / "data.txt").is_symlink()
    assert (out / "data.txt").read_bytes() == data
    assert sorted(p.name for p in out.iterdir()) == ["data.txt",
                                                     "data.txt.partial"]


def test_a_shared_cache_is_hashed_again_when_read(tmp_path, monkeypatch):
    """In a cache others can write (group- or world-writable), each file
    is hashed again when read: a swapped file is refused in one line."""
    import hashlib
    data = b"weights\n"
    asset = samples.Asset("pkg", "1", {"pkg/w.bin": hashlib.sha256(
        data).hexdigest()}, strip="pkg/")
    monkeypatch.setitem(samples.ASSETS, "toy", asset)
    root = samples.asset_dir("toy", tmp_path)
    root.mkdir(parents=True)
    (root / "w.bin").write_bytes(data)
    assert samples.cached("toy", tmp_path) == root
    (root / "w.bin").write_bytes(b"swapped\n")
    assert samples.cached("toy", tmp_path) == root  # ours alone: trusted
    root.chmod(0o777)
    with pytest.raises(RuntimeError, match=r"w.bin \(a shared cache\) has "
                                           r"SHA-256 .* refusing"):
        samples.cached("toy", tmp_path)


def test_an_sdist_whose_hash_differs_is_never_built(tmp_path, monkeypatch):
    """pip checks the pinned archive hash before it runs the package's
    build backend: a wrong pin stops the download, nothing extracted."""
    wrong = samples.dataclasses.replace(samples.ASSETS["rt_sentiment"],
                                        archive_sha256="0" * 64)
    monkeypatch.setitem(samples.ASSETS, "rt_wrong", wrong)
    with pytest.raises(RuntimeError, match="vaderSentiment==3.3.2: the "
                                           "registry served an archive "
                                           "whose SHA-256 is not the pinned"):
        samples.fetch("rt_wrong", cache=tmp_path)
    assert not any(tmp_path.rglob("*.txt"))
    with pytest.raises(ValueError, match="only with its archive_sha256"):
        samples._download(samples.dataclasses.replace(
            wrong, archive_sha256=""), tmp_path)
