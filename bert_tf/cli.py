"""The `bert-tf` command: parse, call the library, print what was written where."""

import argparse
import os
import sys
import warnings

from bert_tf.config_io import CHECKPOINT_SOURCES
from bert_tf.serving import FORMATS, old_kind_spelling
from bert_tf.serving.limits import add_limit_arguments
from bert_tf.precision import add_precision_arguments

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _presets(args):
    from bert_tf import config, presets

    print(f"{'preset':<20} {'L':>3} {'H':>5} {'A':>3} {'parameters':>13}")
    for name in presets.available():
        cfg = config.load_preset(name)
        print(f"{name:<20} {cfg.num_layers:>3} {cfg.hidden_size:>5} "
              f"{cfg.num_heads:>3} {cfg.num_parameters():>13,}")


def _config(args):
    import yaml

    from bert_tf import config, presets

    path = presets.preset_path(args.preset) if args.preset else args.config
    cfg = config.load_config(path, config.ModelConfig, args.set)
    print(yaml.safe_dump(config.to_dict(cfg), sort_keys=False), end="")


def _convert(args):
    from bert_tf import checkpoints

    checkpoints.convert(args.source, args.input, args.output, args.vocab)


def _samples(args):
    from bert_tf import samples

    for name in args.names or sorted(samples.ASSETS):
        path = samples.fetch(name, cache=args.cache, log=print)
        print(f"{name:<13} {path}")


def _corpus(specs, cache):
    from bert_tf.data import documents

    docs, stats = documents.load_documents(specs, cache=cache)
    print(f"read {stats.documents:,} documents, {stats.sentences:,} "
          f"sentences from {', '.join(specs)} (skipped "
          f"{stats.empty_documents} empty; {stats.lines_with_invalid_utf8} "
          "line(s) with invalid UTF-8 repaired)")
    return docs


def _vocab(args):
    from bert_tf.storage import GPath
    from bert_tf.text.vocab_learning import learn_vocab

    docs = _corpus(args.corpus, args.cache)
    vocab = learn_vocab((s for d in docs for s in d), args.size,
                        lower_case=not args.cased, min_count=args.min_count)
    GPath(args.out).parent.mkdir(parents=True, exist_ok=True)
    vocab.save(args.out)
    print(f"wrote {args.out} ({vocab.size:,} tokens, "
          f"{'cased' if args.cased else 'uncased'})")


def _pairs(args):
    from bert_tf.data import pairs
    from bert_tf.text.tokenizer import BertTokenizer

    if args.runner:
        from bert_tf.data.pairs_beam import run_pairs_pipeline

        options = list(args.pipeline_args)
        if args.runner == "DirectRunner" and args.workers > 1:
            options += [f"--direct_num_workers={args.workers}",
                        "--direct_running_mode=multi_processing"]
        run_pairs_pipeline(args.corpus, args.vocab, args.out,
                           seq_length=args.seq_length,
                           dupe_factor=args.dupe_factor, seed=args.seed,
                           num_shards=args.shards or 0,
                           eval_share=args.eval_share, runner=args.runner,
                           pipeline_args=options, cache=args.cache)
        return
    docs = _corpus(args.corpus, args.cache)
    tokenizer = BertTokenizer(args.vocab)
    pairs.write_pairs(docs, tokenizer, args.out, seq_length=args.seq_length,
                      dupe_factor=args.dupe_factor, seed=args.seed,
                      workers=args.workers, num_shards=args.shards,
                      eval_share=args.eval_share)


def _data_service(args):
    from bert_tf.data import service

    if args.role == "dispatcher":
        server = service.start_dispatcher(args.port, args.work_dir)
        port = server.target.rsplit(":", 1)[1]
        print(f"tf.data service dispatcher at {server.target} (workers: "
              f"`bert-tf data-service worker --dispatcher HOST:{port}`; "
              f"trainers: data.service=HOST:{port})"
              + (f"; journal in {args.work_dir}" if args.work_dir else ""),
              flush=True)
    else:
        if not args.dispatcher:
            raise ValueError("data-service worker needs --dispatcher "
                             "HOST:PORT.")
        server, address = service.start_worker(args.dispatcher, args.port,
                                               args.host)
        print(f"tf.data service worker at {address} registered with "
              f"{args.dispatcher}", flush=True)
    service.serve_until_stopped(server)
    print("stopped", flush=True)


