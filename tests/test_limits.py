"""The stated limits of an export (`bert_tf.serving.limits`): the default
of every kind, the floor and ceiling of the time-chosen default, and the
deadline that `export/serving_check.c` sends as TF Serving would."""

import shutil
import subprocess
from pathlib import Path

import pytest
from tensorflow.core.protobuf import config_pb2

from bert_tf import config as config_lib
from bert_tf.serving import limits
from bert_tf.tasks import base

ROOT = Path(__file__).resolve().parents[1]

# Each kind's default `--max-input-chars` for BERT-Base (12 x 768): kinds
# whose encoder reads all of a text get the limit chosen by time, the
# others 1,000,000. A new kind states its own here.
BERT_BASE_DEFAULTS = {
    "classification": 1_000_000,
    "classification (long_document)": 11_000,
    "embeddings": 1_000_000,
    "fill_mask": 1_000_000,
    "multiple_choice": 1_000_000,
    "similarity": 1_000_000,
    "span_qa": 11_000,
    "tagging": 11_000,
}


def _specs():
    """(case name, kind, spec) of each registered kind, with its config's
    defaults, and long-document classification."""
    for kind in base.available_kinds():
        config_class = getattr(base.get_kind(kind), "config_class", None)
        yield kind, kind, config_class() if config_class else None
    from bert_tf.tasks.classification.config import ClassificationConfig
    yield ("classification (long_document)", "classification",
           ClassificationConfig(long_document=True))


def test_every_kind_states_its_default_limits():
    encoder = config_lib.EncoderConfig.from_name("bert_base")
    got = {}
    for case, kind, spec in _specs():
        fields = limits.resolve(base.get_kind(kind), spec, encoder,
                                log=lambda line: None)
        got[case] = fields["max_input_chars"]
        assert fields["max_batch_chars"] == \
            limits.BATCH_TEXTS_AT_LIMIT * fields["max_input_chars"]
    assert got == BERT_BASE_DEFAULTS


@pytest.mark.parametrize("preset, expected", [
    ("all_minilm_l6", 90_000), ("bert_base", 11_000),
    # 3,100 characters by time: the floor (a long article) holds.
    ("bert_large", 10_000), ("bert_tiny", 1_000_000)])
def test_time_chosen_default_is_clamped_between_floor_and_ceiling(
        preset, expected):
    import dataclasses
    encoder = dataclasses.asdict(config_lib.EncoderConfig.from_name(preset))
    assert limits.default_max_input_chars(encoder, True) == expected
    assert limits.default_max_input_chars(encoder, False) == \
        limits.MAX_INPUT_CHARS


def test_serving_check_sends_the_deadline_it_was_given(tmp_path):
    """The RunOptions bytes of `serving_check -t MS` decode, as TF's own
    proto, to the same timeout_in_ms, across each varint byte boundary."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler on this machine")
    binary = tmp_path / "run_options_harness"
    subprocess.run([compiler, "-O1", "-o", str(binary),
                    str(ROOT / "tests" / "run_options_harness.c")],
                   check=True, capture_output=True, timeout=120)
    timeouts = [1, 20, 127, 128, 1_000, 16_383, 16_384, 30_000,
                2 ** 40]
    lines = subprocess.run([str(binary), *map(str, timeouts)], check=True,
                           capture_output=True, text=True,
                           timeout=60).stdout.split()
    decoded = [config_pb2.RunOptions.FromString(bytes.fromhex(line))
               for line in lines]
    assert [d.timeout_in_ms for d in decoded] == timeouts
    assert all(d.ListFields()[0][0].name == "timeout_in_ms" and
               len(d.ListFields()) == 1 for d in decoded)


def test_each_rule_holds_at_its_limit_and_refuses_one_past_it():
    """`text_checks` at the limits themselves: 4 bytes per character (a
    text of continuation bytes counts 0 characters), the characters of a
    text and of a request, the rows, and padded characters."""
    import tensorflow as tf

    def refusal(texts, **more):
        limits_kw = dict(max_input_chars=10, max_batch_chars=30,
                         max_batch_rows=4, **more)
        try:
            with tf.control_dependencies(limits.text_checks(
                    tf.constant(texts), "text", **limits_kw)):
                tf.constant(0)
            return None
        except tf.errors.InvalidArgumentError as error:
            return limits.refusal_line(error.message)

    assert refusal([b"\x80" * 40]) is None
    assert "a text of 41 bytes" in refusal([b"\x80" * 41])
    assert refusal(["x" * 10]) is None
    assert "a text of 11 characters" in refusal(["x" * 11])
    assert refusal(["x" * 10] * 3) is None
    assert "31 characters in one request" in refusal(["x" * 10] * 3 + ["y"])
    assert refusal([""] * 4) is None
    assert "5 texts in one request" in refusal([""] * 5)
    assert refusal(["x" * 10, "", ""], pads_to_longest=True) is None
    assert "pads 40 characters" in refusal(["x" * 10, "", "", ""],
                                          pads_to_longest=True)
