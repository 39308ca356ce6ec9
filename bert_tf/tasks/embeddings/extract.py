"""Features of a pre-trained encoder, without fine-tuning.

Two uses:

- **Per-word features** (the paper's feature-based approach, Table 7):
  hidden states of chosen layers at each word's first piece, for raw
  text of any length (overlapping windows; each word is read in the
  window where it has the most context), with each word's character
  offsets.
- **Sentence embeddings**: the mean of the final hidden states over the
  real tokens, optionally L2-normalised: how all-MiniLM-L6-v2 and other
  sentence-transformers models are meant to be used.

One traced function per use computes them for the Python API, the
`bert-tf features` command and the exported SavedModel
(`bert_tf.tasks.embeddings.serving`). Hidden states count the embedding
output as state 0, so an encoder of L layers has L + 1 states.
"""

import numpy as np
import tensorflow as tf

from bert_tf.layers.heads import MaskedMeanPool
from bert_tf.models.chunked import map_in_chunks, row_classes_of
from bert_tf.storage import GPath
from bert_tf.text.features import INPUT_NAMES, cut_to_longest
from bert_tf.text.preprocessor import BertPreprocessor
from bert_tf.text.windows import word_values
from bert_tf.text.word_windows import WordWindows

# The rows of the paper's Table 7, plus any single layer (`layer_N`, 0 =
# the embedding output) and `all` (every state, stacked: [..., L + 1, H]).
LAYER_CHOICES = ("embeddings", "second_to_last", "last", "sum_last_four",
                 "concat_last_four", "weighted_sum_all", "all")


def hidden_states(outputs):
    """[embedding output, layer 1, ..., layer L] of a `BertEncoder`
    output."""
    return [outputs["embedding_output"], *outputs["encoder_outputs"]]


def check_layers(choice, num_layers):
    """Raises a ValueError naming `choice` unless it is a valid layer
    choice for an encoder of `num_layers` layers."""
    if choice in LAYER_CHOICES:
        if choice.endswith("_four") and num_layers < 4:
            raise ValueError(f"layers = {choice!r} needs 4 layers; this "
                             f"encoder has {num_layers}.")
        return
    index = choice[len("layer_"):] if choice.startswith("layer_") else ""
    if not (index.isdigit() and int(index) <= num_layers):
        raise ValueError(
            f"layers = {choice!r}: must be one of {', '.join(LAYER_CHOICES)}"
            f" or layer_N with N in 0..{num_layers} (0: the embedding "
            "output).")


def combine_layers(states, choice, weights=None):
    """One feature tensor from the hidden states, as `choice` says.

    Args:
        states: the L + 1 hidden states (`hidden_states`), each [..., H].
        choice: one of `LAYER_CHOICES` or `layer_N`.
        weights: for `weighted_sum_all`, L + 1 scores whose softmax weighs
            the states (default: equal weights, the mean).

    Examples:
        >>> states = [tf.fill([1, 2], float(i)) for i in range(5)]
        >>> combine_layers(states, "sum_last_four").numpy().tolist()
        [[10.0, 10.0]]
        >>> combine_layers(states, "concat_last_four").shape
        TensorShape([1, 8])
        >>> float(combine_layers(states, "weighted_sum_all")[0, 0])
        2.0
    """
    check_layers(choice, len(states) - 1)
    if choice == "embeddings":
        return states[0]
    if choice == "last":
        return states[-1]
    if choice == "second_to_last":
        return states[-2]
    if choice == "sum_last_four":
        return tf.add_n(states[-4:])
    if choice == "concat_last_four":
        return tf.concat(states[-4:], axis=-1)
    if choice == "all":
        return tf.stack(states, axis=-2)
    if choice == "weighted_sum_all":
        scores = tf.zeros([len(states)]) if weights is None else weights
        mix = tf.nn.softmax(tf.cast(scores, states[0].dtype))
        return tf.einsum("l,...lh->...h", mix, tf.stack(states, axis=-2))
    return states[int(choice[len("layer_"):])]


def mean_pool(sequence_output, input_mask, normalize=True):
    """The mean of `sequence_output` [B, T, H] over the positions where
    `input_mask` is 1, L2-normalised if `normalize` (float32 [B, H])."""
    mean = MaskedMeanPool(dtype="float32")(
        tf.cast(sequence_output, tf.float32), input_mask)
    return tf.math.l2_normalize(mean, axis=-1) if normalize else mean


