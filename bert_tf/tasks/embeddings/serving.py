"""The `embeddings` export kind of any pre-trained encoder: raw text in,
sentence embeddings (`serving_default`) and per-word hidden states of every
layer (`word_features`) out, through the graphs of `extract.py`."""

import tensorflow as tf

from bert_tf import checkpoints
from bert_tf.tasks.base import (ExportOnlyKind, TaskModule, check_lengths,
                                register, string_batch)
from bert_tf.tasks.embeddings.extract import (embedding_graph,
                                              word_feature_graph)
from bert_tf.text.preprocessor import BertPreprocessor
from bert_tf.text.word_windows import WordWindows
from bert_tf.tasks.embeddings.cli import EmbeddingsCommandLine

WARMUP = ("A man is playing a guitar.", "", "Ein Mann spielt Gitarre. 🎸")


class EmbeddingModule(TaskModule):
    """The `tf.Module` of `bert-tf export --kind embeddings`.

    Signatures (strings in, dense tensors out):
        serving_default(text [B]) -> `embedding` float32 [B, H]: the
            sentence embedding (mean pool over the real tokens, normalised
            if `spec["normalize"]`), texts truncated to `seq_length`.
        word_features(text [B]) -> `encoder_outputs` float32
            [B, N, L + 1, H] (each word's hidden states at its first piece,
            the embedding output first, so every row of the paper's
            Table 7 can be computed from it), `count` int32 [B] (words),
            `start`, `end` int32 [B, N] (code points, -1 padded); text of
            any length goes through windows of `word_seq_length`.
    """

    warmup_inputs = [{"text": [text]} for text in WARMUP]

    def __init__(self, encoder, vocabulary, spec,
                 fixed_length=False):
        super().__init__(encoder, vocabulary, "bert_embeddings",
                         spec["seq_length"], fixed_length)
        embed = embedding_graph(
            encoder, BertPreprocessor(vocabulary, spec["seq_length"]),
            spec["normalize"], fixed_length)
        words = word_feature_graph(
            encoder, WordWindows(vocabulary, spec["word_seq_length"],
                                         spec["doc_stride"],
                                         pretokenized=True),
            "all", fixed_length)
        text_spec = [tf.TensorSpec([None], tf.string, name="text")]
        self.serve = tf.function(
            lambda text: {"embedding": embed(string_batch(text, "text"))},
            input_signature=text_spec, autograph=False)

        def word_features(text):
            out = words(string_batch(text, "text"))
            return {"encoder_outputs": out["features"], "count": out["count"],
                    "start": out["start"], "end": out["end"]}

        self.word_features = tf.function(word_features,
                                         input_signature=text_spec,
                                         autograph=False)

    def signatures(self):
        return {"serving_default": self.serve,
                "word_features": self.word_features}

    def filler_request(self, words, batch_size=1):
        return {"text": [" ".join(["a"] * words)] * batch_size}


@register
class Embeddings(EmbeddingsCommandLine, ExportOnlyKind):
    """The `embeddings` export kind, as `bert-tf predict` sees it."""

    kind = "embeddings"
    tflite_outputs = ("embedding",)

    @classmethod
    def build_export(cls, checkpoint, fixed_length=False, dtype=None,
                     seq_length=256, normalize=True, word_seq_length=128,
                     doc_stride=64):
        """(spec, vocab, encoder, make_module) of the `embeddings` export of
        a pre-trained encoder: raw text in, sentence embeddings out
        (`serving_default`), and per-word hidden states of every layer
        (`word_features`); see `EmbeddingModule`.

        Args:
            checkpoint: `hf:PATH`, `tf1:PATH`, `garden:PATH` or a bert_tf
                checkpoint directory (`bert_tf.checkpoints.load_encoder`).
            fixed_length: run every request at the full length.
            dtype: the Keras dtype policy to build the encoder in.
            seq_length: embeddings truncate texts to this many pieces.
            normalize: L2-normalise the embeddings.
            word_seq_length, doc_stride: the windows of `word_features`.
        """
        pretrained = checkpoints.load_encoder(checkpoint, dtype=dtype)
        encoder = pretrained.encoder
        check_lengths(encoder.config, seq_length=seq_length,
                      word_seq_length=word_seq_length)
        if not 1 <= doc_stride <= word_seq_length - 2:
            raise ValueError(
                f"doc_stride = {doc_stride}: must be in [1, "
                f"word_seq_length - 2 = {word_seq_length - 2}].")
        spec = {"kind": cls.kind, "name": str(checkpoint),
                "seq_length": seq_length, "pooling": "mean",
                "normalize": bool(normalize),
                "word_seq_length": word_seq_length, "doc_stride": doc_stride,
                "num_layers": encoder.config.num_layers,
                "hidden_size": encoder.config.hidden_size}
        return spec, pretrained.vocab, encoder, (
            lambda served, vocab: EmbeddingModule(served, vocab, spec,
                                                  fixed_length))

    @classmethod
    def build_tflite(cls, checkpoint, seq_length=128, normalize=True):
        """(module, description) of the TFLite graph of the `embeddings`
        kind (`EmbeddingTFLiteModule`): texts truncated to `seq_length`
        pieces, every request run at that length."""
        from bert_tf.tasks.embeddings.tflite import EmbeddingTFLiteModule

        pretrained = checkpoints.load_encoder(checkpoint)
        check_lengths(pretrained.config, seq_length=seq_length)
        encoder = pretrained.encoder
        return EmbeddingTFLiteModule(
            encoder, pretrained.vocab, seq_length, normalize), (
            f"sentence embeddings of {checkpoint} ("
            f"{encoder.count_params():,} parameters, "
            f"{pretrained.config.hidden_size} wide, mean-pooled"
            f"{', L2-normalised' if normalize else ''}); seq_length "
            f"{seq_length}")
