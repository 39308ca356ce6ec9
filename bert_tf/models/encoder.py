"""BertEncoder: the bidirectional Transformer encoder of BERT as a functional
Keras model with TF Hub input and output names."""

import contextlib
import dataclasses

import keras
import tensorflow as tf

from bert_tf import formats, presets
from bert_tf.config import EncoderConfig, load_preset
from bert_tf.formats.canonical import assign_weights
from bert_tf.layers.embeddings import BertEmbeddings, truncated_normal
from bert_tf.layers.int8 import InputRangeRecorder, Int8Dense
from bert_tf.layers.norm import LayerNorm
from bert_tf.layers.transformer import (MultiHeadSelfAttention,
                                       TransformerBlock, attention_logit_bias)
from bert_tf.models.chunked import (ROW_CLASS_BOUNDS, row_class,
                                    rows_classed)
from bert_tf.models.inlined import (vectors_as_constants,
                                    with_constant_weights)
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
        self.row_class_bounds = ()
        self.weights_inlined = False
        self.vectors_served = False
        # False while a served task model that does not read
        # `pooled_output` calls the encoder (`without_pooler`).
        self.pooler_served = True
        self._inlined_functions = {}

    def branch_by_rows(self, bounds=ROW_CLASS_BOUNDS):
        """From now on, traced graphs run the encoder in one of
        `len(bounds) + 1` copies chosen by the number of token rows
        (batch x length) against `bounds`, so that each copy's fp32 matmul
        kernels always see one weight layout and may keep their reordered
        weights (`bert_tf.serving.runtime`). The numbers are unchanged;
        each copy keeps its own reordered weights.

        Examples:
            >>> import numpy as np
            >>> encoder = BertEncoder.from_preset("bert_tiny")
            >>> inputs = {"input_word_ids": np.array([[2, 7, 3]], "int32"),
            ...           "input_mask": np.ones((1, 3), "int32"),
            ...           "input_type_ids": np.zeros((1, 3), "int32")}
            >>> before = encoder(inputs)["pooled_output"]
            >>> encoder.branch_by_rows()
            >>> after = keras.ops.convert_to_tensor(tf.function(encoder)(
            ...     inputs)["pooled_output"])
            >>> float(np.abs(after - before).max()) < 1e-6
            True
        """
        self.row_class_bounds = tuple(int(b) for b in bounds)

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

    def to_int8(self, calibrate=None, alpha=0.75):
        """Runs the transformer blocks' matmuls on int8 weights with
        oneDNN's int8 kernels (VNNI, AMX-INT8), for export with
        `--precision int8`: embeddings, layer norms, softmax, the pooler
        and every output stay float32. The encoder can no longer train;
        build it in float32 and load its weights first.

        Args:
            calibrate: None, or a function that runs the model holding
                this encoder over real inputs; each matmul's input range
                per channel is recorded, its outlier channels smoothed
                into its weights and its range fixed
                (`Int8Dense.from_dense`).
            alpha: the smoothing's strength.

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
        recorders = {}
        if calibrate is not None:
            for block, owner, attribute in slots:
                recorder = InputRangeRecorder(getattr(owner, attribute))
                replace_sublayer(owner, attribute, recorder)
                recorders[owner, attribute] = recorder
            calibrate()
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
            int8 = Int8Dense.from_dense(dense, low, high, alpha)
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

    def inline_weights(self, enabled=True):
        """From now on (until `inline_weights(False)`), traced graphs read
        the encoder's weights as constants of the graph, taken when traced
        (`bert_tf.models.inlined`): no variable reads or hand-offs through
        the chunk loop and the row-class copies per request, oneDNN keeps
        each matmul's weights in its own layout without
        `TF_ONEDNN_ASSUME_FROZEN_WEIGHTS`, and Grappler may fuse each
        layer norm. For graphs traced and run in this process only: the
        constants do not follow later training, and TensorFlow copies them
        with each copy of a function library, so exports keep variables
        (`serving_form`; a loaded BERT-Base export held 18 GB as
        constants).

        Examples:
            >>> import numpy as np
            >>> encoder = BertEncoder.from_preset("bert_tiny")
            >>> inputs = {"input_word_ids": np.array([[2, 7, 3]], "int32"),
            ...           "input_mask": np.ones((1, 3), "int32"),
            ...           "input_type_ids": np.zeros((1, 3), "int32")}
            >>> before = encoder(inputs)["pooled_output"]
            >>> encoder.inline_weights()
            >>> served = tf.function(encoder)(inputs)["pooled_output"]
            >>> float(np.abs(served - before).max()) < 1e-6
            True
            >>> encoder.inline_weights(False)
        """
        self.weights_inlined = bool(enabled)
        self._inlined_functions = {}  # traced anew: the weights may differ
        self.serving_form(enabled)

    def serving_form(self, enabled=True):
        """From now on (until `serving_form(False)`), traced graphs take the
        served form of each layer where it differs from training's: the
        layer norms in two ops less (`bert_tf.layers.norm`), their betas
        added by the biases after them (`bert_tf.layers.folding`), the
        attention's transposes by TensorFlow's kernel
        (`bert_tf.layers.transformer.transpose_heads`). What
        every export traces; the matrices stay variables, the vectors (biases,
        gammas, betas) are read as constants but for all-zero ones
        (`bert_tf.models.inlined.vectors_as_constants`)."""
        for layer in self._flatten_layers():
            if isinstance(layer, (LayerNorm, MultiHeadSelfAttention)):
                layer.served = bool(enabled)
        self.vectors_served = bool(enabled)

    @contextlib.contextmanager
    def without_pooler(self, skip=True):
        """While open (if `skip`), graphs traced leave the pooler out:
        `pooled_output` is the unpooled `[CLS]` state. For a served model
        that does not read the pooler, whose weights would otherwise be
        handed to every row-class copy of the encoder on each request."""
        before, self.pooler_served = self.pooler_served, not skip
        try:
            yield
        finally:
            self.pooler_served = before

    def inlined_variables(self):
        """The variables traced graphs read as constants: all the
        encoder's weights while `inline_weights` is on (not dropout's seed
        states, which serving never reads)."""
        if not self.weights_inlined:
            return []
        return [v for v in self.variables if "float" in str(v.dtype)]

    def _inlined(self, name, variables, function):
        if name not in self._inlined_functions:
            self._inlined_functions[name] = with_constant_weights(
                variables, function)
        return self._inlined_functions[name]

    def call(self, inputs, training=None, mask=None, **kwargs):
        inputs = select_inputs(inputs, INPUT_NAMES)
        if self.weights_inlined and not training and \
                not tf.executing_eagerly():
            blocks = {id(v) for v in self._block_weights()}
            # The blocks' constants live in their own function, which each
            # row-class copy calls: stored once.
            return self._inlined("forward", [
                v for v in self.inlined_variables() if id(v) not in blocks],
                self._forward)(inputs)
        if self.vectors_served and not training:
            with vectors_as_constants(self.variables):
                return self._forward(inputs)
        return self._forward(inputs, training)

    def _forward(self, inputs, training=None):
        x = embedding_output = self.embeddings(
            inputs["input_word_ids"], inputs["input_type_ids"],
            training=training)
        # Computed once for all layers; the blocks run on token rows.
        bias = attention_logit_bias(inputs["input_mask"],
                                    self.config.attention == "causal")
        shape = tf.shape(x)
        rows = tf.reshape(x, (-1, self.config.hidden_size))
        layer_rows = self._blocks(rows, bias, training)
        sequence_output = tf.reshape(layer_rows[-1], shape)
        first = sequence_output[:, 0, :]
        return {
            "sequence_output": sequence_output,
            "pooled_output": self.pooler(first) if self.pooler_served or
            training else first,
            "encoder_outputs": [tf.reshape(r, shape) for r in layer_rows],
            "embedding_output": embedding_output,
        }

    def _blocks(self, rows, bias, training):
        """Each transformer block's output rows, from the embedding rows;
        in traced graphs, by row class when `branch_by_rows` asked."""
        if self.weights_inlined and not training:
            run = self._inlined("blocks", self._block_weights(),
                                self._run_blocks)
        else:
            def run(rows, bias):
                return self._run_blocks(rows, bias, training)
        if (tf.executing_eagerly() or not self.row_class_bounds
                or rows_classed()):
            return run(rows, bias)
        return tf.switch_case(
            row_class(tf.shape(rows)[0], self.row_class_bounds),
            [lambda: run(rows, bias)] * (len(self.row_class_bounds) + 1))

    def _block_weights(self):
        inlined = {id(v) for v in self.inlined_variables()}
        return [v for block in self.transformer_layers
                for v in block.variables if id(v) in inlined]

    def _run_blocks(self, rows, bias, training=None):
        outputs, rows_shape = [], tf.shape(rows)  # once, for every layer
        if self._folds_betas(training):
            return self._run_blocks_without_betas(rows, bias, rows_shape)
        for block in self.transformer_layers:
            rows = block(rows, training=training, attention_bias=bias,
                         rows_shape=rows_shape)
            outputs.append(rows)
        return outputs

    def _folds_betas(self, training):
        return (self.vectors_served and not training and not
                self.weights_inlined and not tf.executing_eagerly() and
                all(block.folds_betas() for block in self.transformer_layers))

    def _run_blocks_without_betas(self, rows, bias, rows_shape):
        """`_run_blocks` in a served graph, each norm's beta folded into
        the biases after it (`TransformerBlock.call_without_betas`): each
        layer's output gets its beta back in one add, which Grappler
        drops where nothing reads it (all but the last)."""
        outputs, missing = [], None
        for block in self.transformer_layers:
            with tf.name_scope(block.name):
                rows, missing = block.call_without_betas(rows, missing, bias,
                                                         rows_shape)
            outputs.append(rows if missing is None else rows + missing)
        return outputs

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
