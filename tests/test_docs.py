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


@pytest.mark.slow
def test_converted_model_commands_run_as_typed(tmp_path, monkeypatch,
                                               capsys):
    """The Models page's lines for a converted HF task model, as typed,
    with DIR a tiny fixture and the files they name written here."""
    import re
    import shlex

    from bert_tf import cli

    text = (ROOT / "docs" / "models.md").read_text()
    body = text.split("## Fine-tuned checkpoints", 1)[1]
    block = re.search(r"```\n(.*?)```", body, re.S).group(1)
    lines = [line.split("  #", 1)[0].strip() for line in block.splitlines()
             if line.strip()]
    assert [line.split()[1] for line in lines] == [
        "convert", "export", "predict", "evaluate", "export"]
    monkeypatch.chdir(tmp_path)
    fixture = ROOT / "tests" / "fixtures" / "hf_tasks" / "bert_classifier"
    (tmp_path / "test.tsv").write_text(
        "text\tlabel\nthe film was good\tpositive\nawful and long\tnegative\n"
        "a film\tneutral\n")
    (tmp_path / "texts.txt").write_text("the film was good\nawful\n" * 8)
    for line in lines:
        argv = shlex.split(line.replace("DIR", str(fixture)))[1:]
        assert cli.main(argv) == 0, (line, capsys.readouterr().err)
    out = capsys.readouterr().out
    assert "accuracy" in out
    assert (tmp_path / "export" / "sentiment" / "2" / "saved_model.pb").exists()


def test_every_path_the_docs_and_code_name_exists():
    """Each repository path that the README, docs, configs, code, scripts
    and benchmarks name (`docs/...md`, `bert_tf/...py`, `configs/...yaml`,
    ...) exists; `export/` and `tfrecords/` paths are outputs, not files
    of the repository."""
    pattern = re.compile(
        r"(?<![\w/.-])((?:docs|configs|bert_tf|tests|benchmarks|scripts|"
        r"examples)/[\w./-]*\w\.(?:md|yaml|py|ipynb|c|h|json|txt|cfg))"
        r"(?![\w])")
    sources = [ROOT / "README.md", ROOT / "Makefile", ROOT / "setup.cfg",
               *ROOT.glob("docs/**/*.md"), *ROOT.glob("configs/**/*.yaml"),
               *ROOT.glob("bert_tf/**/*.py"), *ROOT.glob("benchmarks/*.py"),
               *ROOT.glob("scripts/*.py"), *ROOT.glob("examples/**/*.py"),
               *ROOT.glob("export/*.md"), *ROOT.glob("tfrecords/*.md")]
    missing = sorted({(path, str(source.relative_to(ROOT)))
                      for source in sources
                      for path in pattern.findall(source.read_text(
                          errors="replace"))
                      if not (ROOT / path).exists()})
    assert not missing, missing
