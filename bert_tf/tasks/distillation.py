"""What a kind tells `bert_tf/distill/` so that its runs can teach: the
transfer set's texts and rows, how many the teacher reads at a time and
how the student's batches are finished. `Task` inherits these defaults; a
kind that can teach overrides `transfer_examples` and `transfer_rows`."""


class TransferHooks:
    """The distillation hooks of a `Task` (see `bert_tf.distill`)."""

    # What the kind's teacher reads when it is not single texts, as a
    # clause ("a span QA teacher reads ..."): `unlabeled` and `augment`,
    # which add single texts, are then refused.
    transfer_reads = None
    # How many transfer texts the teacher reads at a time.
    teacher_batch = 256

    @classmethod
    def can_teach(cls):
        """True if runs of this kind can teach a student."""
        return cls.transfer_rows is not TransferHooks.transfer_rows

    def transfer_examples(self, data):
        """(texts, labels) of the training split of `data`: what
        `transfer_rows` reads, and a label per text (None if the rows carry
        their own)."""
        raise NotImplementedError

    def unlabeled_label(self, text):
        """The label of a text without one (unlabeled or augmented): -1,
        which the hard loss skips."""
        return -1

    def transfer_rows(self, preprocessor, texts, labels):
        """(encoder inputs, labels, per-position weights or None) of the
        training rows of `texts`, by the kind's `preprocessor`."""
        raise NotImplementedError

    def transfer_inputs(self, texts, rows):
        """What the transfer set stores per row beside the teacher's logits:
        the encoder inputs as NumPy arrays."""
        return {name: value.numpy() for name, value in rows.items()}

    def transfer_batches(self, dataset, vocab, dynamic_length):
        """The student's `(inputs, labels[, weights])` batches finished for
        training (per-token rows keep their length: their labels and
        teacher logits are per position)."""
        return dataset

    def distill_metrics(self):
        """The metrics a `Distiller` of this kind compiles."""
        return ["accuracy"]
