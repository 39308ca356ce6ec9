"""A request costs what its limits say, whatever its bytes: each hostile
request below, on exports with the demo's limits, is refused with
INVALID_ARGUMENT naming the input, the rule and the flag, or answered
within 5 s and +300 MB (`bert_tf.serving.limits`), measured in a fresh
serving process per export: the refusals first, then the requests that
must be answered, each timed alone with the peak memory reset before it."""

import json
import os
import subprocess
import sys

import pytest

from bert_tf.models.encoder import BertEncoder
from bert_tf.serving import export as export_lib
from bert_tf.tasks.classification.model import BertClassifier
from bert_tf.tasks.multiple_choice.model import BertMultipleChoice
from bert_tf.tasks.span_qa.model import BertSpanLabeler
from test_request_memory import VOCAB, text_of

# MiniLM-L6's QA default (`limits.default_max_input_chars`): the demo's.
QA_CHARS = 90_000


def encoder():
    return BertEncoder(vocab_size=len(VOCAB.tokens), hidden_size=32,
                       num_layers=2, num_heads=2, intermediate_size=64,
                       max_position_embeddings=128)


EXPORTS = {
    "qa": (lambda: BertSpanLabeler(encoder()), "span_qa",
           dict(seq_length=128, doc_stride=64, max_query_length=16,
                version_2=True), {"max_input_chars": QA_CHARS}),
    "sentiment": (lambda: BertClassifier(encoder(), 2), "classification",
                  dict(seq_length=128, labels=["negative", "positive"]), {}),
    "choices": (lambda: BertMultipleChoice(encoder()), "multiple_choice",
                dict(seq_length=64), {}),
}

# The requests of one export in a fresh process, built there from specs
# read from stdin, in order: [{inputs: {input: [[hex bytes, repeat,
# copies], ...]}, cols: {input: cols}}, ...] (each entry `copies` texts of
# the bytes `repeat` times; "cols" shapes an input [rows, cols]). For each
# it prints one line: whether it was refused (and the line) or answered,
# its seconds and the rise of peak resident memory (MB) over the memory
# held before it (`clear_refs` resets the peak).
REQUESTS = r"""
import json, sys, time
from pathlib import Path
import numpy as np
import tensorflow as tf
from bert_tf.serving.export import load_exported
from bert_tf.serving.limits import refusal_line

def peak():
    fields = dict(line.split(":", 1) for line in
                  Path("/proc/self/status").read_text().splitlines())
    return int(fields["VmHWM"].split()[0]) / 1024

def request_of(spec):
    request = {}
    for name, entries in spec["inputs"].items():
        texts = [bytes.fromhex(h) * repeat for h, repeat, copies in entries
                 for _ in range(copies)]
        array = np.array(texts, dtype=object)
        if name in spec.get("cols", {}):
            array = array.reshape(-1, spec["cols"][name])
        request[name] = tf.constant(array)
    return request

serve = load_exported(sys.argv[1]).signatures["serving_default"]
specs = json.load(sys.stdin)
# A server is warm when requests come: one small request first, so the
# time below is the request's own, not the signature's first call.
serve(**{name: tf.constant([[b"a"]] if name in specs[0].get("cols", {})
                           else [b"a"]) for name in specs[0]["inputs"]})
for spec in specs:
    request = request_of(spec)
    Path("/proc/self/clear_refs").write_text("5")
    before, start = peak(), time.perf_counter()
    try:
        serve(**request)
        outcome = "answered"
    except tf.errors.InvalidArgumentError as error:
        outcome = "refused: " + refusal_line(error.message)
    print(json.dumps({"outcome": outcome,
                      "seconds": time.perf_counter() - start,
                      "rise_mb": peak() - before}), flush=True)
    del request
"""


def _texts(text, copies=1, repeat=1):
    data = text if isinstance(text, bytes) else text.encode()
    return [data.hex(), repeat, copies]