def _pretrain(args):
    from bert_tf import pretrain

    cfg = pretrain.load(args.config, args.set)
    pretrain.run(cfg, dry_run=args.dry_run)


def _finetune(args):
    from bert_tf import distill, finetune

    module = distill if args.command == "distill" else finetune
    cfg = module.load(args.config, args.set)
    if args.dry_run or module is finetune:
        finetune.run(cfg, dry_run=args.dry_run)
    else:
        distill.run(cfg)


def _export(args):
    from bert_tf.serving import write_export

    options = ("fixed_length", "precision", "quantize", "calibration",
               "calibration_texts", "max_input_chars", "max_batch_chars",
               "seq_length", "normalize", "marker", "top_k", "max_masks")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FutureWarning)
        format, kind = old_kind_spelling(args.format, args.kind)
    for warning in caught:
        print(f"bert-tf export: {warning.message}", file=sys.stderr)
    write_export(format, kind, args.checkpoint, args.out,
                 overwrite=args.overwrite,
                 **{name: getattr(args, name) for name in options})


def _predict(args):
    from bert_tf.serving.export import print_export_predictions

    if str(args.model).endswith(".tflite"):
        from bert_tf.serving.tflite import print_predictions

        return print_predictions(args.model, args)
    print_export_predictions(args.model, args, args.own_process)


def _add_export_kinds(parser):
    """`bert-tf export --help`'s kinds, from the registry (which imports
    the kinds: only for the help; `write_export` checks a --kind given)."""
    from bert_tf.serving import export_only_kinds
    from bert_tf.serving.tflite import tflite_kinds

    names = {"{export_kinds}": ", ".join(export_only_kinds("savedmodel")),
             "{tflite_kinds}": ", ".join(tflite_kinds())}
    for action in parser.export_parser._actions:
        for placeholder, value in names.items():
            if action.help and placeholder in action.help:
                action.help = action.help.replace(placeholder, value)


def _add_kind_flags(predict_parser, argv):
    """`bert-tf predict`'s parser with the flags of the `--model` export's
    kind (each kind declares its own); the kind is set as a default."""
    finder = argparse.ArgumentParser(add_help=False)
    finder.add_argument("--model")
    model = finder.parse_known_args(argv)[0].model
    if not model:
        return
    if str(model).endswith(".tflite"):
        from bert_tf.serving.tflite import TFLiteModel

        kind = TFLiteModel(model).kind
    else:
        from bert_tf.serving.export import exported_kind

        kind = exported_kind(model)
    from bert_tf import tasks

    group = predict_parser.add_argument_group(f"flags of a {kind} export")
    tasks.get_export_class(kind).add_predict_arguments(group)
    predict_parser.set_defaults(export_kind=kind)


def _features(args):
    from bert_tf import checkpoints
    from bert_tf.storage import GPath
    from bert_tf.tasks.embeddings.extract import (FeatureExtractor,
                                                  check_layers, write_features)

    pretrained = checkpoints.load_encoder(args.checkpoint)
    for choice in args.layers:
        check_layers(choice, pretrained.config.num_layers)
    with GPath(args.input).open(errors="replace") as f:
        texts = [line.rstrip("\r\n") for line in f]
    extractor = FeatureExtractor(pretrained.encoder, pretrained.vocab, "all",
                                 args.seq_length, args.doc_stride)
    GPath(args.out).parent.mkdir(parents=True, exist_ok=True)
    words = write_features(texts, extractor, args.layers, args.out,
                           args.batch_size)
    print(f"wrote {args.out}: {', '.join(args.layers)} features of "
          f"{words:,} words in {len(texts):,} texts")


def demo_script():
    """`examples/demo.py` of this installation (not part of the library)."""
    from bert_tf import presets

    return presets.shared_dir() / "examples" / "demo.py"


def _demo(args):
    import runpy

    runpy.run_path(str(demo_script()), run_name="bert_tf_demo")["main"](
        output_dir=args.output)


