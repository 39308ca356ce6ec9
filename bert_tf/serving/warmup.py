"""TF Serving warm-up records (`assets.extra/tf_serving_warmup_requests`).

A TFRecord file of `tensorflow.serving.PredictionLog` protos that TF Serving
replays when it loads a model, so the first real request does not pay for
graph initialization. The protos are `tensorflow-serving-api`'s own (its
2.20 release asks for the TensorFlow we pin, and grpcio and protobuf, which
TensorFlow already needs).
"""

import tensorflow as tf


def predict_log(inputs, model_name, signature_name="serving_default"):
    """A serialized `PredictionLog` holding one `PredictRequest`.

    Args:
        inputs: {input name: array-like}, e.g. {"text": ["a good film"]}.
        model_name: the model's name in TF Serving's model config.
        signature_name: the signature to call.

    Examples:
        >>> from tensorflow_serving.apis import prediction_log_pb2
        >>> log = prediction_log_pb2.PredictionLog.FromString(
        ...     predict_log({"text": ["fine"]}, "rt"))
        >>> log.predict_log.request.model_spec.name
        'rt'
    """
    from tensorflow_serving.apis import (model_pb2, predict_pb2,
                                         prediction_log_pb2)

    request = predict_pb2.PredictRequest(model_spec=model_pb2.ModelSpec(
        name=model_name, signature_name=signature_name))
    for name, value in inputs.items():
        request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
    return prediction_log_pb2.PredictionLog(
        predict_log=prediction_log_pb2.PredictLog(request=request)
    ).SerializeToString(deterministic=True)


def write_warmup_requests(path, requests, model_name):
    """Writes `requests` (a list of input dicts) as warm-up records."""
    with tf.io.TFRecordWriter(str(path)) as writer:
        for inputs in requests:
            writer.write(predict_log(inputs, model_name))
    return path