CONTINUATION = bytes(range(0x80, 0xC0))  # 64 bytes, 0 characters
CASES = {
    # (export, inputs, cols, what must happen: "answered" or the rule)
    "qa: a context of 4,000,000 continuation bytes": (
        "qa", {"question": [_texts("who")],
               "context": [_texts(CONTINUATION, repeat=62_500)]}, {},
        "`context` holds a text of 4000000 bytes, over the limit of 360000 "
        "(4 bytes per character of `bert-tf export --max-input-chars` "
        "90000)"),
    "qa: an 8,000-word context beside 4,000 empty ones": (
        "qa", {"question": [_texts("who", 4_001)],
               "context": [_texts(text_of(8_000)), _texts("", 4_000)]}, {},
        "`question` holds 4001 texts in one request, over the limit of "
        "1024 set by `bert-tf export --max-batch-rows`"),
    "qa: an 8,000-word context beside 500 empty ones": (
        "qa", {"question": [_texts("who", 501)],
               "context": [_texts(text_of(8_000)), _texts("", 500)]}, {},
        "characters in one request (its texts x the longest one), over the "
        "limit of 360000 set by `bert-tf export --max-batch-chars`"),
    "qa: the longest text a request may pad, beside 8 empty ones": (
        "qa", {"question": [_texts("who", 9)],
               "context": [_texts(text_of(7_000)), _texts("", 8)]}, {},
        "answered"),
    "sentiment: 200,000 empty texts": (
        "sentiment", {"text": [_texts("", 200_000)]}, {},
        "`text` holds 200000 texts in one request, over the limit of 1024 "
        "set by `bert-tf export --max-batch-rows`"),
    "sentiment: 1,024 empty texts": (
        "sentiment", {"text": [_texts("", 1_024)]}, {}, "answered"),
    "choices: a long context with 1,000 choices": (
        "choices", {"context": [_texts(text_of(20_000))],
                    "choices": [_texts("a fine film", 1_000)]},
        {"choices": 1_000}, "answered"),
    "choices: 2,000 choices": (
        "choices", {"context": [_texts("the film")],
                    "choices": [_texts("a", 2_000)]}, {"choices": 2_000},
        "`choices` holds 2000 texts in one request, over the limit of 1024 "
        "set by `bert-tf export --max-batch-rows`"),
}


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    paths = {}
    for name, (build, kind, fields, limits) in EXPORTS.items():
        paths[name] = root / name / "1"
        export_lib.export_keras_model(build(), paths[name], kind, VOCAB,
                                      log=lambda *a: None, **limits,
                                      **fields)
    return paths


@pytest.fixture(scope="module")
def outcomes(exports):
    """Every case: one process per export (two at a time), its refusals
    before its answered requests."""
    by_export = {}
    for case, (export, *_) in CASES.items():
        by_export.setdefault(export, []).append(case)
    for cases in by_export.values():
        cases.sort(key=lambda case: CASES[case][3] == "answered")
    results, names = {}, list(by_export)
    for start in range(0, len(names), 2):
        children = {}
        for export in names[start:start + 2]:
            cases = by_export[export]
            child = subprocess.Popen(
                [sys.executable, "-c", REQUESTS, str(exports[export])],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True,
                env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
            child.stdin.write(json.dumps(
                [{"inputs": CASES[case][1], "cols": CASES[case][2]}
                 for case in cases]))
            child.stdin.close()
            children[export] = child
        for export, child in children.items():
            out = child.stdout.read()
            assert child.wait(timeout=300) == 0, child.stderr.read()[-2000:]
            lines = [json.loads(line) for line in out.strip().splitlines()
                     if line.startswith("{")]
            assert len(lines) == len(by_export[export]), out[-2000:]
            results.update(zip(by_export[export], lines))
    return results


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_hostile_request_is_refused_or_answered_within_bounds(outcomes,
                                                              case):
    expected = CASES[case][3]
    got = outcomes[case]
    if expected == "answered":
        assert got["outcome"] == "answered", got
    else:
        assert got["outcome"].startswith("refused: "), got
        assert expected in got["outcome"], got
    assert got["seconds"] < 5, got
    assert got["rise_mb"] < 300, got


@pytest.mark.slow
def test_export_records_and_prints_its_row_limit(exports):
    info = json.loads((exports["qa"] / "assets.extra" / "bert_tf.json")
                      .read_text())
    assert (info["max_input_chars"], info["max_batch_chars"],
            info["max_batch_rows"], info["pads_to_longest"]) == (
        QA_CHARS, 4 * QA_CHARS, 1_024, True)
    info = json.loads((exports["sentiment"] / "assets.extra" /
                       "bert_tf.json").read_text())
    assert (info["max_batch_rows"], info["pads_to_longest"]) == (1_024,
                                                                 False)
