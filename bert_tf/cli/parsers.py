"""`bert-tf`'s argument parser: one builder per group of subcommands.
Building it imports no TensorFlow (`bert-tf --help` stays instant); each
command's work is in `commands.py`."""

import argparse

from bert_tf.cli.commands import (_config, _convert, _data_service, _demo,
                                  _evaluate, _export, _features, _finetune,
                                  _pairs, _predict, _presets, _pretrain,
                                  _samples, _vocab, demo_script)
from bert_tf import presets
from bert_tf.config_io import CHECKPOINT_SOURCES
from bert_tf.precision import add_precision_arguments
from bert_tf.serving import FORMATS
from bert_tf.serving.limits import add_limit_arguments


def _add_corpus_arguments(parser):
    parser.add_argument(
        "--corpus", action="append", required=True,
        help="corpus spec, repeatable: sample:wikipedia, sample:lee, "
             "sample:rt_train, tfds:wikipedia/20230601.en, sentences:PATH "
             "(one sentence per line, blank line between documents), "
             "paragraphs:PATH, lines:PATH (one document per line)")
    parser.add_argument("--cache", help="sample cache directory")


def _add_run_arguments(parser, example_config, example_override,
                       fresh=True):
    """--config, --set and --dry-run of the commands that run a config."""
    parser.add_argument("--config", required=True,
                        help=f"a YAML file, e.g. {example_config}")
    parser.add_argument("--set", action="append", default=[],
                        metavar="KEY=VALUE", help=f"override, e.g. "
                        f"{example_override} (repeatable)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the resolved config and the strategy, "
                             "then exit")
    if not fresh:
        return
    parser.add_argument("--fresh", action="store_true",
                        help="start the run anew: an existing run directory "
                             "(finished or not) is moved aside to "
                             "DIR.previous-N first; without it a finished "
                             "run says so and stops, a stopped one resumes")


def _version():
    """bert-tf's version and the stack's, read without importing it."""
    from importlib import metadata

    from bert_tf import __version__

    stack = []
    for package in ("tensorflow", "tensorflow-text", "keras"):
        try:
            stack.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            stack.append(f"{package} not installed")
    return f"bert-tf {__version__} ({', '.join(stack)})"


def _presets_epilog():
    named = presets.with_weights()
    sizes = [n for n in presets.available() if n not in named]
    return ("with weights (`init: NAME`, `bert-tf convert --input NAME`, "
            "`BertEncoder.from_preset(NAME)`; fetched from the Hugging Face "
            "Hub into its cache):\n  " + "\n  ".join(
                f"{n:<31} {presets.weights_source(n)}" for n in named) +
            "\nsizes without weights (`encoder: NAME`, random start):\n  " +
            ", ".join(sizes) + "\nany hf://ORG/NAME[@REVISION] of the BERT "
            "family (BERT, ELECTRA, DistilBERT) works too.")


def build_parser():
    parser = argparse.ArgumentParser(
        prog="bert-tf",
        description="BERT pre-training, fine-tuning and serving in "
                    "TensorFlow 2 / Keras 3.")
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True)
    _add_model_commands(sub, parser)
    _add_data_commands(sub, parser)
    _add_training_commands(sub, parser)
    _add_export_commands(sub, parser)
    _add_answer_commands(sub, parser)
    return parser


