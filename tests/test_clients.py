"""The serving client example's request builders (no server needed)."""

import doctest

import numpy as np
import pytest
import tensorflow as tf
from serving_requests import client, tensors_from_grpc, tensors_from_rest


def test_client_docstring_examples():
    result = doctest.testmod(client())
    assert result.attempted >= 2 and result.failed == 0


def test_rest_forms_carry_the_same_tensors():
    c = client()
    inputs = {"context": ["It rained.", "Ann sang."],
              "choices": [["She left.", "We slept."], ["Fans cheered.",
                                                        "It froze."]]}
    rows = tensors_from_rest(c.rest_body(inputs, "instances"))
    columns = tensors_from_rest(c.rest_body(inputs, "inputs"))
    grpc = tensors_from_grpc(c.grpc_request("choice", inputs))
    for tensors in (rows, columns, grpc):
        assert tensors["choices"].shape == (2, 2)
        assert tensors["choices"].dtype == tf.string
        assert tensors["context"].numpy()[1] == b"Ann sang."
    request = c.grpc_request("choice", inputs)
    assert request.model_spec.name == "choice"
    assert request.model_spec.signature_name == "serving_default"


def test_non_ascii_text_travels_as_utf8():
    c = client()
    text = ["Zoë in Zürich 😀", "文字"]
    for tensors in (tensors_from_rest(c.rest_body({"text": text})),
                    tensors_from_grpc(c.grpc_request("m", {"text": text}))):
        assert [t.decode() for t in tensors["text"].numpy()] == text


def test_bad_requests_are_clear_errors():
    c = client()
    with pytest.raises(ValueError, match="one value per example"):
        c.rest_body({"question": ["a", "b"], "context": ["c"]})
    with pytest.raises(ValueError, match="use instances or inputs"):
        c.rest_body({"text": ["a"]}, form="rows")
    assert np.array(c.KINDS["qa"](["q1", "c1", "q2", "c2"])["context"]
                    ).tolist() == ["c1", "c2"]
