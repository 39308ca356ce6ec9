"""SavedModels that take raw text: tokenization, packing, the task model
and its post-processing in one TensorFlow graph (see `export.py`)."""