def embedding_graph(encoder, preprocessor, normalize=True,
                    fixed_length=False):
    """text [B] -> sentence embeddings [B, H] (a plain function: traced
    by `SentenceEmbedder` and by the export)."""

    def embed(text):
        inputs = preprocessor(text)
        if not fixed_length:
            inputs = cut_to_longest(inputs, INPUT_NAMES)

        def pooled(chunk):
            outputs = encoder(chunk, training=False)
            return {"embedding": mean_pool(outputs["sequence_output"],
                                           chunk["input_mask"], normalize)}

        return map_in_chunks(pooled, {k: inputs[k] for k in INPUT_NAMES},
                             ("embedding",),
                             row_classes=row_classes_of(encoder))["embedding"]

    return embed


def word_feature_graph(encoder, preprocessor, layers, fixed_length=False):
    """text [B] -> per-word features (a plain function): `features`
    float32 [B, N, D] (or [B, N, L + 1, H] for `all`), `count` (words per
    text), `start` and `end` (code points, -1 padded) [B, N]."""

    def features(text):
        windows = preprocessor.trimmed(text, fixed_length)

        def combined_layers(chunk):
            outputs = encoder(chunk, training=False)
            return {"combined": combine_layers(
                [tf.cast(s, tf.float32) for s in hidden_states(outputs)],
                layers)}

        combined = map_in_chunks(
            combined_layers, {k: windows[k] for k in INPUT_NAMES},
            ("combined",), row_classes=row_classes_of(encoder))["combined"]
        return {"features": word_values(windows, combined),
                "count": windows["num_words"],
                "start": windows["word_char_start"],
                "end": windows["word_char_end"]}

    return features


def _batches(texts, batch_size, progress, what):
    from bert_tf.progress import progress_bar

    bar = progress_bar(len(texts), unit_name=what) if progress else None
    for start in range(0, len(texts), batch_size):
        chunk = list(texts[start:start + batch_size])
        yield chunk
        if bar is not None:
            bar.update(start + len(chunk))


class SentenceEmbedder:
    """Raw text -> mean-pooled sentence embeddings.

    Args:
        encoder: a `BertEncoder` (e.g. `load_encoder("hf:...").encoder`).
        vocabulary: its vocab (path, `Vocab` or token list).
        seq_length: longer texts are truncated (sentence-transformers
            uses 256 for all-MiniLM-L6-v2).
        normalize: L2-normalise (as all-MiniLM-L6-v2's last module does).

    Examples:
        >>> from bert_tf.models.encoder import BertEncoder
        >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"]
        >>> encoder = BertEncoder(vocab_size=6, hidden_size=8, num_layers=1,
        ...                       num_heads=2, intermediate_size=16)
        >>> vectors = SentenceEmbedder(encoder, vocab)(["hi", "hi hi", ""])
        >>> vectors.shape, round(float(np.linalg.norm(vectors[0])), 4)
        ((3, 8), 1.0)
    """

    def __init__(self, encoder, vocabulary, seq_length=256,
                 normalize=True):
        self.hidden_size = encoder.config.hidden_size
        self.preprocessor = BertPreprocessor(vocabulary, seq_length)
        self.function = tf.function(embedding_graph(
            encoder, self.preprocessor, normalize),
            input_signature=[tf.TensorSpec([None], tf.string)],
            autograph=False)

    def __call__(self, texts, batch_size=64, progress=False):
        """float32 NumPy [len(texts), H]."""
        parts = [self.function(tf.constant(chunk, tf.string)).numpy()
                 for chunk in _batches(texts, batch_size, progress, "texts")]
        return np.concatenate(parts) if parts else np.zeros(
            (0, self.hidden_size), np.float32)


class FeatureExtractor:
    """Raw text -> per-word features of chosen layers, with offsets.

    Args:
        encoder: a `BertEncoder`.
        vocabulary: its vocab.
        layers: one of `LAYER_CHOICES` or `layer_N`.
        seq_length, doc_stride: the windows long texts go through.

    Examples:
        >>> from bert_tf.models.encoder import BertEncoder
        >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi", "you"]
        >>> encoder = BertEncoder(vocab_size=7, hidden_size=8, num_layers=2,
        ...                       num_heads=2, intermediate_size=16)
        >>> out = FeatureExtractor(encoder, vocab, "all")(["hi  you", ""])
        >>> out[0]["features"].shape, out[0]["start"].tolist(), len(out[1]["words"])
        ((2, 3, 8), [0, 4], 0)
    """

    def __init__(self, encoder, vocabulary, layers="concat_last_four",
                 seq_length=128, doc_stride=64):
        check_layers(layers, len(encoder.transformer_layers))
        self.layers = layers
        self.preprocessor = WordWindows(vocabulary, seq_length,
                                                doc_stride, pretokenized=True)
        self.function = tf.function(word_feature_graph(
            encoder, self.preprocessor, layers),
            input_signature=[tf.TensorSpec([None], tf.string)],
            autograph=False)

    def __call__(self, texts, batch_size=32, progress=False):
        """One dict per text: `words` (strings), `start`, `end` (int32
        code points, end exclusive) and `features` (float32 [words, D], or
        [words, L + 1, H] for `all`)."""
        results = []
        for chunk in _batches(texts, batch_size, progress, "texts"):
            out = {k: v.numpy() for k, v in self.function(
                tf.constant(chunk, tf.string)).items()}
            for i, text in enumerate(chunk):
                n = int(out["count"][i])
                start, end = out["start"][i, :n], out["end"][i, :n]
                if isinstance(text, bytes):
                    text = text.decode("utf-8", "replace")
                results.append({
                    "words": [text[a:b] for a, b in zip(start, end)],
                    "start": start, "end": end,
                    "features": out["features"][i, :n]})
        return results