def _add_model_commands(sub, parser):
    """presets, config, convert, samples: encoders, their weights and the sample data."""
    p = sub.add_parser(
        "presets", help="list the presets: pre-trained weights by name, "
                        "and sizes to train from scratch",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_presets_epilog())
    p.set_defaults(func=_presets)

    p = sub.add_parser("config", help="print a resolved model config")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--preset", help="a preset name (see `presets`)")
    group.add_argument("--config", help="a model YAML file")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override, e.g. encoder.num_layers=4 (repeatable)")
    p.set_defaults(func=_config)

    p = sub.add_parser(
        "convert", help="import a foreign checkpoint into a bert_tf "
                        "checkpoint directory, or a fine-tuned HF "
                        "checkpoint into a run")
    p.add_argument("--from", dest="source", choices=CHECKPOINT_SOURCES,
                   help="the format of a path given as --input: hf "
                        "(config.json + model.safetensors or "
                        "pytorch_model.bin of BERT, ELECTRA or DistilBERT); "
                        "tf1: bert_config.json + bert_model.ckpt; garden: "
                        "Model Garden BertEncoderV2 checkpoint + "
                        "bert_config.json. Not needed for a name")
    p.add_argument("--input", required=True,
                   help="a checkpoint directory or file, or a name: "
                        "hf://ORG/NAME[@REVISION] (huggingface_hub's cache, "
                        "HF_ENDPOINT, HF_HUB_OFFLINE, HF_TOKEN), a preset "
                        "with weights (see `bert-tf presets`) or "
                        "sample:NAME")
    p.add_argument("--output", required=True,
                   help="directory to write config.yaml, vocab.txt, "
                        "model.ckpt.* into; for an HF checkpoint whose "
                        "config.json names a task head (…ForSequence"
                        "Classification, …ForQuestionAnswering, …ForToken"
                        "Classification, …ForMultipleChoice), a run "
                        "(task.yaml with its labels) that `bert-tf export "
                        "--run`, `predict` and `evaluate` take")
    p.add_argument("--vocab", help="vocab.txt (default: next to the input)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing --output directory (without "
                        "it, one that holds files is refused)")
    p.add_argument("--labels", metavar="FILE",
                   help="a task checkpoint's class (or tag) names, one per "
                        "line in id order, where its config.json's id2label "
                        "says only LABEL_0, LABEL_1, ...")
    p.epilog = "presets with weights: " + ", ".join(presets.with_weights())
    p.set_defaults(func=_convert)

    p = sub.add_parser("samples", help="fetch the real sample data and "
                                       "weights into the cache")
    p.add_argument("names", nargs="*", help="assets (default: all)")
    p.add_argument("--cache", help="cache directory (default: "
                                   "$BERT_TF_CACHE or ~/.cache/bert_tf)")
    p.set_defaults(func=_samples)


def _add_data_commands(sub, parser):
    """vocab, pairs, data-service: the pre-training data."""
    p = sub.add_parser("vocab", help="learn a WordPiece vocab from a corpus")
    _add_corpus_arguments(p)
    p.add_argument("--size", type=int, default=30522, help="vocab size")
    p.add_argument("--out", required=True, help="vocab.txt to write")
    p.add_argument("--cased", action="store_true",
                   help="keep case (default: lower-cased)")
    p.add_argument("--min-count", type=int, default=5,
                   help="ignore words seen fewer times")
    p.set_defaults(func=_vocab)

    p = sub.add_parser("pairs", help="documents -> NSP sentence-pair "
                                     "TFRecords (text)")
    _add_corpus_arguments(p)
    p.add_argument("--vocab", required=True,
                   help="vocab.txt (lengths are measured in its pieces)")
    p.add_argument("--out", required=True,
                   help="output directory, e.g. tfrecords/wiki")
    p.add_argument("--seq-length", type=int, default=128)
    p.add_argument("--dupe-factor", type=int, default=5,
                   help="passes over the corpus")
    p.add_argument("--seed", type=int, default=12345)
    p.add_argument("--workers", type=int, default=1,
                   help="processes (the output does not depend on it; "
                        "with --runner DirectRunner: its worker processes)")
    p.add_argument("--shards", type=int, default=None,
                   help="output files (default: 1 per 10,000 pairs; with "
                        "--runner: the runner decides)")
    p.add_argument("--eval-share", type=float, default=0.0,
                   help="share of documents held out into OUT/eval")
    p.add_argument("--runner", choices=("DirectRunner", "DataflowRunner",
                                        "FlinkRunner", "SparkRunner"),
                   help="make the pairs as an Apache Beam pipeline on this "
                        "runner (the same pairs; needs pip install "
                        "-e .[beam]); further --options are passed to "
                        "Beam (e.g. --project, --region, --temp_location)")
    p.set_defaults(func=_pairs, pipeline_args=[])

    p = sub.add_parser("data-service", help="run a tf.data service "
                                            "dispatcher or worker for "
                                            "the pre-training input")
    p.add_argument("role", choices=("dispatcher", "worker"))
    p.add_argument("--port", type=int, default=0,
                   help="port to listen on (default: any free one, "
                        "printed; a dispatcher usually takes a fixed one)")
    p.add_argument("--dispatcher", help="worker: the dispatcher's "
                                        "HOST:PORT")
    p.add_argument("--host", help="worker: the name trainers reach it by "
                                  "(default: this host's name)")
    p.add_argument("--work-dir", help="dispatcher: journal its state here "
                                      "(fault-tolerant: a restarted "
                                      "dispatcher resumes)")
    p.set_defaults(func=_data_service)


