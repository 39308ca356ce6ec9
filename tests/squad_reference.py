"""A plain Python span decoder with the original `run_squad.py`'s
rules (`write_predictions`), used only in tests to check the in-graph
decoder. Loops over windows and candidates exactly as the original does;
the one shared change is that padding positions are not candidates."""


def _best_indexes(logits, mask, n_best_size):
    order = sorted(range(len(logits)), key=lambda i: (-logits[i], i))
    return [i for i in order if mask[i]][:n_best_size]


def reference_answers(features, start_logits, end_logits, contexts,
                      n_best_size=20, max_answer_length=30,
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
        for w in windows:
            mask = features["input_mask"][w] > 0
            starts = features["token_char_start"][w]
            is_max = features["token_is_max_context"][w]
            score_null = start_logits[w][0] + end_logits[w][0]
            if null_score is None or score_null < null_score:
                null_score = score_null
            for i in _best_indexes(start_logits[w], mask, n_best_size):
                for j in _best_indexes(end_logits[w], mask, n_best_size):
                    if starts[i] < 0 or starts[j] < 0 or not is_max[i]:
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
