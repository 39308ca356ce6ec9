"""The span QA and tagging TFLite exports against their SavedModels, on
the real test sets: WNUT-16 QA (SQuAD 2.0 F1 of the answers each runtime
gives, at the run's stored no-answer threshold) and WNUT-16 NER
(entity-level F1, seqeval's default mode).

Exports each fine-tuned run as a SavedModel and as TFLite fp32 and
dynamic-range int8, then prints each one's metric, its agreement with the
SavedModel (the same answer text and span; the same entity list), file
size and batch-1 latency (p50/p99 over real test inputs, 2 threads each).
Then a 5,000-word context goes through the QA TFLite file in one call.

    .venv/bin/python benchmarks/tflite_qa_ner.py \\
        --qa runs/wnut_qa_minilm --ner runs/wnut_ner_minilm
"""

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
THREADS = 2

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from timing import batch1_latencies  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(THREADS)
tf.config.threading.set_inter_op_parallelism_threads(THREADS)


def _qa_outputs(run, examples, batch=16):
    """(answer text, start, end) per question."""
    out = []
    for i in range(0, len(examples), batch):
        chunk = examples[i:i + batch]
        result = run([e["question"] for e in chunk],
                     [e["context"] for e in chunk])
        out += [(a.decode("utf-8", "replace"), int(s), int(t)) for a, s, t
                in zip(result["answer"], result["start"], result["end"])]
    return out


def _ner_outputs(run, sentences, batch=16):
    """Per sentence, its entities as (type, start, end) code points."""
    out = []
    for i in range(0, len(sentences), batch):
        result = run([" ".join(w) for w, _ in sentences[i:i + batch]])
        for row, count in enumerate(result["count"]):
            out.append([(result["type"][row][k].decode(),
                         int(result["start"][row][k]),
                         int(result["end"][row][k]))
                        for k in range(count)])
    return out


def _bio(words, entities):
    """BIO tags of `entities` (code-point spans) over space-joined words."""
    tags, position = ["O"] * len(words), []
    at = 0
    for word in words:
        position.append((at, at + len(word)))
        at += len(word) + 1
    for kind, start, end in entities:
        inside = [i for i, (s, e) in enumerate(position)
                  if s >= start and e <= end]
        for n, i in enumerate(inside):
            tags[i] = ("B-" if n == 0 else "I-") + kind
    return tags


def tokenizer_differences(checkpoint, texts):
    """How many of `texts` the TFLite tokenizer (fused normalizer) cuts
    into other pieces than the SavedModel's."""
    from bert_tf.tasks import load_finetuned
    from bert_tf.text.tokenizer import BertTokenizer

    task, _, vocab, _ = load_finetuned(checkpoint)
    tokenizer = BertTokenizer(vocab, task.spec.lower_case)
    ours = tokenizer(tf.constant(texts)).to_list()
    fused = tokenizer.fused().tokenize(tf.constant(texts)).to_list()
    return sum(a != b for a, b in zip(ours, fused))


def _runtimes(checkpoint, out, names, log):
    """{name: (call(**inputs) -> NumPy outputs, bytes)}: the SavedModel and
    the TFLite fp32 and int8 files of one run."""
    from bert_tf.serving.export import export_model, load_exported
    from bert_tf.serving.tflite import TFLiteModel, export_tflite

    saved = export_model(checkpoint, out / "saved" / "1", log=log)["path"]
    serve = load_exported(saved).signatures["serving_default"]
    runtimes = {"SavedModel": (
        lambda **x: {k: v.numpy() for k, v in serve(**{
            n: tf.constant(v) for n, v in x.items()}).items()},
        sum(p.stat().st_size for p in saved.rglob("*") if p.is_file()))}
    for name, quantize in (("TFLite fp32", "none"),
                           ("TFLite int8", "dynamic_int8")):
        path = export_tflite(checkpoint, out / f"{names}_{quantize}.tflite",
                             quantize, log=log)["path"]
        model = TFLiteModel(path, THREADS)
        runtimes[name] = (model, path.stat().st_size)
    return runtimes


