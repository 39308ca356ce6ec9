"""What each `bert-tf` subcommand does: parse nothing, import the library
lazily (so that `--help` stays instant), call it, print what was written
where."""

import argparse
import sys
import warnings

from bert_tf.serving import old_kind_spelling


def _presets(args):
    from bert_tf import config, presets

    print(f"{'preset':<30} {'L':>3} {'H':>5} {'A':>3} {'parameters':>13}  "
          "weights")
    for name in presets.available():
        model = config.load_model_preset(name)
        cfg = model.encoder
        print(f"{name:<30} {cfg.num_layers:>3} {cfg.hidden_size:>5} "
              f"{cfg.num_heads:>3} {cfg.num_parameters():>13,}  "
              f"{model.weights.source or '- (size only)'}")


def _config(args):
    import yaml

    from bert_tf import config, presets

    path = presets.preset_path(args.preset) if args.preset else args.config
    cfg = config.load_config(path, config.ModelConfig, args.set)
    print(yaml.safe_dump(config.to_dict(cfg), sort_keys=False), end="")


def _convert(args):
    from bert_tf import checkpoints
    from bert_tf.storage import GPath
    from bert_tf.tasks import hf_runs

    _check_convert_output(GPath(args.output), args.overwrite)
    if args.source in (None, "hf") and hf_runs.is_task_checkpoint(
            args.input):
        return hf_runs.convert_hf_run(
            args.input, args.output, vocab_path=args.vocab,
            labels=hf_runs.read_labels(args.labels) if args.labels else None)
    if args.labels:
        raise ValueError("--labels applies to an HF checkpoint whose "
                         "config.json names a task head; "
                         f"{args.input} has none.")
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


def _check_convert_output(out, overwrite):
    """`bert-tf convert` writes into a new (or empty) directory; with
    --overwrite an existing one is cleared first, so no file of what was
    there (a run's task.yaml) outlives it."""
    if not out.exists() or (out.is_dir() and not any(out.iterdir())):
        return
    if not overwrite:
        held = ("a run (task.yaml)" if (out / "task.yaml").exists() else
                "a checkpoint (config.yaml)" if (out / "config.yaml").exists()
                else "files")
        raise ValueError(f"--output {out} already exists and holds {held}; "
                         "choose a new directory, or pass --overwrite to "
                         "replace it.")
    if not out.is_dir():
        raise ValueError(f"--output {out} is a file, not a directory.")
    out.rmtree()


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
    print(service.EXPOSURE_WARNING, file=sys.stderr, flush=True)
    service.serve_until_stopped(server)
    print("stopped", flush=True)


def _training_process(args):
    """Before TensorFlow loads: oneDNN's rewrites where they pay for
    training (bert_tf.precision.onednn_for_training), in `bert-tf`'s own
    process only (called in-process, what follows may serve)."""
    from bert_tf.precision import onednn_for_training

    line = (onednn_for_training()
            if args.own_process and not args.dry_run else None)
    if line:
        print(line)


def _pretrain(args):
    _training_process(args)
    from bert_tf import pretrain

    cfg = pretrain.load(args.config, args.set)
    pretrain.run(cfg, dry_run=args.dry_run)


def _finetune(args):
    _training_process(args)
    from bert_tf import distill, finetune

    module = distill if args.command == "distill" else finetune
    cfg = module.load(args.config, args.set)
    if args.dry_run or module is finetune:
        finetune.run(cfg, dry_run=args.dry_run, fresh=args.fresh)
    else:
        distill.run(cfg, fresh=args.fresh)


def _evaluate(args):
    from bert_tf import tasks

    from bert_tf.tasks.labels import parse_label_map

    results = tasks.evaluate_run(args.run, args.set, args.split,
                                 args.batch_size, data_file=args.data,
                                 label_map=parse_label_map(args.label_map))
    print(", ".join(f"{name} {value:.4f}" for name, value in
                    results.items()) or "no labels in this split: nothing "
          "to score")


