"""The serving clients' requests (examples/clients/tf_serving_client.py),
turned into tensors the way TF Serving reads them and run through an
export's `serving_default`."""

import base64
import importlib.util
from pathlib import Path

import numpy as np
import tensorflow as tf

CLIENT = (Path(__file__).resolve().parents[1] / "examples" / "clients" /
          "tf_serving_client.py")


def client():
    spec = importlib.util.spec_from_file_location("tf_serving_client",
                                                  CLIENT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _value(value):
    """A JSON value as TF Serving reads it for a string input: UTF-8 text,
    or {"b64": ...} for raw bytes; lists nest."""
    if isinstance(value, list):
        return [_value(v) for v in value]
    if isinstance(value, dict):
        return base64.b64decode(value["b64"])
    return value.encode("utf-8")


def tensors_from_rest(body):
    """{name: tf.string tensor} of a REST `:predict` body: the row form
    stacks each input over the instances, the columnar form takes each list
    as the tensor."""
    if "inputs" in body:
        return {name: tf.constant(_value(v))
                for name, v in body["inputs"].items()}
    names = list(body["instances"][0])
    return {name: tf.constant([_value(row[name])
                               for row in body["instances"]])
            for name in names}


def tensors_from_grpc(request):
    return {name: tf.constant(tf.make_ndarray(proto))
            for name, proto in request.inputs.items()}


def answers(export_dir, inputs, model_name="m"):
    """{request form: outputs as NumPy} for `inputs` sent as the REST row
    form, the REST columnar form and gRPC, each through the loaded
    export's `serving_default`, plus `direct` (the inputs passed as
    tensors)."""
    import json

    import tensorflow_text  # noqa: F401  (the tokenizer's ops)

    c = client()
    serve = tf.saved_model.load(str(export_dir)).signatures[
        "serving_default"]
    requests = {
        # The bodies go through JSON as they would over the wire.
        "rest_instances": tensors_from_rest(json.loads(json.dumps(
            c.rest_body(inputs, "instances")))),
        "rest_inputs": tensors_from_rest(json.loads(json.dumps(
            c.rest_body(inputs, "inputs")))),
        "grpc": tensors_from_grpc(c.grpc_request(model_name, inputs)),
        "direct": {k: tf.constant(v) for k, v in inputs.items()},
    }
    return {form: {k: v.numpy() for k, v in serve(**tensors).items()}
            for form, tensors in requests.items()}


def assert_same_answers(results):
    """Every request form gives the direct call's outputs exactly."""
    direct = results["direct"]
    for form, outputs in results.items():
        assert set(outputs) == set(direct), form
        for name, value in outputs.items():
            if value.dtype.kind in "fc":
                np.testing.assert_allclose(value, direct[name], atol=1e-6,
                                           err_msg=f"{form} {name}")
            else:
                assert (value == direct[name]).all(), (form, name)
    return direct
