"""The docs site builds with no warning, and the README stays a front
door whose links all land."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_mkdocs_build_strict(tmp_path):
    """A broken link, a page missing from the nav or a docstring the API
    reference cannot render fails the build."""
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict",
         "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    built = tmp_path / "site"
    for page in ("index.html", "guides/serving/index.html",
                 "api/models/index.html"):
        assert (built / page).is_file(), page
    api = (built / "api" / "models" / "index.html").read_text()
    assert "BertEncoder" in api and "from_preset" in api


def test_readme_is_a_front_door():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    for section in ("## Install", "## Quickstart", "## Two commands"):
        assert section in readme
    for target in re.findall(r"\]\(([^)#]+)", readme):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), target


def test_docs_reference_nothing_outside_the_repository():
    for page in (ROOT / "docs").rglob("*.md"):
        text = page.read_text()
        assert "../shared" not in text and "machine_speed.py" not in text, \
            page
        for target in re.findall(r"\]\(([^)#]+)", text):
            assert not target.startswith(("http", "/", "../../")), \
                (page, target)


def test_models_page_and_help_list_every_preset(capsys):
    from bert_tf import cli, presets
    page = (ROOT / "docs" / "models.md").read_text()
    with pytest.raises(SystemExit):
        cli.main(["presets", "--help"])
    help_text = capsys.readouterr().out
    assert len(presets.with_weights()) >= 9
    for name in presets.available():
        assert f"`{name}`" in page, name
        assert name in help_text, name
    for name in presets.with_weights():
        assert presets.weights_source(name) in page, name
