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
