"""Rows of local task files (TSV, CSV or JSON Lines with named columns),
read alike by every kind that takes such files."""

import csv
import json

from bert_tf.storage import GPath

FORMATS = ("tsv", "csv", "jsonl")


def file_format(path, fmt=None):
    """The format of `path`: `fmt`, or what its name ends in."""
    fmt = fmt or GPath(path).suffix.lstrip(".").lower()
    fmt = {"json": "jsonl", "txt": "tsv"}.get(fmt, fmt)
    if fmt not in FORMATS:
        raise ValueError(f"{path}: cannot tell the format from its name; "
                         f"pass format= one of {', '.join(FORMATS)}.")
    return fmt


def read_rows(path, fmt=None):
    """Rows of a TSV/CSV (first line: column names) or JSONL file as dicts.

    Invalid UTF-8 bytes become U+FFFD rather than failing the file.
    """
    path = GPath(path)
    if not path.is_file():
        raise FileNotFoundError(f"Task file {path} does not exist.")
    fmt = file_format(path, fmt)
    with path.open(errors="replace", newline="") as f:
        if fmt == "jsonl":
            rows = []
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{number}: not valid JSON "
                                     f"({e.msg}).") from None
                if not isinstance(row, dict):
                    raise ValueError(f"{path}:{number}: each line must be a "
                                     "JSON object.")
                rows.append(row)
            return rows
        reader = csv.DictReader(
            f, delimiter="\t" if fmt == "tsv" else ",",
            quoting=csv.QUOTE_NONE if fmt == "tsv" else csv.QUOTE_MINIMAL)
        return list(reader)


def column(rows, key, path, line_offset):
    values = []
    for number, row in enumerate(rows):
        if key not in row or row[key] is None:
            raise ValueError(
                f"{path}:{number + line_offset}: no column {key!r}; the "
                f"columns are {', '.join(map(str, row))}.")
        values.append(row[key])
    return values


def first_line(path, fmt=None):
    """The file line of a file's first row (2 under a header line)."""
    return 1 if file_format(path, fmt) == "jsonl" else 2
