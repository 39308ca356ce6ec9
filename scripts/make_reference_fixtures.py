"""Writes the independent reference fixtures the parity tests compare with.

The reference is HF transformers in PyTorch on the same real files: the
Python `BertTokenizerLegacy` (a port of the original BERT tokenizer),
`BertModel` for all-MiniLM-L6-v2 and `BertForMaskedLM` for AntiBERTy.
Nothing from bert_tf is used here except the asset fetcher.

    make parity-fixtures      # installs torch + transformers, runs this

Writes examples/reference/minilm_reference.npz and antiberty_reference.npz
(read by the parity tests and the demo) and, with sentence-transformers
installed, minilm_sentence_embeddings.npz (the sentence-embedding parity
test). Name some of them to write only those:

    python scripts/make_reference_fixtures.py minilm_sentence_embeddings
"""

import sys
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers import BertConfig, BertForMaskedLM, BertModel
from transformers.models.bert.tokenization_bert_legacy import \
    BertTokenizerLegacy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bert_tf import samples  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "examples" / "reference"
SEQUENCE_LENGTH = 32

# Varied real text: punctuation, accents, numbers, CJK, emoji, a long
# sentence that gets truncated, whitespace-only and an empty string.
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Café déjà vu: naïve résumés in São Paulo, Zürich and Kraków!",
    "On 14 March 2024 the index rose 3.75% to 18,432.10 points (a record).",
    "Don't stop-believing... it's (almost) over?!",
    "Anarchism is a political philosophy and movement that is skeptical of "
    "all justifications for authority and seeks to abolish the institutions "
    "it claims maintain unnecessary coercion and hierarchy, typically "
    "including the state and capitalism.",
    "",
    "   ",
    "東京は日本の首都です。",
    "I loved it 😀 — 10/10, would watch again.",
    "ALL CAPS SHOUTING WITH ÅNGSTRÖM UNITS",
    "e-mail me at someone@example.com or call +1 (555) 010-2030.",
    "The film's pacing is slow, but the performances are genuinely moving.",
]


def minilm_reference():
    path = samples.fetch("minilm", log=print)
    tokenizer = BertTokenizerLegacy(str(path / "vocab.txt"),
                                    do_lower_case=True)
    encoded = tokenizer(SENTENCES, padding="max_length", truncation=True,
                        max_length=SEQUENCE_LENGTH, return_tensors="pt",
                        return_token_type_ids=True)
    model = BertModel.from_pretrained(str(path)).eval()
    with torch.no_grad():
        out = model(**encoded)
    np.savez_compressed(
        FIXTURES / "minilm_reference.npz",
        sentences=np.array(SENTENCES, dtype=object).astype(str),
        input_word_ids=encoded["input_ids"].numpy().astype(np.int32),
        input_mask=encoded["attention_mask"].numpy().astype(np.int32),
        input_type_ids=encoded["token_type_ids"].numpy().astype(np.int32),
        sequence_output=out.last_hidden_state.numpy(),
        pooled_output=out.pooler_output.numpy(),
        transformers_version=transformers.__version__,
        torch_version=torch.__version__)


def antiberty_reference():
    path = samples.fetch("antiberty", log=print) / "AntiBERTy_md_smooth"
    config = BertConfig.from_pretrained(str(path))
    model = BertForMaskedLM(config).eval()
    state = torch.load(path / "pytorch_model.bin", map_location="cpu",
                       weights_only=True)
    model.load_state_dict(state, strict=False)
    # Real antibody heavy-chain sequences, one letter per token.
    chains = [
        "EVQLVESGGGLVQPGGSLRLSCAASGFTFSSYAMSWVRQAPGKGLEWVS",
        "QVQLQQSGAELARPGASVKMSCKASGYTFTSYTMHWVKQRPGQGLEWIG",
        "DIQMTQSPSSLSASVGDRVTITCRASQSISSYLN",
    ]
    vocab = (path.parent / "vocab.txt").read_text().split()
    length = max(len(c) for c in chains) + 2
    ids = np.zeros((len(chains), length), np.int32)
    mask = np.zeros_like(ids)
    for row, chain in enumerate(chains):
        tokens = ["[CLS]"] + list(chain) + ["[SEP]"]
        ids[row, :len(tokens)] = [vocab.index(t) for t in tokens]
        mask[row, :len(tokens)] = 1
    positions = np.array([[3, 10, 20, 30], [1, 5, 25, 45], [2, 9, 17, 33]],
                         np.int32)
    masked = ids.copy()
    np.put_along_axis(masked, positions, vocab.index("[MASK]"), axis=1)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor(masked, dtype=torch.long),
                       attention_mask=torch.tensor(mask)).logits.numpy()
    np.savez_compressed(
        FIXTURES / "antiberty_reference.npz",
        input_word_ids=masked, input_mask=mask,
        input_type_ids=np.zeros_like(masked), masked_lm_positions=positions,
        masked_lm_ids=np.take_along_axis(ids, positions, axis=1),
        mlm_logits=np.take_along_axis(logits, positions[..., None], axis=1),
        transformers_version=transformers.__version__)


def minilm_sentence_embeddings(sentences=SENTENCES):
    """all-MiniLM-L6-v2 as sentence-transformers runs it: the transformer
    (texts cut at 256 pieces), mean pooling over the mask, L2 norm."""
    import sentence_transformers
    from sentence_transformers import SentenceTransformer, models

    path = samples.fetch("minilm", log=print)
    transformer = models.Transformer(str(path), max_seq_length=256)
    model = SentenceTransformer(modules=[
        transformer,
        models.Pooling(transformer.auto_model.config.hidden_size, "mean"),
        models.Normalize()], device="cpu")
    embeddings = model.encode(list(sentences), batch_size=len(sentences),
                              convert_to_numpy=True)
    return embeddings, sentence_transformers.__version__


def write_sentence_embeddings():
    embeddings, version = minilm_sentence_embeddings()
    np.savez_compressed(
        FIXTURES / "minilm_sentence_embeddings.npz",
        sentences=np.array(SENTENCES, dtype=object).astype(str),
        embeddings=embeddings, sentence_transformers_version=version,
        torch_version=torch.__version__)


WRITERS = {"minilm_reference": minilm_reference,
           "antiberty_reference": antiberty_reference,
           "minilm_sentence_embeddings": write_sentence_embeddings}

if __name__ == "__main__":
    FIXTURES.mkdir(parents=True, exist_ok=True)
    for name in sys.argv[1:] or WRITERS:
        WRITERS[name]()
        path = FIXTURES / f"{name}.npz"
        print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB)")
