"""An HF `…ForQuestionAnswering` checkpoint's head as this kind's
(`bert_tf.tasks.hf_runs`): `qa_outputs`, one dense layer with the start
and end logits as its two outputs, is our `SpanHead` in every family."""

from bert_tf.formats.hf import linear

ARCHITECTURES = ("ForQuestionAnswering",)


def spec_fields(hf_config, family):
    """The span QA spec's fields the checkpoint decides: HF's pipeline
    reads windows of 384 pieces (at most the model's positions) with a
    stride of 128 and questions of up to 64 (here at most half a window);
    SQuAD 2.0 models say nothing in their config, so `version_2` (an
    empty answer allowed) stays off, as in the pipeline's default."""
    length = min(384, int(hf_config.get("max_position_embeddings", 512)))
    return {"seq_length": length, "doc_stride": min(128, length // 2),
            "max_query_length": min(64, length // 2)}


def assign(model, tensors, family, where):
    """Sets `model`'s head (a `BertSpanLabeler`) from the HF tensors."""
    model.head.dense.set_weights(list(linear(tensors, "qa_outputs", where)))
