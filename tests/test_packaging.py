"""A regular (non-editable) install works on its own, from any directory:
`bert-tf presets` reads the shipped configs and `bert-tf demo` finds the
shipped demo script, not this checkout."""

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("bert_tf", "configs", "examples", "setup.cfg", "pyproject.toml",
           "README.md")


def test_installed_package_runs_from_another_directory(tmp_path):
    source = tmp_path / "source"  # a copy: building writes beside it
    source.mkdir()
    for name in SOURCES:
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy
        copy(REPO / name, source / name)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv],
                   check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()"
         "['purelib'])"], check=True, capture_output=True,
        text=True).stdout.strip())
    # The dependencies come from this environment; bert_tf from the wheel.
    (site / "dependencies.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", python,
                    "install", "-q", "--no-deps", "--no-build-isolation",
                    "--no-index", source], check=True, cwd=tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    # Only the install: no PYTHONPATH (or editable checkout) in the way.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def run(*args):
        done = subprocess.run(args, cwd=elsewhere, capture_output=True,
                              text=True, env=env)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    where = run(python, "-c", "import bert_tf; print(bert_tf.__file__)")
    assert where.startswith(str(site)), where
    presets = run(venv / "bin" / "bert-tf", "presets")
    assert "bert_base" in presets and "bert_tiny" in presets
    shared = venv / "share" / "bert_tf"
    help_text = run(venv / "bin" / "bert-tf", "demo", "--help")
    # argparse wraps the path anywhere: compare without white space.
    assert f"Runs{shared / 'examples' / 'demo.py'}:" in "".join(
        help_text.split())
    for shipped in ("configs/finetune/rt_sentiment_minilm.yaml",
                    "configs/pretrain/sample_cpu.yaml",
                    "examples/reference/minilm_reference.npz"):
        assert (shared / shipped).is_file(), shipped