def qa(checkpoint, out, calls):
    from bert_tf.tasks.span_qa.data import load_wnut_qa
    from bert_tf.tasks.span_qa.metrics import squad_v2

    test = list(load_wnut_qa().split("test"))
    golds = [list(e["answers"]) for e in test]
    runtimes = _runtimes(checkpoint, out, "qa", lambda line: None)
    texts = [e["question"] for e in test] + [e["context"] for e in test]
    differ = tokenizer_differences(checkpoint, texts)
    print(f"\nspan QA {checkpoint}: WNUT-16 QA test, {len(test)} questions;"
          f" the TFLite tokenizer cuts {differ} of the {len(texts)} "
          "questions and contexts otherwise")
    print(f"{'':<12} {'F1':>6} {'EM':>6} {'agree':>7} {'MB':>7} "
          f"{'b1 p50 ms':>10} {'b1 p99 ms':>10}")
    reference = None
    for name, (model, size) in runtimes.items():
        def run(q, c, m=model):
            return m(question=q, context=c)
        answers = _qa_outputs(run, test)
        reference = reference or answers
        scores = squad_v2(golds, [a for a, _, _ in answers])
        agree = np.mean([a == b for a, b in zip(answers, reference)])
        p50, p99 = batch1_latencies(
            lambda e: run([e["question"]], [e["context"]]), test, calls)
        print(f"{name:<12} {scores['f1']:6.2f} {scores['exact']:6.2f} "
              f"{agree:7.1%} {size / 1e6:7.1f} {p50:10.2f} {p99:10.2f}",
              flush=True)
    # A 5,000-word context (real tweets), the answer's tweet last.
    model = runtimes["TFLite fp32"][0]
    example = next(e for e in test if e["answers"])
    filler = " ".join(e["context"] for e in test[:400])
    words = filler.split()[:5000 - len(example["context"].split())]
    context = " ".join(words) + " " + example["context"]
    start = time.perf_counter()
    result = model(question=[example["question"]], context=[context])
    seconds = time.perf_counter() - start
    print(f"5,000-word context in one TFLite call: {seconds:.2f} s, "
          f"answer {result['answer'][0].decode()!r} at code point "
          f"{result['start'][0]} (gold {example['answers']}; the tweet "
          f"starts at {len(context) - len(example['context'])})")


def ner(checkpoint, out, calls):
    from seqeval.metrics import f1_score

    from bert_tf.tasks.tagging.data import load_wnut_ner

    test = list(load_wnut_ner().split("test"))
    runtimes = _runtimes(checkpoint, out, "ner", lambda line: None)
    gold = [list(tags) for _, tags in test]
    differ = tokenizer_differences(checkpoint,
                                   [" ".join(w) for w, _ in test])
    print(f"\ntagging {checkpoint}: WNUT-16 NER test, {len(test)} "
          f"sentences; the TFLite tokenizer cuts {differ} otherwise")
    print(f"{'':<12} {'F1':>6} {'agree':>7} {'MB':>7} {'b1 p50 ms':>10} "
          f"{'b1 p99 ms':>10}")
    reference = None
    for name, (model, size) in runtimes.items():
        def run(texts, m=model):
            return m(text=texts)
        entities = _ner_outputs(run, test)
        reference = reference or entities
        predicted = [_bio(words, e) for (words, _), e in zip(test, entities)]
        agree = np.mean([a == b for a, b in zip(entities, reference)])
        p50, p99 = batch1_latencies(
            lambda s: run([" ".join(s[0])]), test, calls)
        print(f"{name:<12} {100 * f1_score(gold, predicted):6.2f} "
              f"{agree:7.1%} {size / 1e6:7.1f} {p50:10.2f} {p99:10.2f}",
              flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--qa", default="runs/wnut_qa_minilm")
    parser.add_argument("--ner", default="runs/wnut_ner_minilm")
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="bench_tflite_qa_ner_"))
    print(f"{THREADS} threads; TF {tf.__version__}; "
          f"{time.strftime('%Y-%m-%d')}")
    if args.qa:
        qa(args.qa, out / "qa", args.calls)
    if args.ner:
        ner(args.ner, out / "ner", args.calls)


if __name__ == "__main__":
    main()
