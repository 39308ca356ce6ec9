"""Documents longer than the model: each text is cut into windows of word
pieces (the document-stride windows of span QA, `text.windows.dense_windows`,
placed by one gather), every window is classified, and the window logits
are pooled into the document's, in the graph (training, evaluation and
the export alike).

The windows of a batch are rows of ordinary encoder inputs;
`window_document` says which document (row of the batch) each belongs
to. Every text has at least one window (an empty text has one, `[CLS]
[SEP]`), so the documents of a batch are `max(window_document) + 1`.
"""

import keras
import tensorflow as tf

from bert_tf.text.features import input_specs
from bert_tf.text.tokenizer import BertTokenizer, preprocessor_config
from bert_tf.text.windows import dense_windows, frame

WINDOW_POOLINGS = ("mean", "max", "attention")
WINDOW_KEY = "window_document"


@keras.saving.register_keras_serializable(package="bert_tf")
class DocumentWindows(keras.layers.Layer):
    """Texts -> encoder inputs for each of their windows.

    A text of n word pieces gets one window when n <= seq_length - 2, else
    ceil((n - room) / doc_stride) + 1 windows, each `[CLS] pieces [SEP]`.
    Nothing is dropped: the last window ends at the last piece.

    Args:
        vocabulary: a vocab.txt path, a `Vocab` or a token list.
        seq_length: window length, special tokens included.
        doc_stride: pieces between window starts (0: seq_length - 2, windows
            that do not overlap).
        lower_case, strip_accents: see `BertTokenizer`.

    Call args:
        text: tf.string [batch].

    Returns:
        the three int32 encoder inputs [windows, seq_length],
        `window_document` int32 [windows] and `windows` int32 [batch] (the
        count per text).

    Examples:
        >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]
        >>> x = DocumentWindows(vocab, seq_length=4)(tf.constant(["a b a", "b"]))
        >>> x["input_word_ids"].numpy().tolist()
        [[2, 5, 6, 3], [2, 5, 3, 0], [2, 6, 3, 0]]
        >>> x["window_document"].numpy().tolist(), x["windows"].numpy().tolist()
        ([0, 0, 1], [2, 1])
    """

    def __init__(self, vocabulary, seq_length=512, doc_stride=0,
                 lower_case=None, strip_accents=None, **kwargs):
        kwargs.pop("dtype", None)
        super().__init__(dtype="int32", **kwargs)
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        if seq_length < 3:
            raise ValueError(f"seq_length = {seq_length}: must be >= 3.")
        if doc_stride < 0:
            raise ValueError(f"doc_stride = {doc_stride}: must be >= 0.")
        # === Config ===
        self.seq_length = int(seq_length)
        self.doc_stride = int(doc_stride) or self.seq_length - 2
        # === Layers ===
        self.tokenizer = BertTokenizer(vocabulary, lower_case, strip_accents,
                                       name="tokenizer")
        self.built = True

    def call(self, text):
        vocab = self.tokenizer.vocab
        ids = self.tokenizer(tf.convert_to_tensor(text, tf.string))
        room = self.seq_length - 2
        windows = dense_windows(ids.row_lengths(), room, self.doc_stride)
        # Each window's pieces by one gather from the batch's pieces (a
        # [PAD] after them for the places past a window's end).
        values = tf.concat([tf.cast(ids.flat_values, tf.int32),
                            [vocab.pad_id]], 0)
        place = tf.range(room)[None, :]
        piece = (tf.gather(tf.cast(ids.row_starts(), tf.int32),
                           windows["example"]) + windows["first"])[:, None] \
            + place
        pieces = tf.gather(values, tf.where(
            place < windows["size"][:, None], piece, tf.size(values) - 1))
        # The pieces from position 1; `frame` adds [CLS], [SEP], padding.
        body = tf.pad(pieces, [[0, 0], [1, 1]])
        size = windows["size"][:, None]
        return {**frame(vocab, body, tf.range(self.seq_length)[None, :],
                        tf.ones_like(size), size),
                WINDOW_KEY: windows["example"],
                "windows": windows["per_row"]}

    def compute_output_spec(self, text):
        specs = input_specs((None,), self.seq_length)
        specs[WINDOW_KEY] = keras.KerasTensor((None,), "int32")
        specs["windows"] = keras.KerasTensor(text.shape, "int32")
        return specs

    def get_config(self):
        return preprocessor_config(super().get_config(), self.tokenizer,
                                   seq_length=self.seq_length,
                                   doc_stride=self.doc_stride)


def pool_windows(logits, document, pooling, scores=None, count=None):
    """Window logits [W, K] -> document logits [D, K]; D is `count`, or
    max(document) + 1 (0 with no windows).

    `mean` and `max` pool each class's logit over a document's windows;
    `attention` weighs the windows by a softmax, within the document, of
    their `scores` [W] (a learned score per window)."""
    logits = tf.convert_to_tensor(logits)
    document = tf.cast(document, tf.int32)
    if count is None:
        count = tf.maximum(tf.reduce_max(document) + 1, 0)
    if pooling == "mean":
        return tf.math.unsorted_segment_mean(logits, document, count)
    if pooling == "max":
        return tf.math.unsorted_segment_max(logits, document, count)
    if pooling != "attention":
        raise ValueError(f"window pooling {pooling!r}: use one of "
                         f"{', '.join(WINDOW_POOLINGS)}.")
    scores = tf.cast(scores, tf.float32)
    top = tf.gather(tf.math.unsorted_segment_max(scores, document, count),
                    document)
    weights = tf.exp(scores - top)
    weights /= tf.gather(tf.math.unsorted_segment_sum(weights, document,
                                                      count), document)
    weighted = tf.cast(logits, tf.float32) * weights[:, None]
    return tf.cast(tf.math.unsorted_segment_sum(weighted, document, count),
                   logits.dtype)
