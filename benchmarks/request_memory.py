"""Memory per request of an export, by the length of its text: each row in
a fresh process (load, warm up with a 20-word request, then one request
of N words of real RT sentences), reporting the rise of peak resident
memory over the warm process, the seconds, what came back, and that a
normal request is answered right after.

    .venv/bin/python benchmarks/request_memory.py \
        [--qa demo_out/export/wnut_qa/1] [--ner demo_out/export/wnut_ner/1] \
        [--words 1000 20000 100000 600000]

Run one row alone (what the table runs in each child process):

    .venv/bin/python benchmarks/request_memory.py --one qa \
        --model demo_out/export/wnut_qa/1 --words 100000
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
WARM_WORDS = 20
QUESTION = "Who is mentioned?"


def memory_mb():
    """(resident, peak resident) memory of this process in MB."""
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) / 1024
    return fields["VmRSS"], fields["VmHWM"]


def reset_peak():
    """Starts a new peak-RSS measurement (Linux: writing 5 to clear_refs
    resets VmHWM to the current RSS)."""
    Path("/proc/self/clear_refs").write_text("5")


def real_text(words):
    """`words` words of RT sentences, in file order, repeated as needed."""
    from bert_tf.samples.readers import read_rt_snippets

    pool = " ".join(read_rt_snippets()[0]).split()
    whole, rest = divmod(words, len(pool))
    return " ".join(pool * whole + pool[:rest])


def export_limits(model):
    info = json.loads((Path(model) / "assets.extra" / "bert_tf.json")
                      .read_text())
    return info["max_input_chars"], info["max_batch_chars"]


def request(kind, words, model=None):
    """The request of a row: `words` words, or (`limit`) one text of the
    export's most characters, or (`batch-limit`) as many such texts as a
    request may hold."""
    import tensorflow as tf

    if str(words).isdigit():
        texts = [real_text(int(words))]
    else:
        per_text, per_request = export_limits(model)
        text = real_text(per_text // 4)[:per_text]
        texts = [text] * (per_request // per_text if words == "batch-limit"
                          else 1)
    if kind == "qa":
        return {"question": tf.constant([QUESTION] * len(texts)),
                "context": tf.constant(texts)}
    return {"text": tf.constant(texts)}


def one(kind, model, words):
    """One row, in this process: a JSON line on stdout."""
    import tensorflow as tf

    from bert_tf.serving.export import load_exported

    serve = load_exported(model).signatures["serving_default"]
    serve(**request(kind, WARM_WORDS))
    rss, _ = memory_mb()
    reset_peak()
    inputs = request(kind, words, model)
    text = inputs["context" if kind == "qa" else "text"]
    row = {"kind": kind, "words": words, "warm_rss_mb": round(rss),
           "chars": int(tf.reduce_sum(tf.strings.length(text, "UTF8_CHAR")))}
    start = time.perf_counter()
    try:
        out = serve(**inputs)
        row["answered"] = (out["answer"][0].numpy().decode()[:40]
                           if kind == "qa" else int(out["count"][0]))
    except tf.errors.InvalidArgumentError as error:
        row["refused"] = next(
            (line for line in error.message.splitlines()
             if "assertion failed" in line), error.message)[:240]
    row["seconds"] = round(time.perf_counter() - start, 1)
    row["peak_rise_mb"] = round(memory_mb()[1] - rss)
    after = serve(**request(kind, 20))
    row["normal_after"] = bool(after)
    print(json.dumps(row), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--qa", default="demo_out/export/wnut_qa/1")
    parser.add_argument("--ner", default="demo_out/export/wnut_ner/1")
    parser.add_argument("--words", nargs="+",
                        default=["1000", "20000", "100000", "600000"],
                        help="words per row; `limit`: one text of the "
                        "export's --max-input-chars, `batch-limit`: a "
                        "request of its --max-batch-chars")
    parser.add_argument("--one", choices=["qa", "ner"])
    parser.add_argument("--model")
    args = parser.parse_args()
    if args.one:
        return one(args.one, args.model, args.words[0])
    print(f"{'export':<8}{'words':>12}{'characters':>12}{'seconds':>9}"
          f"{'peak rise MB':>14}{'warm RSS MB':>13}  result")
    for kind, model in (("qa", args.qa), ("ner", args.ner)):
        for words in args.words:
            child = subprocess.run(
                [sys.executable, __file__, "--one", kind, "--model", model,
                 "--words", str(words)], capture_output=True, text=True)
            lines = [line for line in child.stdout.splitlines()
                     if line.startswith("{")]
            if child.returncode or not lines:
                print(f"{kind:<8}{words:>12}  process died (exit "
                      f"{child.returncode}): {child.stderr[-300:]}")
                continue
            row = json.loads(lines[-1])
            result = (f"answered ({row['answered']!r})" if "answered" in row
                      else f"refused: {row['refused']}")
            print(f"{kind:<8}{words:>12}{row['chars']:>12,}{row['seconds']:>9}"
                  f"{row['peak_rise_mb']:>14}{row['warm_rss_mb']:>13}  "
                  f"{result}; normal request after: "
                  f"{'answered' if row['normal_after'] else 'FAILED'}",
                  flush=True)


if __name__ == "__main__":
    main()
