"""The README's and the Python guide's examples run as written."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def _run_first_python_block(path, tmp_path, monkeypatch):
    code = re.findall(r"```python\n(.*?)```", path.read_text(), re.S)
    assert code, f"{path.name} has no python example"
    monkeypatch.chdir(tmp_path)
    exec(compile(code[0], str(path), "exec"), {})


@pytest.mark.slow
def test_readme_quickstart_runs(tmp_path, monkeypatch, capsys):
    _run_first_python_block(README, tmp_path, monkeypatch)
    assert "(1, 2)" in capsys.readouterr().out
    assert (tmp_path / "checkpoints" / "minilm" / "model.ckpt.index").is_file()


@pytest.mark.slow
def test_python_guide_example_runs(tmp_path, monkeypatch, capsys):
    _run_first_python_block(ROOT / "docs" / "guides" / "python-api.md",
                            tmp_path, monkeypatch)
    printed = capsys.readouterr().out
    assert "(2, 32, 384) (2, 384)" in printed
    assert "mlm_accuracy" in printed


def test_readme_names_the_ci_test_command():
    ci = (README.parent / ".ci" / "run").read_text()
    assert "make test" in README.read_text() and "make test" in ci
