"""The encoder inputs every preprocessor produces, by their TF Hub BERT
names (int32 [batch, seq]); models, pipelines and exports all use these."""

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")