def _add_training_commands(sub, parser):
    """pretrain, finetune, evaluate, distill: the commands that train and
    score."""
    p = sub.add_parser("pretrain", help="pre-train with a config "
                                        "(strategies, checkpoints, resume)")
    _add_run_arguments(p, "configs/pretrain/sample_cpu.yaml",
                       "trainer.train_steps=100", fresh=False)
    p.set_defaults(func=_pretrain)

    p = sub.add_parser("finetune", help="fine-tune any task kind with a "
                                        "config (task.kind names it)")
    _add_run_arguments(p, "configs/finetune/rt_sentiment_minilm.yaml",
                       "epochs=1")
    p.set_defaults(func=_finetune, command="finetune")
    p = sub.add_parser(
        "evaluate", help="score a run (or a fine-tuned HF checkpoint) on a "
                         "split of data with its task's metrics")
    p.add_argument("--run", required=True,
                   help="a `bert-tf finetune` model_dir (or its best/), "
                        "`bert-tf convert`'s run of an HF task checkpoint, "
                        "or hf://ORG/NAME of one")
    p.add_argument("--data", metavar="FILE",
                   help="a local file of the run's kind to score (as its "
                        "`local` data: e.g. TSV with text and label "
                        "columns; --set text=COLUMN names others)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="the data, as keys of the run's task.yaml, one "
                        "--set per key: e.g. --set name=sample:rt_sentiment"
                        ", or --set name=local --set test_file=F; default: "
                        "the run's own data")
    p.add_argument("--label-map", metavar="DATA=RUN,...",
                   help="score data whose labels are not the run's: each "
                        "data label and the run label it counts as (labels "
                        "are matched by name; different sets are refused "
                        "without it)")
    p.add_argument("--split", default="test",
                   choices=("train", "validation", "test"))
    p.add_argument("--batch-size", type=int, default=32,
                   help="examples per batch (default 32)")
    p.set_defaults(func=_evaluate)
    p = sub.add_parser("distill", help="train a smaller student on a "
                                       "fine-tuned teacher's outputs")
    _add_run_arguments(p, "configs/distill/rt_sentiment_minilm_l3.yaml",
                       "temperature=4")
    p.set_defaults(func=_finetune, command="distill")