def _export(args):
    from bert_tf.serving import RUN_WRITERS, write_export

    # Every format's options (the route table), and the kind's own.
    options = (*sorted(set().union(*(takes for _, takes in
                                     RUN_WRITERS.values()))),
               *getattr(args, "kind_options", ()))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FutureWarning)
        format, kind = old_kind_spelling(args.format, args.kind)
    for warning in caught:
        print(f"bert-tf export: {warning.message}", file=sys.stderr)
    pretrained = kind is not None or format == "hub"
    if bool(args.run) == bool(args.checkpoint):
        raise ValueError("give --run RUN (a fine-tuning run) or --checkpoint "
                         "CKPT (a pre-trained checkpoint, with --kind or "
                         "--format hub), one of them.")
    if args.run and pretrained:
        raise ValueError(f"--run names a fine-tuning run; "
                         f"{f'--kind {kind}' if kind else '--format hub'} "
                         "exports a pre-trained --checkpoint.")
    if args.checkpoint and not pretrained:
        print("bert-tf export: a fine-tuning run is now given as --run "
              f"{args.checkpoint} (--checkpoint still works).",
              file=sys.stderr)
    write_export(format, kind, args.run or args.checkpoint, args.out,
                 overwrite=args.overwrite,
                 **{name: getattr(args, name, None) for name in options})


def _predict(args):
    from bert_tf.serving.export import print_export_predictions

    if str(args.model).endswith(".tflite"):
        from bert_tf.serving.tflite import print_predictions

        return print_predictions(args.model, args)
    print_export_predictions(args.model, args, args.own_process)


def _add_export_kinds(parser):
    """`bert-tf export --help`'s kinds and their own flags, from the
    registry (which imports the kinds: only for the help; `write_export`
    checks a --kind given)."""
    from bert_tf import tasks
    from bert_tf.serving import export_only_kinds
    from bert_tf.serving.tflite import tflite_kinds

    kinds = export_only_kinds("savedmodel")
    names = {"{export_kinds}": ", ".join(kinds),
             "{tflite_kinds}": ", ".join(tflite_kinds())}
    for action in parser.export_parser._actions:
        for placeholder, value in names.items():
            if action.help and placeholder in action.help:
                action.help = action.help.replace(placeholder, value)
    for kind in kinds:
        kind_class = tasks.get_kind(kind)
        kind_class.add_export_arguments(parser.export_parser.add_argument_group(
            f"--kind {kind}", kind_class.export_help))


def _add_export_kind_flags(export_parser, argv):
    """`bert-tf export`'s parser with the flags of the `--kind` given, if
    an export-only kind (each kind declares its own); their dests are the
    default `kind_options`. Without --kind nothing is imported: a run's
    export is refused or written without TensorFlow at parse time."""
    finder = argparse.ArgumentParser(add_help=False)
    finder.add_argument("--kind")
    kind = finder.parse_known_args(argv)[0].kind
    options = []
    if kind and kind not in ("task", "hub"):  # the old spellings
        from bert_tf import tasks

        if kind in tasks.available_kinds():
            kind_class = tasks.get_kind(kind)
            options = kind_class.add_export_arguments(
                export_parser.add_argument_group(f"--kind {kind}"))
    export_parser.set_defaults(kind_options=options)


def export_flag_refusal(args, extra):
    """The one-line refusal of flags `bert-tf export` did not parse
    (`extra`): where the first one applies (a kind's own flag), and what
    this export takes."""
    from bert_tf.serving import _refusal, old_kind_spelling, route

    flag = next((a for a in extra if a.startswith("--")), extra[0])
    flag = flag.split("=")[0]
    name = _export_flag_dest(flag)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        format, kind = old_kind_spelling(args.format, args.kind)
    message = _refusal(name, format, kind, route(format, kind)[2], flag)
    if "it applies to no export" in message:
        return (f"{flag}: not a flag of bert-tf export; `bert-tf export "
                "--help` lists them.")
    return message


def _export_flag_dest(flag):
    """The option a typed export flag sets: a kind's own flag may store to
    another name (`--no-normalize` sets `normalize`)."""
    if flag.startswith("--"):
        from bert_tf import tasks

        for kind in tasks.available_kinds():
            dest = tasks.get_kind(kind).export_argument_dest(flag)
            if dest:
                return dest
    return flag.lstrip("-").replace("-", "_")


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

    kind_class = tasks.get_export_class(kind)
    predict_parser.description = (f"{model} is a {kind} export: it answers "
                                  f"{kind_class.predict_help}.")
    predict_parser.epilog = (f"Example: {kind_class.predict_example}"
                             .replace(" M ", f" {model} "))
    if kind_class.predict_arguments:
        group = predict_parser.add_argument_group(
            f"flags of a {kind} export")
        kind_class.add_predict_arguments(group)
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
