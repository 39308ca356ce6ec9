"""The BERT family in HF's layout (cased BERT, ELECTRA, DistilBERT) against
HF in PyTorch, and the in-graph tokenizer against HF's fast tokenizer on
real multilingual text. The fixtures come from
`scripts/make_family_fixtures.py` (tiny random models written by
transformers; see its docstring)."""

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import checkpoints
from bert_tf.models.discriminator import BertDiscriminator
from bert_tf.models.encoder import BertEncoder
from bert_tf.text.tokenizer import BertTokenizer
from multilingual_vocab import build_vocab, text_digest

FAMILIES = Path(__file__).parent / "fixtures" / "families"
QUIET = dict(log=lambda *a: None)


def _inputs(reference):
    return {k: reference[k] for k in ("input_word_ids", "input_mask",
                                      "input_type_ids")}


def _hidden_delta(encoder, reference):
    out = encoder(_inputs(reference))
    ours = [out["embedding_output"]] + list(out["encoder_outputs"])
    mask = reference["input_mask"][None, ..., None]
    theirs = reference["hidden_states"]
    assert len(ours) == len(theirs)
    return float(np.abs((np.stack([o.numpy() for o in ours]) - theirs) *
                        mask).max())


@pytest.mark.parametrize("name", ["bert_cased", "electra_small",
                                  "electra_base", "distilbert"])
def test_hidden_states_match_hf_torch(name):
    reference = np.load(FAMILIES / name / "reference.npz")
    encoder = BertEncoder.from_preset(f"hf:{FAMILIES / name}")
    assert _hidden_delta(encoder, reference) <= 1e-4


def test_distilbert_has_no_segment_embedding():
    encoder = BertEncoder.from_preset(str(FAMILIES / "distilbert"))
    assert encoder.config.type_vocab_size == 0
    assert encoder.embeddings.type_embeddings is None
    reference = np.load(FAMILIES / "distilbert" / "reference.npz")
    inputs = _inputs(reference)
    other = dict(inputs, input_type_ids=np.ones_like(
        inputs["input_type_ids"]))
    np.testing.assert_array_equal(encoder(inputs)["sequence_output"],
                                  encoder(other)["sequence_output"])


def test_electra_small_projects_narrow_embeddings():
    encoder = BertEncoder.from_preset(str(FAMILIES / "electra_small"))
    assert encoder.config.embedding_size == 16
    assert tuple(encoder.embeddings.projection.kernel.shape) == (16, 32)
    assert encoder.count_params() == encoder.config.num_parameters()


@pytest.mark.parametrize("name", ["electra_small", "electra_base"])
def test_electra_discriminator_head_matches_hf(name):
    reference = np.load(FAMILIES / name / "reference.npz")
    model = BertDiscriminator.from_preset(f"hf:{FAMILIES / name}")
    logits = model(_inputs(reference))["replaced_logits"].numpy()
    mask = reference["input_mask"]
    assert np.abs((logits - reference["head_logits"]) * mask).max() <= 1e-4


@pytest.mark.parametrize("name", ["bert_cased", "distilbert"])
def test_masked_lm_head_matches_hf(name, tmp_path):
    reference = np.load(FAMILIES / name / "reference.npz")
    converted = checkpoints.convert("hf", FAMILIES / name, tmp_path, **QUIET)
    assert converted.pretrainer is not None
    inputs = _inputs(reference)
    sequence = converted.encoder(inputs)["sequence_output"]
    positions = np.tile(np.arange(12, dtype="int32"), (3, 1))
    logits = converted.pretrainer.masked_lm(sequence, positions).numpy()
    mask = reference["input_mask"][..., None]
    assert np.abs((logits - reference["head_logits"]) * mask).max() <= 1e-4
    # What convert wrote loads back the same.
    again = checkpoints.load_encoder(tmp_path)
    assert _hidden_delta(again.encoder, reference) <= 1e-4


def test_other_families_are_refused_by_name(tmp_path):
    directory = tmp_path / "roberta"
    directory.mkdir()
    (directory / "config.json").write_text(
        '{"model_type": "roberta", "vocab_size": 10, "hidden_size": 8, '
        '"num_hidden_layers": 1, "num_attention_heads": 2, '
        '"intermediate_size": 16}')
    with pytest.raises(ValueError, match="model_type = 'roberta'"):
        checkpoints.encoder_config_from_json(directory / "config.json", "hf")


@pytest.fixture(scope="module")
def multilingual():
    from bert_tf.samples.readers import multilingual_sentences
    sentences = multilingual_sentences()
    return sentences, np.load(FAMILIES / "multilingual_tokens.npz")


@pytest.mark.parametrize("case", ["cased", "uncased"])
def test_multilingual_tokens_equal_hf_fast_tokenizer(multilingual, case):
    """Chinese, Japanese, Arabic, Hebrew, Thai, Armenian, Bengali, Persian,
    Cyrillic, accented Latin and emoji (ZWJ sequences, flags, variation
    selectors): every piece as HF's `BertTokenizerFast` gives it."""
    sentences, expected = multilingual
    vocab = build_vocab(sentences)
    assert text_digest(sentences) == str(expected["text_sha256"])
    assert text_digest(vocab) == str(expected["vocab_sha256"])
    tokenizer = BertTokenizer(vocab, lower_case=case == "uncased")
    ours = tokenizer(tf.constant(sentences))
    lengths = expected[f"{case}_lengths"]
    assert expected[f"{case}_ids"].size >= 2000
    np.testing.assert_array_equal(ours.row_lengths().numpy(), lengths)
    np.testing.assert_array_equal(ours.flat_values.numpy(),
                                  expected[f"{case}_ids"])


def test_pretraining_continues_from_a_named_checkpoint():
    """`init_checkpoint: NAME` in a pre-training config: the checkpoint's
    config and weights, its masked-LM head kept, a missing NSP head new."""
    from bert_tf import config as config_lib, pretrain
    from bert_tf.models.pretrainer import BertPretrainer
    cfg = config_lib.PretrainConfig(
        encoder=config_lib.EncoderConfig.from_name("bert_tiny"),
        init_checkpoint=f"hf:{FAMILIES / 'distilbert'}")
    lines = []
    cfg, weights = pretrain.named_init(cfg, lines.append)
    assert cfg.encoder.type_vocab_size == 0 and cfg.encoder.hidden_size == 32
    model = BertPretrainer(BertEncoder.from_config_object(cfg.encoder))
    pretrain._assign_named(weights, model, lines.append)
    assert lines[-1].startswith("the checkpoint has no next_sentence head")
    reference = np.load(FAMILIES / "distilbert" / "reference.npz")
    positions = np.tile(np.arange(12, dtype="int32"), (3, 1))
    logits = model({**_inputs(reference), "masked_lm_positions": positions}
                   )["mlm_logits"].numpy()
    mask = reference["input_mask"][..., None]
    assert np.abs((logits - reference["head_logits"]) * mask).max() <= 1e-4
    # A bert_tf checkpoint path is still the trainer's to restore.
    plain = config_lib.PretrainConfig(init_checkpoint="runs/phase1")
    assert pretrain.named_init(plain) == (plain, None)
