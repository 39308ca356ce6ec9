"""bert_tf: BERT pre-training, fine-tuning and serving in TensorFlow 2 / Keras 3."""
