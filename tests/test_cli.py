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


def test_wrong_files_give_one_line_errors(capsys, tmp_path):
    """A new user's mix-ups: each is one line naming the problem and the
    fix, no traceback (docs/troubleshooting.md lists them)."""
    empty = tmp_path / "model.tflite"
    empty.write_bytes(b"")
    garbage = tmp_path / "other.tflite"
    garbage.write_bytes(b"\x00not a flatbuffer" * 10)
    cases = [
        (["export", "--checkpoint", str(empty), "--out",
          str(tmp_path / "e" / "1")], "is an export, not a fine-tuning run"),
        (["predict", "--model", str(empty), "x"],
         "not a readable TFLite file"),
        (["predict", "--model", str(garbage), "x"],
         "not a readable TFLite file"),
        (["predict", "--model", str(tmp_path / "none.tflite"), "x"],
         "no such TFLite file"),
        (["predict", "--model", str(tmp_path), "x"], "is not a SavedModel"),
        (["finetune", "--config", str(tmp_path / "nope.yaml")],
         "does not exist"),
    ]
    for argv, message in cases:
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert message in err and "Traceback" not in err, (argv, err)
        assert len(err.splitlines()) == 1, err


def test_predict_serves_only_as_its_own_process(monkeypatch, tmp_path):
    """`bert-tf predict` run as a command loads its export as a process
    that only serves (a bf16 export's oneDNN weights stay reordered:
    bert_tf.serving.runtime); called in-process, where the caller may
    train, it does not."""
    from bert_tf.serving import export

    calls = []

    def load(path, serving_only=False):
        calls.append(serving_only)
        raise ValueError("stop here")

    monkeypatch.setattr(export, "load_exported", load)
    monkeypatch.setattr(cli, "_add_kind_flags", lambda parser, argv:
                        parser.set_defaults(export_kind="classification"))
    argv = ["predict", "--model", str(tmp_path), "x"]
    assert cli.main(argv) == 2
    monkeypatch.setattr(cli.sys, "argv", ["bert-tf", *argv])
    assert cli.main() == 2
    assert calls == [False, True]
