"""The `bert-tf` command: parse, call the library, print what was written
where. `parsers.py` builds the parser (one builder per group of
subcommands); `commands.py` holds what each subcommand does."""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from bert_tf.cli.commands import (_add_export_kind_flags,  # noqa: E402
                                  _add_export_kinds, _add_kind_flags,
                                  export_flag_refusal)
from bert_tf.cli.parsers import build_parser  # noqa: E402


def main(argv=None):
    parser = build_parser()
    own_process = argv is None  # not called in-process, where one may train
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    if argv[:1] == ["export"] and {"-h", "--help"} & set(argv):
        _add_export_kinds(parser)
    elif argv[:1] == ["export"]:
        _add_export_kind_flags(parser.export_parser, argv[1:])
    if argv[:1] == ["predict"]:
        try:
            _add_kind_flags(parser.predict_parser, argv[1:])
        except (ValueError, FileNotFoundError) as e:
            print(f"bert-tf predict: error: {e}", file=sys.stderr)
            return 2
    args, extra = parser.parse_known_args(argv)
    args.own_process = own_process
    if extra and args.command == "export":
        try:
            message = export_flag_refusal(args, extra)
        except ValueError as e:  # the format or kind itself is wrong
            message = str(e)
        print(f"bert-tf export: error: {message}", file=sys.stderr)
        return 2
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


__all__ = ["build_parser", "main"]
