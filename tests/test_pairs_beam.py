"""Pair creation on Apache Beam: exactly the in-process writer's pairs (as
a multiset, with a held-out split, over several input files), on the
DirectRunner in memory and in worker processes, and through the CLI."""

import json

import pytest
import tensorflow as tf

from bert_tf import cli
from bert_tf.data import pairs
from bert_tf.data.documents import load_documents
from bert_tf.text.tokenizer import BertTokenizer
from bert_tf.text.vocab import Vocab

QUIET = dict(log=lambda *a: None)
WORDS = ["the", "film", "was", "good", "bad", "plot", "long", "short",
         "actor", "scene", "end", "."]


def _corpus(directory, files=2, documents=12):
    """`files` files in the sentences format, a vocab; returns the specs."""
    import random

    rng = random.Random(0)
    specs = []
    for number in range(files):
        lines = []
        for _ in range(documents):
            for _ in range(rng.randint(1, 9)):
                lines.append(" ".join(rng.choice(WORDS) for _ in range(
                    rng.randint(1, 14))))
            lines.append("")
        path = directory / f"part-{number}.txt"
        path.write_text("\n".join(lines) + "\n")
        specs.append(f"sentences:{path}")
    Vocab(("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS)).save(
        directory / "vocab.txt")
    return specs


def _records(directory):
    return sorted(bytes(r.numpy()) for r in tf.data.TFRecordDataset(sorted(
        str(p) for p in directory.glob("pairs-*.tfrecord"))))


def _in_process(specs, directory, out, **kwargs):
    documents, _ = load_documents(specs)
    tokenizer = BertTokenizer(str(directory / "vocab.txt"))
    return pairs.write_pairs(documents, tokenizer, out, **kwargs, **QUIET)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["in_memory", "multi_processing"])
def test_beam_makes_exactly_the_in_process_pairs(tmp_path, mode):
    from bert_tf.data.pairs_beam import run_pairs_pipeline

    specs = _corpus(tmp_path)
    settings = dict(seq_length=24, dupe_factor=3, seed=7, eval_share=0.2)
    expected = _in_process(specs, tmp_path, tmp_path / "local", **settings)
    stats = run_pairs_pipeline(
        specs, tmp_path / "vocab.txt", tmp_path / "beam", num_shards=3,
        pipeline_args=[f"--direct_running_mode={mode}",
                       "--direct_num_workers=2"], **settings, **QUIET)
    assert _records(tmp_path / "beam") == _records(tmp_path / "local")
    assert _records(tmp_path / "beam" / "eval") == \
        _records(tmp_path / "local" / "eval")
    assert (stats.pairs, stats.not_next, stats.tokens, stats.documents) == (
        expected.pairs, expected.not_next, expected.tokens,
        expected.documents)
    assert len(list((tmp_path / "beam").glob("pairs-*-of-00003.tfrecord"))) \
        == 3
    manifest = json.loads((tmp_path / "beam" / "manifest.json").read_text())
    assert manifest["stats"]["pairs"] == expected.pairs
    assert (tmp_path / "beam" / "vocab.txt").is_file()


@pytest.mark.slow
def test_cli_runner_and_pipeline_options(tmp_path, capsys):
    specs = _corpus(tmp_path, files=1)
    argv = ["pairs", "--corpus", specs[0], "--vocab",
            str(tmp_path / "vocab.txt"), "--out", str(tmp_path / "out"),
            "--seq-length", "24", "--dupe-factor", "2"]
    assert cli.main(argv + ["--runner", "DirectRunner",
                            "--direct_running_mode=in_memory"]) == 0
    assert "DirectRunner" in capsys.readouterr().out
    assert cli.main(argv + ["--out", str(tmp_path / "local")]) == 0
    assert _records(tmp_path / "out") == _records(tmp_path / "local")
    # Beam options without a runner are an error, not silently dropped.
    assert cli.main(argv + ["--direct_running_mode=in_memory"]) == 2
    assert "--direct_running_mode=in_memory: not a flag here" in \
        capsys.readouterr().err