def write_features(texts, extractor, choices, out, batch_size=32,
                   progress=True):
    """Writes per-word features of `texts` for each layer choice.

    Args:
        texts: strings.
        extractor: a `FeatureExtractor` with `layers="all"` (each choice
            is combined from the same forward pass).
        choices: layer choices (`LAYER_CHOICES`, `layer_N`).
        out: `.npz` (NumPy) or `.tfrecord` path.

    The `.npz` holds, over all words of all texts in order:
    `features_<choice>` float32 [words, D], `text_index`, `start`, `end`
    (int32 [words], code points), `words` (str [words]) and `row_splits`
    (int64 [texts + 1]: text i's words are row_splits[i]:row_splits[i+1]).
    The `.tfrecord` holds one `tf.train.Example` per text: `text`, `words`
    (bytes), `start`, `end` (int64), and per choice `features_<choice>`
    (float, flattened) with `shape_<choice>` (int64 [words, D]).

    Returns:
        the number of words written.
    """
    if extractor.layers != "all":
        raise ValueError("write_features needs a FeatureExtractor with "
                         f"layers='all', not {extractor.layers!r}.")
    out = str(out)
    if not out.endswith((".npz", ".tfrecord")):
        raise ValueError(f"--out {out}: must end in .npz or .tfrecord.")
    records = extractor(texts, batch_size, progress)

    def combined(record, choice):
        states = [record["features"][:, i] for i in
                  range(record["features"].shape[1])]
        return combine_layers([tf.constant(x) for x in states],
                              choice).numpy()

    if out.endswith(".npz"):
        arrays = {f"features_{c}": np.concatenate(
            [combined(r, c) for r in records]) for c in choices}
        lengths = [len(r["words"]) for r in records]
        with GPath(out).open("wb") as f:  # any file system
            np.savez(f, **arrays,
                     text_index=np.repeat(
                         np.arange(len(records), dtype=np.int32), lengths),
                     start=np.concatenate([r["start"] for r in records]),
                     end=np.concatenate([r["end"] for r in records]),
                     words=np.array([w for r in records for w in r["words"]],
                                    dtype=str),
                     row_splits=np.cumsum([0] + lengths))
    else:
        def feature(kind, values):
            if kind == "bytes":
                return tf.train.Feature(
                    bytes_list=tf.train.BytesList(value=values))
            if kind == "int":
                return tf.train.Feature(
                    int64_list=tf.train.Int64List(value=values))
            return tf.train.Feature(float_list=tf.train.FloatList(
                value=values))

        with tf.io.TFRecordWriter(out) as writer:
            for text, record in zip(texts, records):
                fields = {
                    "text": feature("bytes", [
                        text if isinstance(text, bytes) else
                        text.encode("utf-8", "replace")]),
                    "words": feature("bytes", [w.encode("utf-8", "replace")
                                               for w in record["words"]]),
                    "start": feature("int", record["start"].tolist()),
                    "end": feature("int", record["end"].tolist())}
                for choice in choices:
                    values = combined(record, choice)
                    fields[f"features_{choice}"] = feature(
                        "float", values.reshape(-1).tolist())
                    fields[f"shape_{choice}"] = feature(
                        "int", list(values.shape))
                writer.write(tf.train.Example(features=tf.train.Features(
                    feature=fields)).SerializeToString())
    return sum(len(r["words"]) for r in records)


__all__ = ["LAYER_CHOICES", "FeatureExtractor", "SentenceEmbedder",
           "check_layers", "combine_layers", "embedding_graph",
           "hidden_states", "mean_pool",
           "word_feature_graph", "write_features"]
