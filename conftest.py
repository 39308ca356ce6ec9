"""Files the docstring examples of `bert_tf` read, made small and on
demand (`pytest --doctest-modules bert_tf`): in a docstring,
`example_files.toy_task()` is a directory of tiny sentiment TSVs with a
vocab, `example_files.finetuned()` a classifier fine-tuned on it (and
`example_files.tflite()` its TFLite file),
`example_files.pairs()` pre-training pair records, `example_files.tmp`
a scratch directory."""

import contextlib
import functools
import io
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "tests"))


class ExampleFiles:
    def __init__(self, tmp):
        self.tmp = tmp

    @functools.cache
    def toy_task(self):
        from toy_task import write_toy_task

        directory = self.tmp / "toy_task"
        directory.mkdir()
        write_toy_task(directory)
        return directory

    @functools.cache
    def finetuned(self):
        from bert_tf import finetune
        from toy_task import toy_config

        cfg = toy_config(self.toy_task(), epochs=1,
                         **{"trainer.model_dir": str(self.tmp / "finetuned")})
        with contextlib.redirect_stdout(io.StringIO()):  # the progress bar
            return finetune.run(cfg, log=lambda line: None).best_dir

    @functools.cache
    def tflite(self):
        """The fp32 TFLite file of `finetuned()`."""
        from bert_tf.serving.tflite import export_tflite

        return export_tflite(self.finetuned(), self.tmp / "toy.tflite",
                             log=lambda line: None)["path"]

    @functools.cache
    def pairs(self):
        """(pair records directory, vocab path)."""
        from bert_tf.data import pairs
        from bert_tf.text.tokenizer import BertTokenizer
        from bert_tf.text.vocab import read_vocab

        vocab_path = self.toy_task() / "vocab.txt"
        sentences = [line.split("\t")[0] for line in (
            self.toy_task() / "train.tsv").read_text().splitlines()[1:]]
        documents = [sentences[i:i + 8] for i in range(0, 80, 8)]
        out = self.tmp / "pairs"
        pairs.write_pairs(documents, BertTokenizer(read_vocab(vocab_path)),
                          out, seq_length=32, dupe_factor=1, seed=0,
                          log=lambda line: None)
        return out, vocab_path


@pytest.fixture(scope="session", autouse=True)
def _example_files(doctest_namespace, tmp_path_factory):
    doctest_namespace["example_files"] = ExampleFiles(
        tmp_path_factory.mktemp("examples"))