def _add_corpus_arguments(parser):
    parser.add_argument(
        "--corpus", action="append", required=True,
        help="corpus spec, repeatable: sample:wikipedia, sample:lee, "
             "sample:rt_train, tfds:wikipedia/20230601.en, sentences:PATH "
             "(one sentence per line, blank line between documents), "
             "paragraphs:PATH, lines:PATH (one document per line)")
    parser.add_argument("--cache", help="sample cache directory")


def _add_run_arguments(parser, example_config, example_override):
    """--config, --set and --dry-run of the commands that run a config."""
    parser.add_argument("--config", required=True,
                        help=f"a YAML file, e.g. {example_config}")
    parser.add_argument("--set", action="append", default=[],
                        metavar="KEY=VALUE", help=f"override, e.g. "
                        f"{example_override} (repeatable)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the resolved config and the strategy, "
                             "then exit")


def build_parser():
    parser = argparse.ArgumentParser(
        prog="bert-tf",
        description="BERT pre-training, fine-tuning and serving in "
                    "TensorFlow 2 / Keras 3.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("presets", help="list the encoder sizes and their "
                                       "parameter counts")
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
                        "checkpoint directory")
    p.add_argument("--from", dest="source", required=True,
                   choices=CHECKPOINT_SOURCES,
                   help="hf: config.json + model.safetensors or "
                        "pytorch_model.bin; tf1: bert_config.json + "
                        "bert_model.ckpt; garden: Model Garden BertEncoderV2 "
                        "checkpoint + bert_config.json")
    p.add_argument("--input", required=True, help="checkpoint directory or "
                                                  "file")
    p.add_argument("--output", required=True, help="directory to write "
                                                   "config.yaml, vocab.txt, "
                                                   "model.ckpt.* into")
    p.add_argument("--vocab", help="vocab.txt (default: next to the input)")
    p.set_defaults(func=_convert)

    p = sub.add_parser("samples", help="fetch the real sample data and "
                                       "weights into the cache")
    p.add_argument("names", nargs="*", help="assets (default: all)")
    p.add_argument("--cache", help="cache directory (default: "
                                   "$BERT_TF_CACHE or ~/.cache/bert_tf)")
    p.set_defaults(func=_samples)

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

    p = sub.add_parser("pretrain", help="pre-train with a config "
                                        "(strategies, checkpoints, resume)")
    _add_run_arguments(p, "configs/pretrain/sample_cpu.yaml",
                       "trainer.train_steps=100")
    p.set_defaults(func=_pretrain)

    p = sub.add_parser("finetune", help="fine-tune any task kind with a "
                                        "config (task.kind names it)")
    _add_run_arguments(p, "configs/finetune/rt_sentiment_minilm.yaml",
                       "epochs=1")
    p.set_defaults(func=_finetune, command="finetune")
    p = sub.add_parser("distill", help="train a smaller student on a "
                                       "fine-tuned teacher's outputs")
    _add_run_arguments(p, "configs/distill/rt_sentiment_minilm_l3.yaml",
                       "temperature=4")
    p.set_defaults(func=_finetune, command="distill")

    p = sub.add_parser("export", help="write a fine-tuned model (or a "
                                      "pre-trained encoder's embeddings) as "
                                      "a SavedModel, TF Hub pair or TFLite "
                                      "file that takes raw text")
    p.add_argument("--checkpoint", required=True,
                   help="a `bert-tf finetune` model_dir (or its best/); "
                        "with --kind or --format hub, a pre-trained "
                        "checkpoint: a bert_tf checkpoint directory, or "
                        f"{'|'.join(CHECKPOINT_SOURCES)}:PATH")
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
             "{export_kinds}: embeddings gives text -> mean-pooled "
             "sentence embedding (serving_default) and per-word hidden "
             "states of every layer (word_features); fill_mask gives text "
             "with mask markers -> top-k tokens per mask (a checkpoint "
             "directory with the masked-LM head). A run exports as its own "
             "kind. (`--kind task` and `--kind hub` still work, with a "
             "warning.)")
    add_precision_arguments(p)
    add_limit_arguments(p)
    p.add_argument("--quantize", choices=("none", "dynamic_int8"),
                   help="tflite: fp32 weights (default), or dynamic-range "
                        "int8")
    p.add_argument("--seq-length", type=int,
                   help="embeddings / fill_mask / hub: truncate texts to "
                        "this many pieces (default 256 / 128 / 128; "
                        "embeddings as tflite: 128)")
    p.add_argument("--no-normalize", dest="normalize", action="store_const",
                   const=False, help="embeddings: do not L2-normalise")
    p.add_argument("--marker",
                   help="fill_mask: the string that marks a mask (default "
                        "[MASK])")
    p.add_argument("--top-k", type=int,
                   help="fill_mask: tokens returned per mask (default 5)")
    p.add_argument("--max-masks", type=int,
                   help="fill_mask: masks answered per text (default 8)")
    p.add_argument("--out", required=True,
                   help="export/NAME/VERSION (VERSION a number); hub: a "
                        "new directory; tflite: a .tflite file")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing export")
    p.add_argument("--fixed-length", action="store_const", const=True,
                   help="savedmodel: run every request at the full sequence "
                        "length (for XLA or TPU serving; default: each "
                        "batch at the length of its longest text)")
    p.set_defaults(func=_export)
    parser.export_parser = p

    p = sub.add_parser("features", help="per-word features of chosen "
                                        "layers for raw text (no "
                                        "fine-tuning)")
    p.add_argument("--checkpoint", required=True,
                   help="a bert_tf checkpoint directory or "
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
    p.add_argument("--doc-stride", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=32)
    p.set_defaults(func=_features)

    p = sub.add_parser("predict", help="answer raw text with an exported "
                                       "model (any task kind)",
                       epilog="Each export kind adds its own flags: "
                              "`bert-tf predict --model M --help` lists "
                              "those of M's kind.")
    p.add_argument("texts", nargs="*", help="texts to label, tag or embed "
                                           "(classification pairs: "
                                           "'A<TAB>B')")
    p.add_argument("--input", help="a file with one text per line; QA: a "
                                   "JSONL file of "
                                   '{"question", "context"} objects')
    p.add_argument("--model", dest="model", required=True,
                   help="export/NAME/VERSION, or a .tflite file")
    p.add_argument("--batch-size", type=int, default=64)
    p.set_defaults(func=_predict)
    parser.predict_parser = p

    try:
        script = demo_script()
    except FileNotFoundError as error:
        script = f"(not found: {error})"
    p = sub.add_parser("demo", help="the main job (what `make demo` runs)",
                       description=f"Runs {script}: the guided tour of "
                       "bert_tf (pre-training, fine-tuning, export, QA, "
                       "tagging) on real data and weights.")
    p.add_argument("--output", default="demo_out",
                   help="directory for what the demo writes")
    p.set_defaults(func=_demo)
    return parser


def main(argv=None):
    parser = build_parser()
    own_process = argv is None  # not called in-process, where one may train
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    if argv[:1] == ["export"] and {"-h", "--help"} & set(argv):
        _add_export_kinds(parser)
    if argv[:1] == ["predict"]:
        try:
            _add_kind_flags(parser.predict_parser, argv[1:])
        except (ValueError, FileNotFoundError) as e:
            print(f"bert-tf predict: error: {e}", file=sys.stderr)
            return 2
    args, extra = parser.parse_known_args(argv)
    args.own_process = own_process
    if extra and (args.command != "pairs" or not args.runner):
        kind = getattr(args, "export_kind", None)
        print(f"bert-tf {args.command}: error: {' '.join(extra)}: not "
              f"{f'a flag of a {kind} model' if kind else 'a flag here'}; "
              f"`bert-tf {args.command} {'--model M ' if kind else ''}--help`"
              " lists them.", file=sys.stderr)
        return 2
    args.pipeline_args = extra
    try:
        args.func(args)
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        if getattr(e, "exit_code", None):  # stopped on request (SIGTERM)
            print(f"bert-tf {args.command}: {e}", file=sys.stderr)
            return e.exit_code
        print(f"bert-tf {args.command}: error: {e}", file=sys.stderr)
        # A failed checkpoint restore leaves objects that, when collected,
        # log one warning per unrestored value; the error above says it all.
        import logging
        logging.getLogger("tensorflow").setLevel(logging.ERROR)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
