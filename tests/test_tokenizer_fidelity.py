"""Optional: our token ids vs the original BERT tokenizer's on the real
corpus (needs transformers, e.g. `pip install -e .[parity]`)."""

import importlib.util
from pathlib import Path

import pytest

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / \
    "tokenizer_fidelity.py"


def test_identical_ids_on_the_sample_corpus(sample_documents, minilm_dir):
    pytest.importorskip("transformers")
    spec = importlib.util.spec_from_file_location("fidelity", BENCHMARK)
    fidelity = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fidelity)
    sentences = [s for doc in sample_documents for s in doc]
    same, differing = fidelity.compare(sentences, minilm_dir / "vocab.txt")
    assert same / len(sentences) >= 0.998, [d[0] for d in differing[:5]]
