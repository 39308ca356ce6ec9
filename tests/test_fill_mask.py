"""Fill-mask: the marker is spliced in as the mask id, the export's top-1
equals the pretrainer's, real AntiBERTy weights agree with PyTorch, and bad
input gets zero results."""

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from conftest import (assert_bf16_export_agrees, assert_int8_export_agrees,
                      save_tiny_checkpoint)
from test_export import HOSTILE, run_serving_check

from bert_tf import checkpoints, cli
from bert_tf.serving import export as export_lib
from bert_tf.tasks.fill_mask.serving import mask_features
from bert_tf.text.preprocessor import BertPreprocessor
from bert_tf.text.tokenizer import BertTokenizer

ROOT = Path(__file__).resolve().parents[1]
TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "film",
          "was", "good", "bad", "[", "]", "mask", "m", "a", "plot"]


def features(texts, marker="[MASK]", length=8, max_masks=2):
    out = mask_features(BertTokenizer(TOKENS), tf.constant(texts), marker,
                        length, max_masks)
    return {k: v.numpy().tolist() for k, v in out.items()}


@pytest.mark.slow
def test_the_marker_becomes_the_mask_id_and_is_never_tokenized():
    out = features(["the [MASK] was good", "[MASK] film", "the film",
                    "[MASK] [MASK] [MASK]",
                    "the film was good the film [MASK]",
                    ""])
    assert out["input_word_ids"][0] == [2, 5, 4, 7, 8, 3, 0, 0]
    assert out["masked_lm_positions"][0] == [2, 0]
    assert out["input_word_ids"][1][:4] == [2, 4, 6, 3]
    assert out["count"] == [1, 1, 0, 0, 0, 0]
    # No mask; more masks than max_masks (2); the mask cut by truncation
    # to 8 pieces; empty text.
    assert out["masks"] == [1, 1, 0, 3, 1, 0]
    other = features(["the <m> was [MASK]"], marker="<m>")
    # "[MASK]" is plain text under another marker: "[", "mask", "]".
    assert other["input_word_ids"][0][:7] == [2, 5, 4, 7, 10, 12, 11]
    assert other["count"] == [1]


