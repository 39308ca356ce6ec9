"""BertEncoder: the bidirectional Transformer encoder of BERT as a functional
Keras model with TF Hub input and output names."""

import dataclasses

import keras
import tensorflow as tf

from bert_tf import formats, presets
from bert_tf.config import EncoderConfig, load_preset
from bert_tf.formats.canonical import assign_weights
from bert_tf.layers.embeddings import BertEmbeddings, truncated_normal
from bert_tf.layers.int8 import WEIGHT_LIMIT, InputRangeRecorder, Int8Dense
from bert_tf.layers.transformer import (TransformerBlock,
                                       attention_logit_bias)
from bert_tf.text.features import INPUT_NAMES
from bert_tf.keras_compat import replace_sublayer


def select_inputs(inputs, names):
    """Drops dict entries a functional model does not take (labels, ids).

    Lets one feature dict (e.g. a pre-training batch) feed every model
    without Keras warning about unmatched keys.
    """
    if isinstance(inputs, dict):
        return {name: inputs[name] for name in names if name in inputs}
    return inputs


def encoder_inputs(names=INPUT_NAMES):
    """Symbolic int32 [batch, seq] inputs named as TF Hub BERT models."""
    return {name: keras.Input(shape=(None,), dtype="int32", name=name)
            for name in names}


def from_config_with_encoder(cls, config):
    """`cls(**config)` with the serialized `encoder` entry rebuilt: the
    `from_config` of every model that wraps a `BertEncoder`."""
    config = dict(config)
    config["encoder"] = keras.saving.deserialize_keras_object(
        config["encoder"])
    return cls(**config)


