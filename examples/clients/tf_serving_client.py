"""Clients for bert_tf exports served by TF Serving, over REST and gRPC.

Every bert_tf SavedModel takes raw strings, so a request is just text:

    python examples/clients/tf_serving_client.py --rest localhost:8501 \
        --model rt_sentiment --kind sentiment "An utterly charming film."
    python examples/clients/tf_serving_client.py --grpc localhost:8500 \
        --model wnut_qa --kind qa "Which place?" "Snow in Oslo again"

REST posts `:predict` JSON in the row form (`instances`, one object per
example) or the columnar form (`inputs`, one list per input name); gRPC
sends a `tensorflow_serving.apis.PredictRequest` (package
`tensorflow-serving-api`). `tests/` build each request exactly as here and
check the answer of the exported model.
"""

import argparse
import json
import urllib.request

import numpy as np

# Each task kind's inputs from command-line words, as named tensors.
KINDS = {
    "sentiment": lambda words: {"text": words},
    "pair": lambda words: {"text": words[0::2], "text_b": words[1::2]},
    "qa": lambda words: {"question": words[0::2], "context": words[1::2]},
    "ner": lambda words: {"text": words},
    "choice": lambda words: {"context": words[:1], "choices": [words[1:]]},
    "embeddings": lambda words: {"text": words},
}


def rest_body(inputs, form="instances", signature="serving_default"):
    """The JSON body of a REST `:predict` request.

    Args:
        inputs: {input name: list over the batch} (strings, or lists of
            strings for multiple choice's `choices`).
        form: `instances` (row form: a list of {name: value} objects) or
            `inputs` (columnar form: {name: list}).
        signature: the SavedModel signature to run.

    Examples:
        >>> rest_body({"text": ["a fine film", "dull"]})
        {'signature_name': 'serving_default', 'instances': [{'text': 'a fine film'}, {'text': 'dull'}]}
        >>> rest_body({"text": ["a fine film"]}, form="inputs")
        {'signature_name': 'serving_default', 'inputs': {'text': ['a fine film']}}
    """
    if form == "inputs":
        return {"signature_name": signature, "inputs": dict(inputs)}
    if form != "instances":
        raise ValueError(f"form {form!r}: use instances or inputs.")
    names = list(inputs)
    sizes = {len(inputs[name]) for name in names}
    if len(sizes) != 1:
        raise ValueError("every input needs one value per example; got "
                         + ", ".join(f"{n}: {len(inputs[n])}" for n in names))
    return {"signature_name": signature, "instances": [
        {name: inputs[name][i] for name in names}
        for i in range(sizes.pop())]}


def rest_predict(host, model, body, timeout=60):
    """POSTs `body` to TF Serving's REST API; returns its JSON answer
    (`predictions` for the row form, `outputs` for the columnar form)."""
    request = urllib.request.Request(
        f"http://{host}/v1/models/{model}:predict",
        data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def grpc_request(model, inputs, signature="serving_default"):
    """A `PredictRequest` for `model` with `inputs` as string tensors."""
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = signature
    for name, value in inputs.items():
        array = np.array(value, dtype=object)
        request.inputs[name].CopyFrom(tf.make_tensor_proto(array,
                                                           dtype=tf.string))
    return request


def grpc_predict(target, request, timeout=60):
    """Sends `request` to TF Serving's gRPC API at `target` (host:port);
    returns {output name: NumPy array}."""
    import grpc
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    with grpc.insecure_channel(target) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        response = stub.Predict(request, timeout)
    return {name: tf.make_ndarray(proto)
            for name, proto in response.outputs.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--rest", metavar="HOST:PORT")
    where.add_argument("--grpc", metavar="HOST:PORT")
    parser.add_argument("--model", required=True, help="the model's name "
                        "in models.config, e.g. rt_sentiment")
    parser.add_argument("--kind", choices=sorted(KINDS), default="sentiment")
    parser.add_argument("--form", choices=("instances", "inputs"),
                        default="instances", help="REST body form")
    parser.add_argument("words", nargs="+", help="texts (qa: QUESTION "
                        "CONTEXT pairs; choice: CONTEXT CHOICE...)")
    args = parser.parse_args(argv)
    inputs = KINDS[args.kind](args.words)
    if args.rest:
        answer = rest_predict(args.rest, args.model,
                              rest_body(inputs, args.form))
    else:
        answer = {k: v.tolist() for k, v in grpc_predict(
            args.grpc, grpc_request(args.model, inputs)).items()}
    print(json.dumps(answer, indent=2, default=str))


if __name__ == "__main__":
    main()
