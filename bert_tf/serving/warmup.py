"""TF Serving warm-up records (`assets.extra/tf_serving_warmup_requests`).

A TFRecord file of `tensorflow.serving.PredictionLog` protos that TF Serving
replays when it loads a model, so the first real request does not pay for
graph initialization. The protos are written by hand from their field
numbers (prediction_log.proto, predict.proto, model.proto): the
`tensorflow-serving-api` package would pin another TensorFlow.
"""

import tensorflow as tf

from bert_tf.data.protobuf_wire import field

# PredictionLog.predict_log = 6; PredictLog.request = 1;
# PredictRequest.model_spec = 1, .inputs = 2 (map<string, TensorProto>);
# ModelSpec.name = 1, .signature_name = 3; map entries: key = 1, value = 2.
_PREDICTION_LOG_PREDICT_LOG = 6
_PREDICT_LOG_REQUEST = 1
_REQUEST_MODEL_SPEC, _REQUEST_INPUTS = 1, 2
_SPEC_NAME, _SPEC_SIGNATURE = 1, 3


def predict_log(inputs, model_name, signature_name="serving_default"):
    """A serialized `PredictionLog` holding one `PredictRequest`.

    Args:
        inputs: {input name: array-like}, e.g. {"text": ["a good film"]}.
        model_name: the model's name in TF Serving's model config.
        signature_name: the signature to call.

    Examples:
        >>> record = predict_log({"text": ["fine"]}, "rt")
        >>> record[:1]
        b'2'
    """
    spec = field(_SPEC_NAME, model_name.encode()) + \
        field(_SPEC_SIGNATURE, signature_name.encode())
    request = field(_REQUEST_MODEL_SPEC, spec)
    for name, value in inputs.items():
        tensor = tf.make_tensor_proto(value).SerializeToString()
        request += field(_REQUEST_INPUTS,
                         field(1, name.encode()) + field(2, tensor))
    return field(_PREDICTION_LOG_PREDICT_LOG,
                 field(_PREDICT_LOG_REQUEST, request))


def write_warmup_requests(path, requests, model_name):
    """Writes `requests` (a list of input dicts) as warm-up records."""
    with tf.io.TFRecordWriter(str(path)) as writer:
        for inputs in requests:
            writer.write(predict_log(inputs, model_name))
    return path
