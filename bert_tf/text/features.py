"""The encoder inputs every preprocessor produces, by their TF Hub BERT
names (int32 [batch, seq]); models, pipelines and exports all use these."""

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def input_specs(batch_shape, sequence_length):
    """{name: KerasTensor} of the encoder inputs a layer returns for inputs
    of `batch_shape` (its `compute_output_spec`)."""
    import keras

    shape = tuple(batch_shape) + (sequence_length,)
    return {name: keras.KerasTensor(shape, dtype="int32")
            for name in INPUT_NAMES}
