"""The two pieces of the protobuf wire format that pair records need,
written by hand because the worker processes that write them do not load
TensorFlow (and so have no `tf.train.Example`): varints and
length-delimited fields."""


def varint(value):
    """A non-negative int as a protobuf varint.

    Examples:
        >>> varint(300)
        b'\\xac\\x02'
    """
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field(number, payload):
    """A length-delimited protobuf field (wire type 2)."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload
