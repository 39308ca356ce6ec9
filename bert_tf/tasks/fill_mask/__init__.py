"""The fill-mask export kind: text with mask markers in, the top-k tokens
per mask out, from a checkpoint with its masked-LM head."""

from bert_tf.tasks.fill_mask.serving import FillMask

__all__ = ["FillMask"]