@keras.saving.register_keras_serializable(package="bert_tf")
class BertEncoder(keras.Model):
    """The BERT encoder (Devlin et al. 2018).

    Inputs (int32, [batch, seq]): `input_word_ids`, `input_mask` (1 for
    real tokens, 0 for padding) and `input_type_ids` (segment 0 or 1).
    Outputs: `sequence_output` [batch, seq, H], `pooled_output` [batch, H]
    (dense + tanh on `[CLS]`), `encoder_outputs`, one [batch, seq, H]
    tensor per layer (as TF Hub BERT encoders), and `embedding_output`, the
    [batch, seq, H] input of the first layer (the feature-based approach
    reads it too; `bert_tf.tasks.embeddings.extract.hidden_states`).

    The arguments `vocab_size`, `hidden_size`, `num_layers`, `num_heads`,
    `intermediate_size`, `max_position_embeddings`, `type_vocab_size`,
    `hidden_act`, `hidden_dropout`, `attention_dropout`,
    `initializer_range`, `layer_norm_eps`, `attention` and
    `embedding_size` are the fields of
    `bert_tf.config.EncoderConfig`.

    Args:
        dtype: a Keras dtype policy (e.g. `mixed_bfloat16`); default global.

    Examples:
        >>> import numpy as np
        >>> encoder = BertEncoder.from_preset("bert_tiny")
        >>> ids = np.array([[101, 7592, 102, 0]], "int32")
        >>> out = encoder({"input_word_ids": ids,
        ...                "input_mask": (ids > 0).astype("int32"),
        ...                "input_type_ids": np.zeros_like(ids)})
        >>> out["pooled_output"].shape, len(out["encoder_outputs"])
        (TensorShape([1, 128]), 2)
    """

    def __init__(self, vocab_size=30522, hidden_size=768, num_layers=12,
                 num_heads=12, intermediate_size=3072,
                 max_position_embeddings=512, type_vocab_size=2,
                 hidden_act="gelu", hidden_dropout=0.1, attention_dropout=0.1,
                 initializer_range=0.02, layer_norm_eps=1e-12,
                 attention="bidirectional", embedding_size=0, dtype=None,
                 **kwargs):
        config = EncoderConfig(
            vocab_size=vocab_size, hidden_size=hidden_size,
            num_layers=num_layers, num_heads=num_heads,
            intermediate_size=intermediate_size,
            max_position_embeddings=max_position_embeddings,
            type_vocab_size=type_vocab_size, hidden_act=hidden_act,
            hidden_dropout=hidden_dropout,
            attention_dropout=attention_dropout,
            initializer_range=initializer_range,
            layer_norm_eps=layer_norm_eps, attention=attention,
            embedding_size=embedding_size).validate()

        # === Layers ===
        self.embeddings = BertEmbeddings(
            vocab_size, hidden_size, max_position_embeddings, type_vocab_size,
            hidden_dropout, initializer_range, layer_norm_eps,
            embedding_size=embedding_size, dtype=dtype, name="embeddings")
        self.transformer_layers = [
            TransformerBlock(
                hidden_size, num_heads, intermediate_size, hidden_act,
                hidden_dropout, attention_dropout, initializer_range,
                layer_norm_eps, causal=attention == "causal", dtype=dtype,
                name=f"transformer_layer_{i}")
            for i in range(num_layers)]
        self.pooler = keras.layers.Dense(
            hidden_size, activation="tanh",
            kernel_initializer=truncated_normal(initializer_range),
            dtype=dtype, name="pooler")

        # === Functional model ===
        inputs = encoder_inputs()
        x = embedding_output = self.embeddings(inputs["input_word_ids"],
                                               inputs["input_type_ids"])
        layer_outputs = []
        for block in self.transformer_layers:
            x = block(x, inputs["input_mask"])
            layer_outputs.append(x)
        outputs = {
            "sequence_output": x,
            "pooled_output": self.pooler(x[:, 0, :]),
            "encoder_outputs": layer_outputs,
            "embedding_output": embedding_output,
        }
        super().__init__(inputs=inputs, outputs=outputs, dtype=dtype,
                         **kwargs)

        # === Config ===
        self.config = config

    def freeze(self, num_layers):
        """Stops training the embeddings and the first `num_layers`
        transformer blocks (0: train everything). Backpropagation then ends
        at the first trained block, so a step costs less.

        Examples:
            >>> encoder = BertEncoder.from_preset("bert_tiny")
            >>> encoder.freeze(1)
            >>> [b.trainable for b in encoder.transformer_layers]
            [False, True]
        """
        if not 0 <= num_layers <= len(self.transformer_layers):
            raise ValueError(
                f"freeze_layers = {num_layers}: must be in [0, "
                f"{len(self.transformer_layers)}] (this encoder's layers).")
        self.embeddings.trainable = num_layers == 0
        for i, block in enumerate(self.transformer_layers):
            block.trainable = i >= num_layers

    def to_int8(self, calibrate=None, alpha=0.75, attention="float32",
                weight_limit=WEIGHT_LIMIT):
        """Runs the transformer blocks' matmuls on int8 weights with
        oneDNN's int8 kernels (VNNI, AMX-INT8), for export with
        `--precision int8`: embeddings, layer norms, the pooler and every
        output stay float32; the attention (scores, softmax, context) in
        `attention`'s dtype. The encoder can no longer train; build it in
        float32 and load its weights first.

        Args:
            calibrate: None, or a function that runs the model holding
                this encoder over real inputs; each matmul's input range
                per channel is recorded, its outlier channels smoothed
                into its weights and its range fixed
                (`Int8Dense.from_dense`).
            alpha: the smoothing's strength.
            attention: `float32`, or `bfloat16` (query/key/value come out
                of their int8 kernel in bf16; for CPUs with AVX512_BF16 or
                AMX: `bert_tf.serving.quantize`).
            weight_limit: the largest int8 weight code: 127, or 63 (7-bit
                weights) for CPUs without VNNI, whose int8 kernels add
                pairs of products in 16 bits
                (`bert_tf.serving.quantize.weight_limit`).

        Returns:
            {matmul name: largest input seen} when calibrated, else {}.

        Examples:
            >>> import numpy as np
            >>> encoder = BertEncoder.from_preset("bert_tiny")
            >>> inputs = {"input_word_ids": np.array([[2, 7, 9, 3]], "int32"),
            ...           "input_mask": np.ones((1, 4), "int32"),
            ...           "input_type_ids": np.zeros((1, 4), "int32")}
            >>> before = encoder(inputs)["pooled_output"].numpy()
            >>> count = len(encoder.weights)
            >>> seen = encoder.to_int8(calibrate=lambda: encoder(inputs))
            >>> after = encoder(inputs)["pooled_output"].numpy()
            >>> bool(np.abs(after - before).max() < 0.05), len(encoder.weights) < count
            (True, True)
            >>> len(seen), sorted(seen)[0]
            (8, 'transformer_layer_0/attention/output_dense')
        """
        slots = [(block, owner, attribute)
                 for block in self.transformer_layers
                 for owner, attribute in block.int8_matmuls()]
        shifts = self._int8_input_shifts()
        recorders = self._recorded_inputs(slots, calibrate)
        seen = {}
        for block, owner, attribute in slots:
            recorder = recorders.get((owner, attribute))
            dense = recorder.dense if recorder else getattr(owner, attribute)
            low = high = None
            if recorder:
                if recorder.seen is None:
                    raise ValueError("int8 calibration saw no input: give "
                                     "it at least one non-empty batch.")
                low, high = recorder.seen
                name = "/".join(dict.fromkeys(
                    (block.name, owner.name, dense.name)))
                seen[name] = float(max(-low.min(), high.max()))
            int8 = Int8Dense.from_dense(
                dense, low, high, alpha, output_dtype=attention
                if owner is block.attention and attribute == "qkv"
                else "float32", weight_limit=weight_limit,
                input_shift=shifts.get((id(owner), attribute)))
            if owner is block.attention and attribute == "output_dense" and \
                    int8.input_scale is not None:
                # Its input is probabilities x values: its smoothing divides
                # the value columns of query/key/value (quantized after it)
                # instead of costing a multiply per request.
                qkv = recorders.get((owner, "qkv")) or owner.qkv
                owner.scale_values(getattr(qkv, "dense", qkv),
                                   1.0 / int8.input_scale)
                int8.input_scale = None
            replace_sublayer(owner, attribute, int8)
        return seen

    @staticmethod
    def _recorded_inputs(slots, calibrate):
        """{(owner, attribute): its `InputRangeRecorder`} after `calibrate`
        ran with one in each matmul of `slots` ({} if None)."""
        recorders = {}
        if calibrate is not None:
            for _, owner, attribute in slots:
                recorder = InputRangeRecorder(getattr(owner, attribute))
                replace_sublayer(owner, attribute, recorder)
                recorders[owner, attribute] = recorder
            calibrate()
        return recorders

    def _int8_input_shifts(self):
        """{(id(owner), attribute): the beta of the layer norm whose output
        that matmul reads}: its int8 layer quantizes the output less it
        (served blocks leave it out: `bert_tf.layers.folding`)."""
        norms = {}
        before = self.embeddings.layer_norm \
            if self.embeddings.projection is None else None
        for block in self.transformer_layers:
            norms[id(block.attention), "qkv"] = before
            norms[id(block), "intermediate"] = block.attention_norm
            before = block.output_norm
        return {key: norm.beta.numpy() for key, norm in norms.items()
                if norm is not None and norm.center}

    def call(self, inputs, training=None, mask=None, **kwargs):
        inputs = select_inputs(inputs, INPUT_NAMES)
        x = embedding_output = self.embeddings(
            inputs["input_word_ids"], inputs["input_type_ids"],
            training=training)
        # Computed once for all layers; the blocks run on token rows.
        bias = attention_logit_bias(inputs["input_mask"],
                                    self.config.attention == "causal")
        shape = tf.shape(x)
        rows = tf.reshape(x, (-1, self.config.hidden_size))
        rows_shape = tf.shape(rows)  # once, for every layer
        layer_rows = []
        for block in self.transformer_layers:
            rows = block(rows, training=training, attention_bias=bias,
                         rows_shape=rows_shape)
            layer_rows.append(rows)
        sequence_output = tf.reshape(rows, shape)
        return {
            "sequence_output": sequence_output,
            "pooled_output": self.pooler(sequence_output[:, 0, :]),
            "encoder_outputs": [tf.reshape(r, shape) for r in layer_rows],
            "embedding_output": embedding_output,
        }

    @property
    def token_embedding(self):
        """The token embedding layer (the masked-LM head is tied to it)."""
        return self.embeddings.word_embeddings

    def checkpoint_items(self):
        """Sub-layers by name, for `tf.train.Checkpoint` (stable keys such as
        `transformer_layer_0/attention/qkv/kernel`)."""
        items = {"embeddings": self.embeddings, "pooler": self.pooler}
        for block in self.transformer_layers:
            items[block.name] = block
        return items

    @classmethod
    def from_config_object(cls, config, **kwargs):
        """Builds an encoder from an `EncoderConfig`."""
        return cls(**{**dataclasses.asdict(config), **kwargs})

    @classmethod
    def from_size(cls, name, **kwargs):
        """A randomly initialized encoder of preset `name`'s size (any
        preset, with weights or without: `bert-tf presets`).

        Examples:
            >>> BertEncoder.from_size("bert_tiny").count_params()
            4385920
        """
        return cls.from_config_object(load_preset(name), **kwargs)

    @classmethod
    def from_preset(cls, name, load_weights=True, **kwargs):
        """The encoder `name` names, with its pre-trained weights where it
        has them (as keras-hub's `from_preset`).

        Args:
            name: a preset with weights (`bert_base_uncased`,
                `electra_base_discriminator`, ...: `bert-tf presets`),
                `hf://ORG/NAME[@REVISION]`, `sample:NAME`, an `hf:PATH` /
                `tf1:PATH`, or a directory in HF's layout. A preset that is
                only a size (`bert_tiny`, `bert_base`) has no weights: it
                builds randomly initialized, as `from_size`.
            load_weights: False: the architecture only, randomly
                initialized (for a preset, `from_size`).
            **kwargs: passed to the constructor (e.g. `dtype`).

        Examples:
            >>> BertEncoder.from_preset("bert_tiny").count_params()
            4385920
        """
        if name in presets.available() and not (
                load_weights and presets.weights_source(name)):
            return cls.from_size(name, **kwargs)
        config, weights, _ = formats.read_named(name)
        encoder = cls.from_config_object(config, **kwargs)
        if load_weights:
            assign_weights(weights, encoder, source=str(name))
        return encoder

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            **dataclasses.asdict(self.config),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(
                config["dtype"])
        return cls(**config)
