"""A plain Python span decoder with the original `run_squad.py`'s
rules (`write_predictions`), used only in tests to check the in-graph
decoder. Loops over windows and candidates exactly as the original does;
the one shared change is that padding positions are not candidates.

It reads from the features only what the featurizer is not on trial for
here: each window's context positions and their offsets. The rule that
picks each piece's "max context" window is recomputed from the window
layout, as the original's `_check_is_max_context` does, never read from
`token_is_max_context`, so a broken rule in the code under test shows.
"""


def _best_indexes(logits, mask, n_best_size):
    order = sorted(range(len(logits)), key=lambda i: (-logits[i], i))
    return [i for i in order if mask[i]][:n_best_size]


def _doc_spans(context_lengths, doc_stride):
    """(start, length) of each window of one context, as run_squad walks
    them: a window starts `min(length, doc_stride)` after the previous one.
    Only each window's number of context pieces comes from the features."""
    spans, start = [], 0
    for length in context_lengths:
        spans.append((start, length))
        start += min(length, doc_stride)
    return spans


def _is_max_context(spans, index, position):
    """run_squad's `_check_is_max_context`: is `position` (a piece of the
    whole context) best placed in window `index`? Score: the context on its
    shorter side plus 0.01 of the window's length; the earliest on a tie."""
    best_score, best_index = None, None
    for i, (start, length) in enumerate(spans):
        end = start + length - 1
        if position < start or position > end:
            continue
        score = min(position - start, end - position) + 0.01 * length
        if best_score is None or score > best_score:
            best_score, best_index = score, i
    return index == best_index


def max_context(features, windows, doc_stride):
    """{(window, position): bool} for the context positions of one
    context's `windows` (their rows in `features`, in order)."""
    positions = [[p for p, s in enumerate(features["token_char_start"][w])
                  if s >= 0] for w in windows]
    spans = _doc_spans([len(p) for p in positions], doc_stride)
    return {(w, p): _is_max_context(spans, k, spans[k][0] + i)
            for k, w in enumerate(windows)
            for i, p in enumerate(positions[k])}


def reference_answers(features, start_logits, end_logits, contexts,
                      doc_stride, n_best_size=20, max_answer_length=30,
                      null_threshold=0.0, version_2=False):
    """[{"answer", "start", "end", "score", "null_score", "nbest"}] per
    context, from NumPy copies of a `QAPreprocessor` output and logits."""
    examples = [[] for _ in contexts]
    for w, e in enumerate(features["example_index"]):
        examples[e].append(w)
    results = []
    for e, windows in enumerate(examples):
        context = contexts[e]
        raw = context if isinstance(context, bytes) else context.encode()
        prelim, null_score = [], None
        is_max = max_context(features, windows, doc_stride)
        for w in windows:
            mask = features["input_mask"][w] > 0
            starts = features["token_char_start"][w]
            score_null = start_logits[w][0] + end_logits[w][0]
            if null_score is None or score_null < null_score:
                null_score = score_null
            for i in _best_indexes(start_logits[w], mask, n_best_size):
                for j in _best_indexes(end_logits[w], mask, n_best_size):
                    if starts[i] < 0 or starts[j] < 0 or not is_max[w, i]:
                        continue
                    if j < i or j - i + 1 > max_answer_length:
                        continue
                    prelim.append((start_logits[w][i] + end_logits[w][j],
                                   w, i, j))
        prelim.sort(key=lambda p: -p[0])
        nbest, seen = [], set()
        for score, w, i, j in prelim:
            if len(nbest) >= n_best_size:
                break
            b0 = features["token_byte_start"][w][i]
            b1 = features["token_byte_end"][w][j]
            text = raw[b0:b1]
            if text in seen:
                continue
            seen.add(text)
            nbest.append({"text": text, "score": float(score),
                          "start": int(features["token_char_start"][w][i]),
                          "end": int(features["token_char_end"][w][j])})
        answer = nbest[0] if nbest else None
        has_answer = answer is not None
        if version_2 and has_answer:
            has_answer = null_score - answer["score"] <= null_threshold
        results.append({
            "answer": answer["text"] if has_answer else b"",
            "start": answer["start"] if has_answer else -1,
            "end": answer["end"] if has_answer else -1,
            "score": answer["score"] if answer else 0.0,
            "null_score": float(null_score),
            "nbest": nbest})
    return results
