"""The QA and NER rows of `benchmarks/serving.py`: our exports of both
kinds (BERT-Base and MiniLM, every precision) beside HF's
`question-answering` and `token-classification` pipelines, at batch 1
(p50 and p99 ms) and batch 32 (items per second), on real WNUT inputs:
its questions over their tweets (seq 384 windows, stride 128) and its
tweets. Each kind is timed in interleaved rounds (`timing`).
"""

import numpy as np
import tensorflow as tf

from timing import executed_nodes, interleaved_latencies, interleaved_rates

# Our exports' name prefix -> (HF QA model, HF NER model).
TASK_FAMILIES = {"": ("span_qa", "tagging"),
                 "minilm ": ("minilm_span_qa", "minilm_tagging")}
BATCH = 32


def _ours(kind, path):
    """(function of a list of inputs, feeds of one input for
    `executed_nodes`) for our export of `kind` at `path`."""
    from bert_tf.serving.export import load_exported

    serve = load_exported(path).signatures["serving_default"]
    if kind == "span_qa":
        def call(items):
            return serve(question=tf.constant([q for q, _ in items]),
                         context=tf.constant([c for _, c in items]))
        return call, lambda item: {"question": [item[0]],
                                   "context": [item[1]]}
    return (lambda items: serve(text=tf.constant(items)),
            lambda item: {"text": [item]})


def _hf_pipeline(kind, model, tokenizer):
    """HF's pipeline of `kind` on `model`, as a function of a list."""
    from transformers import pipeline

    if kind == "span_qa":
        hf = pipeline("question-answering", model=model, tokenizer=tokenizer,
                      device="cpu")
        return lambda items: hf(
            question=[q for q, _ in items], context=[c for _, c in items],
            max_seq_len=384, doc_stride=128, handle_impossible_answer=True,
            batch_size=len(items))
    hf = pipeline("token-classification", model=model, tokenizer=tokenizer,
                  device="cpu", aggregation_strategy="simple")
    return lambda items: hf(list(items), batch_size=len(items))


def _inputs():
    """{kind: real WNUT inputs}: (question, tweet) pairs and tweets."""
    from bert_tf.samples import readers
    from bert_tf.tasks.span_qa.data import load_wnut_qa

    test = load_wnut_qa().split("test")
    return {"span_qa": [(e["question"], e["context"]) for e in test],
            "tagging": [" ".join(tokens)
                        for tokens, _ in readers.read_wnut()]}


def qa_and_ner(args, export_path, models, tokenizer, precisions):
    """{name: (b1 p50 ms, b1 p99 ms, b32 items/s, nodes or None)} of QA
    and NER, ours in `precisions` (our export `name` at
    `export_path(name)`) beside HF's pipeline on `models[...]`."""
    rows = {}
    for kind, items in _inputs().items():
        batches = [[items[(b * BATCH + i) % len(items)] for i in range(BATCH)]
                   for b in range(args.batches)]
        for family, hf_names in TASK_FAMILIES.items():
            hf_name = hf_names[0 if kind == "span_qa" else 1]
            functions, nodes = {}, {}
            for precision in precisions:
                name = f"{family}{kind}: ours {precision}"
                functions[name], feeds = _ours(kind, export_path(name))
                nodes[name] = executed_nodes(export_path(name),
                                             feeds(items[0]))
            functions[f"{family}{kind}: HF pipeline (PyTorch)"] = \
                _hf_pipeline(kind, models[hf_name], tokenizer)
            latencies = interleaved_latencies(
                {name: (lambda f: lambda item: f([item]))(function)
                 for name, function in functions.items()}, items,
                args.calls, args.rounds)
            rates = interleaved_rates(functions, batches, args.rounds)
            for name, ms in latencies.items():
                rows[name] = (np.percentile(ms, 50), np.percentile(ms, 99),
                              rates[name], nodes.get(name))
    return rows


def print_rows(rows):
    """Prints `qa_and_ner`'s rows as a table, after the versions."""
    import platform
    import time

    import torch
    import transformers

    print(f"\nQA and NER: {platform.processor() or platform.machine()}; "
          f"TF {tf.__version__}, torch {torch.__version__}, transformers "
          f"{transformers.__version__}; {time.strftime('%Y-%m-%d')}")
    print(f"{'real WNUT inputs':<38} {'b1 p50 ms':>10} "
          f"{'b1 p99 ms':>10} {'b32 items/s':>11} {'nodes':>6}")
    for name, (p50, p99, rate, nodes) in rows.items():
        print(f"{name:<38} {p50:10.2f} {p99:10.2f} {rate:11.1f} "
              f"{nodes or '':>6}", flush=True)
