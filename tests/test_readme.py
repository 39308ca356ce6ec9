"""The README's notebook example runs as written."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.mark.slow
def test_readme_notebook_example_runs(tmp_path, monkeypatch, capsys):
    code = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert code, "README has no python example"
    monkeypatch.chdir(tmp_path)
    exec(compile(code[0], "README.md", "exec"), {})
    printed = capsys.readouterr().out
    assert "(2, 32, 384) (2, 384)" in printed
    assert "mlm_accuracy" in printed
    assert (tmp_path / "checkpoints" / "minilm" / "model.ckpt.index").is_file()


def test_readme_names_the_ci_test_command():
    ci = (README.parent / ".ci" / "run").read_text()
    assert "make test" in README.read_text() and "make test" in ci