@pytest.fixture(scope="module")
def fill_export(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tiny_mlm")
    _, pretrainer = save_tiny_checkpoint(directory, TOKENS, 2,
                                         masked_lm=True)
    out = tmp_path_factory.mktemp("export") / "fill" / "1"
    export_lib.export("fill_mask", directory, out, log=lambda *a: None,
                      seq_length=32, top_k=3, max_masks=2)
    return pretrainer, directory, out


@pytest.mark.slow
def test_export_top1_equals_the_pretrainer(fill_export):
    pretrainer, _, out = fill_export
    served = export_lib.load_exported(out).signatures["serving_default"]
    sentences = ["the film was good", "the plot was bad", "a good film",
                 "the film was a bad plot"]
    masked_word = [1, 3, 2, 4]     # single-piece words, by position
    texts = [" ".join("[MASK]" if i == j else w
                      for i, w in enumerate(s.split()))
             for s, j in zip(sentences, masked_word)]
    got = served(text=tf.constant(texts))
    # The Python path: pack the original text, put the mask id at the
    # word's piece ([CLS] first), run the pretrainer.
    inputs = BertPreprocessor(TOKENS, 32)(tf.constant(sentences))
    ids = inputs["input_word_ids"].numpy()
    positions = (np.array(masked_word)[:, None] + 1).astype(np.int32)
    np.put_along_axis(ids, positions, 4, axis=1)
    batch = {k: v.numpy() for k, v in inputs.items()}
    logits = pretrainer(dict(batch, input_word_ids=ids,
                             masked_lm_positions=positions),
                        training=False)["mlm_logits"].numpy()
    np.testing.assert_array_equal(got["token_ids"].numpy()[:, 0, 0],
                                  logits[:, 0].argmax(-1))
    probabilities = got["probabilities"].numpy()
    assert (np.diff(probabilities[:, 0], axis=-1) <= 0).all()
    assert got["tokens"].numpy()[0, 1].tolist() == [b""] * 3  # padding
    assert got["count"].numpy().tolist() == [1] * 4


@pytest.mark.slow
def test_hostile_and_maskless_text_gets_zero_results(fill_export, tmp_path,
                                                     capsys):
    out = fill_export[2]
    served = export_lib.load_exported(out).signatures["serving_default"]
    result = served(text=tf.constant(HOSTILE + [b"the [MASK] [MASK] "
                                                b"[MASK] film"]))
    assert result["count"].numpy().tolist() == [0] * (len(HOSTILE) + 1)
    assert result["masks"].numpy()[-1] == 3
    assert np.isfinite(result["probabilities"].numpy()).all()
    assert run_serving_check(out, ["the [MASK] was good", ""], tmp_path) \
        == ["count=1\tmasks=1", "count=0\tmasks=0"]
    assert cli.main(["predict", "--model", str(out), "the [MASK] was good",
                     "no mask here"]) == 0
    printed = capsys.readouterr().out
    assert "mask 1: " in printed and "(no mask in the text)" in printed


@pytest.mark.slow
def test_encoder_without_mlm_head_is_refused(tmp_path):
    save_tiny_checkpoint(tmp_path / "enc", TOKENS, 1)
    with pytest.raises(ValueError, match="no masked-LM head"):
        export_lib.export("fill_mask", tmp_path / "enc", tmp_path / "x" / "1",
                                    log=lambda *a: None)


@pytest.mark.slow
def test_antiberty_export_agrees_with_pytorch(antiberty_dir, tmp_path):
    converted = tmp_path / "antiberty"
    checkpoints.convert("hf", antiberty_dir, converted, log=lambda *a: None)
    out = tmp_path / "export" / "antiberty" / "1"
    export_lib.export("fill_mask", converted, out, log=lambda *a: None)
    reference = np.load(ROOT / "examples" / "reference" /
                        "antiberty_reference.npz")
    vocab = (converted / "vocab.txt").read_text().split()
    texts = [" ".join(vocab[i] for i in ids[mask > 0][1:-1])
             for ids, mask in zip(reference["input_word_ids"],
                                  reference["input_mask"])]
    assert "[MASK]" in texts[0]
    got = export_lib.load_exported(out).signatures["serving_default"](
        text=tf.constant(texts))
    want = reference["mlm_logits"].argmax(-1)        # PyTorch, 4 per chain
    np.testing.assert_array_equal(got["token_ids"].numpy()[:, :4, 0], want)


@pytest.mark.slow
def test_bf16_export_agrees_with_fp32(fill_export, tmp_path):
    _, directory, out = fill_export
    shares = assert_bf16_export_agrees(
        None, out, tmp_path,
        [{"text": ["the [MASK] was good", "no mask", "[MASK] [MASK] film"]}],
        export=lambda bf16: export_lib.export(
            "fill_mask", directory, bf16, log=lambda *a: None,
            seq_length=32, top_k=3, max_masks=2, precision="bf16"))
    assert shares["count"] == shares["masks"] == 1.0
    # Random tiny weights: near-tied tokens may swap places in the top 3.
    assert shares["token_ids"] >= 1 / 3
    shares = assert_int8_export_agrees(
        None, out, tmp_path,
        [{"text": ["the [MASK] was good", "no mask", "[MASK] [MASK] film"]},
         {"text": HOSTILE}],
        atol=0.1, export=lambda int8: export_lib.export(
            "fill_mask", directory, int8, log=lambda *a: None,
            seq_length=32, top_k=3, max_masks=2, precision="int8"))
    assert shares["count"] == shares["masks"] == 1.0
    assert shares["token_ids"] >= 1 / 3

