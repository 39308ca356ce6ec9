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
    namespace = {}
    exec(compile(code[0], str(path), "exec"), namespace)
    return namespace


@pytest.mark.slow
def test_readme_quickstart_runs(tmp_path, monkeypatch, capsys):
    ran = _run_first_python_block(README, tmp_path, monkeypatch)
    assert "(1, 2)" in capsys.readouterr().out
    # from_preset("sample:minilm") loaded MiniLM's weights (moved a little
    # by the two steps of fitting), not a random encoder of its size.
    import numpy as np
    from bert_tf.formats import read_named
    _, weights, _ = read_named("sample:minilm")
    encoder = ran["classifier"].encoder
    assert encoder.config.hidden_size == 384
    np.testing.assert_allclose(
        encoder.embeddings.position_embeddings.embeddings.numpy(),
        weights["bert/embeddings/position_embeddings"], atol=2e-3)


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


# README lines that cannot run here, and why (the test says which it left).
NOT_HERE = {"docker ": "no Docker here",
            "tensorflow_model_server ": "no TF Serving binary here",
            "curl ": "it asks the server of the lines above"}
# Where a README line takes minutes, the test runs it with smaller
# settings, appended to the line as written.
SMALLER = {"bert-tf finetune ": " --set epochs=0.02"}


def readme_shell_lines(sections=("## Install", "## Quickstart")):
    """The shell lines of the README's code blocks in `sections`, in
    order, continuation lines joined."""
    text = README.read_text()
    lines = []
    for section in sections:
        body = text.split(section, 1)[1].split("\n## ", 1)[0]
        for block in re.findall(r"```\n(.*?)```", body, re.S):
            lines += [line.strip() for line in
                      block.replace("\\\n", " ").splitlines()
                      if line.strip()]
    return lines


@pytest.mark.slow
def test_readme_install_and_quickstart_run_as_written(tmp_path):
    """The README's Install and Quickstart lines, in order, in a fresh
    clone with a fresh venv: `bert-tf` as typed, the sample cache as the
    user's (`BERT_TF_CACHE`), fine-tuning shortened."""
    import os
    import subprocess

    lines = readme_shell_lines()
    assert lines[0].startswith("git clone <this repository> bert_tf")
    script, skipped = ["set -ex", f"cd {tmp_path}"], []
    for line in lines:
        reason = next((why for start, why in NOT_HERE.items()
                       if line.startswith(start)), None)
        if reason:
            skipped.append(f"{line.split()[0]}: {reason}")
            continue
        line = line.replace("<this repository>", f"file://{ROOT}")
        line += next((extra for start, extra in SMALLER.items()
                      if line.startswith(start)), "")
        script.append(line.split("  #", 1)[0])
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(
        p for p in env["PATH"].split(os.pathsep) if ".venv" not in p)
    result = subprocess.run(["bash", "-c", "\n".join(script)], env=env,
                            capture_output=True, text=True, timeout=1500)
    log = result.stdout[-3000:] + result.stderr[-3000:]
    assert result.returncode == 0, log
    assert "command not found" not in result.stderr, log
    assert "wrote" in result.stdout, log
    answers = re.findall(r"^(positive|negative)\t0\.\d+\t(.*)$",
                         result.stdout, re.M)
    assert [text for _, text in answers] == ["An utterly charming film.",
                                             "Dull."], log
    assert skipped == ["docker: no Docker here",
                       "tensorflow_model_server: no TF Serving binary here",
                       "curl: it asks the server of the lines above"]