def _add_export_commands(sub, parser):
    """export: SavedModel, TF Hub pair or TFLite file of a run or an encoder."""
    p = sub.add_parser("export", help="write a fine-tuned model (or a "
                                      "pre-trained encoder's embeddings) as "
                                      "a SavedModel, TF Hub pair or TFLite "
                                      "file that takes raw text")
    p.add_argument("--run", metavar="RUN",
                   help="a fine-tuning run: `bert-tf finetune`'s model_dir "
                        "(or its best/), exported as its own kind")
    p.add_argument("--checkpoint", metavar="CKPT",
                   help="with --kind or --format hub: a pre-trained "
                        "checkpoint: a name (a preset with weights, "
                        "hf://ORG/NAME[@REVISION], sample:minilm), a "
                        "bert_tf checkpoint directory or "
                        f"{'|'.join(CHECKPOINT_SOURCES)}:PATH (a run given "
                        "here still works, with a warning)")
    p.add_argument("--format", choices=FORMATS, default="savedmodel",
                   help="savedmodel: TF Serving's format, the run's own "
                        "signature; hub: TF Hub-format OUT/preprocess and "
                        "OUT/encoder SavedModels of a pre-trained "
                        "checkpoint; tflite: one .tflite file with the "
                        "tokenizer inside (tf-text's TFLite kernels, no "
                        "Flex) for the kinds {tflite_kinds}")
    parser.export_kind = p.add_argument(
        "--kind", metavar="KIND",
        help="only for a pre-trained checkpoint (no run), one of "
             "{export_kinds} (each kind's own flags below). A run exports "
             "as its own kind. (`--kind task` and `--kind hub` still work, "
             "with a warning.)")
    add_precision_arguments(p)
    add_limit_arguments(p)
    p.add_argument("--quantize", choices=("none", "dynamic_int8"),
                   help="tflite: fp32 weights (default), or dynamic-range "
                        "int8")
    p.add_argument("--seq-length", type=int,
                   help="an export-only --kind, or --format hub: truncate "
                        "texts to this many pieces (default: the kind's; "
                        "hub: 128)")
    p.add_argument("--out", required=True,
                   help="export/NAME/VERSION (VERSION a number); hub: a "
                        "new directory; tflite: a .tflite file")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing export")
    p.add_argument("--server-config", nargs="?", const=True, metavar="DIR",
                   help="savedmodel: also write TF Serving's models.config "
                        "and batching_parameters.txt in the models root DIR"
                        " (two folders above --out, the default). Without "
                        "it they are kept up to date only where DIR "
                        "already holds a models.config an export wrote; an "
                        "export writes nothing else outside --out")
    p.add_argument("--fixed-length", action="store_const", const=True,
                   help="savedmodel: run every request at the full sequence "
                        "length (for XLA or TPU serving; default: each "
                        "batch at the length of its longest text)")
    p.set_defaults(func=_export)
    parser.export_parser = p


def _add_answer_commands(sub, parser):
    """features, predict, demo: answers from a checkpoint or an export."""
    p = sub.add_parser("features", help="per-word features of chosen "
                                        "layers for raw text (no "
                                        "fine-tuning)")
    p.add_argument("--checkpoint", required=True,
                   help="a name (a preset with weights, "
                        "hf://ORG/NAME[@REVISION], sample:NAME), a bert_tf "
                        "checkpoint directory or "
                        f"{'|'.join(CHECKPOINT_SOURCES)}:PATH")
    p.add_argument("--input", required=True, help="text file, one text "
                                                   "per line")
    p.add_argument("--layers", nargs="+", default=["concat_last_four"],
                   help="embeddings, second_to_last, last, sum_last_four, "
                        "concat_last_four, weighted_sum_all (equal "
                        "weights), all, or layer_N (0: the embedding "
                        "output); several give one array each")
    p.add_argument("--out", required=True,
                   help="FILE.npz (NumPy) or FILE.tfrecord")
    p.add_argument("--seq-length", type=int, default=128,
                   help="window length; longer texts are windowed")
    p.add_argument("--doc-stride", type=int, default=64,
                   help="tokens between the starts of a long text's "
                        "windows (default 64)")
    p.add_argument("--batch-size", type=int, default=32,
                   help="texts per encoder call (default 32)")
    p.set_defaults(func=_features)

    p = sub.add_parser("predict", help="answer raw text with an exported "
                                       "model (any task kind)",
                       epilog="Each export kind adds its own flags: "
                              "`bert-tf predict --model M --help` lists "
                              "those of M's kind.")
    p.add_argument("texts", nargs="*", help="texts to label, tag or embed "
                                           "(a pair: 'A<TAB>B')")
    p.add_argument("--input", help="a file with one text per line; QA: a "
                                   "JSONL file of "
                                   '{"question", "context"} objects')
    p.add_argument("--model", dest="model", required=True,
                   help="export/NAME/VERSION, or a .tflite file")
    p.add_argument("--batch-size", type=int, default=64,
                   help="texts per request to the model (default 64); "
                        "lower it for long texts, whose windows run inside "
                        "each request")
    p.set_defaults(func=_predict)
    parser.predict_parser = p

    try:
        script = demo_script()
    except FileNotFoundError as error:
        script = f"(not found: {error})"
    p = sub.add_parser("demo", help="the main job (what `make demo` runs)",
                       description=f"Runs {script}: the guided tour of "
                       "bert_tf (pre-training, fine-tuning, export, QA, "
                       "NER) on real data and weights.")
    p.add_argument("--output", default="demo_out",
                   help="directory for what the demo writes")
    p.set_defaults(func=_demo)
