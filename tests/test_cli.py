import subprocess
import sys

import pytest

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
        (["export", "--run", str(empty), "--out",
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
    from bert_tf.serving import loading

    calls = []

    def load(path, serving_only=False):
        calls.append(serving_only)
        raise ValueError("stop here")

    monkeypatch.setattr(loading, "load_exported", load)
    monkeypatch.setattr(cli, "_add_kind_flags", lambda parser, argv:
                        parser.set_defaults(export_kind="classification"))
    argv = ["predict", "--model", str(tmp_path), "x"]
    assert cli.main(argv) == 2
    monkeypatch.setattr(cli.sys, "argv", ["bert-tf", *argv])
    assert cli.main() == 2
    assert calls == [False, True]


def test_export_flags_that_cannot_apply_are_refused_in_one_line(capsys,
                                                                tmp_path):
    """Each impossible combination exits 2 with one line naming the flag,
    where it applies and what this export takes, before any work."""
    out = str(tmp_path / "m.tflite")
    run, pretrained = ("--run", str(tmp_path / "run")), (
        "--checkpoint", str(tmp_path / "encoder"))
    cases = [
        (run, ["--format", "tflite", "--precision", "bf16"],
         "--precision does not apply to --format tflite; it applies to "
         "--format savedmodel or --format hub"),
        (run, ["--quantize", "dynamic_int8"],
         "--quantize does not apply to --format savedmodel; it applies to "
         "--format tflite"),
        (pretrained, ["--format", "hub", "--fixed-length"],
         "--fixed-length does not apply to --format hub"),
        (run, ["--format", "tflite", "--max-input-chars", "10"],
         "--max-input-chars does not apply to --format tflite"),
        (run, ["--top-k", "3"], "--top-k does not apply to --format "
                                "savedmodel; it applies to --kind fill_mask"),
        (run, ["--no-normalize"], "--no-normalize does not apply to "
                                  "--format savedmodel; it applies to --kind "
                                  "embeddings"),
        (pretrained, ["--format", "tflite", "--kind", "fill_mask"],
         "exports a fine-tuning run (no --kind) or --kind embeddings"),
        (pretrained, ["--format", "tflite", "--kind", "hub"],
         "cannot be combined with --format tflite"),
        (run, ["--kind", "embeddings"], "--run names a fine-tuning run; "
                                        "--kind embeddings exports a "
                                        "pre-trained --checkpoint"),
        (run + pretrained, [], "give --run RUN (a fine-tuning run) or "
                               "--checkpoint CKPT"),
    ]
    for source, flags, message in cases:
        argv = ["export", *source, "--out", out] + flags
        assert cli.main(argv) == 2, flags
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, (flags, err)
    assert not (tmp_path / "m.tflite").exists()


def test_a_run_exports_flag_error_comes_before_tensorflow(tmp_path):
    """A flag a run's export cannot take is refused without importing
    TensorFlow (it took 3.5-9 s), in the same one line."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from bert_tf import cli\n"
        f"status = cli.main(['export', '--run', {str(tmp_path)!r}, '--out', "
        f"{str(tmp_path / 'm.tflite')!r}, '--format', 'tflite', "
        "'--precision', 'bf16'])\n"
        "print(status, 'tensorflow' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", code],
                            capture_output=True, text=True, timeout=120)
    assert result.stdout.split() == ["2", "False"], result
    assert result.stderr.strip() == (
        "bert-tf export: error: --precision does not apply to --format "
        "tflite; it applies to --format savedmodel or --format hub. This "
        "export takes --quantize.")


def test_old_export_kind_spellings_still_work_and_warn(capsys, tmp_path):
    """`--kind task` is a run's own kind and `--kind hub` is `--format
    hub`: each says so on stderr, then runs as the new spelling (here to
    the missing-run error)."""
    for kind, said in (("task", "--kind task is no longer needed"),
                       ("hub", "--kind hub is now --format hub")):
        assert cli.main(["export", "--kind", kind, "--checkpoint",
                         str(tmp_path / "none"), "--out",
                         str(tmp_path / "o" / "1")]) == 2
        err = capsys.readouterr().err
        assert said in err and "Traceback" not in err
    # A run given as --checkpoint (before --run) still exports, and says.
    assert cli.main(["export", "--checkpoint", str(tmp_path / "none"),
                     "--out", str(tmp_path / "o" / "1")]) == 2
    err = capsys.readouterr().err
    assert "a fine-tuning run is now given as --run" in err
    assert "holds no task.yaml" in err


def test_version_and_the_kind_s_own_predict_help(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0
    assert "bert-tf 0.1.0 (tensorflow 2.20.0" in capsys.readouterr().out


@pytest.mark.slow
def test_predict_help_differs_by_kind(toy_run, tmp_path, capsys):
    """`bert-tf predict --model M --help` says what M's kind answers, with
    an example naming M, and lists the kind's own flags."""
    from bert_tf.serving.export import export_model

    directory, _ = toy_run
    out = export_model(directory / "run", tmp_path / "toy" / "1",
                       log=lambda *a: None)["path"]
    with pytest.raises(SystemExit):
        cli.main(["predict", "--model", str(out), "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "is a classification export: it answers the label of each text" \
        in text
    assert 'Example: bert-tf predict --model' in text
    assert '"An utterly charming film." "Dull."' in text


def test_the_route_table_declares_what_each_writer_takes():
    """`bert_tf.serving.RUN_WRITERS` (read without TensorFlow, for fast
    usage errors) names exactly each writer's own options."""
    from bert_tf import serving
    from bert_tf.serving.export import export_model
    from bert_tf.serving.hub import export_hub
    from bert_tf.serving.tflite import export_tflite

    for format, writer in (("savedmodel", export_model), ("hub", export_hub),
                           ("tflite", export_tflite)):
        assert serving.RUN_WRITERS[format][1] == serving._options(writer), \
            format
