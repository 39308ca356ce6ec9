import subprocess
import sys

from bert_tf import cli


def test_help_is_fast_and_lists_commands():
    out = subprocess.run([sys.executable, "-m", "bert_tf.cli", "--help"],
                         capture_output=True, text=True, check=True).stdout
    for command in ("presets", "config", "convert", "samples", "demo"):
        assert command in out
    probe = subprocess.run(
        [sys.executable, "-c", "import sys, bert_tf, bert_tf.cli; "
         "bert_tf.cli.build_parser(); print('tensorflow' in sys.modules)"],
        capture_output=True, text=True, check=True).stdout
    assert probe.strip() == "False"


def test_presets_and_config(capsys):
    assert cli.main(["presets"]) == 0
    out = capsys.readouterr().out
    assert "bert_base" in out and "109,482,240" in out
    assert "335,141,888" in out
    assert cli.main(["config", "--preset", "bert_tiny", "--set",
                     "encoder.num_layers=4"]) == 0
    assert "num_layers: 4" in capsys.readouterr().out
    assert cli.main(["config", "--preset", "bert_tiny", "--set",
                     "encoder.num_head=4"]) == 2
    assert "encoder.num_head" in capsys.readouterr().err


def test_samples_cli_uses_the_cache(capsys, minilm_dir):
    assert cli.main(["samples", "minilm"]) == 0
    assert str(minilm_dir) in capsys.readouterr().out
