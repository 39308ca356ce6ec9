"""The served form of a model: what every export traces, built in one place.

Training, evaluation and Python inference call the Keras models. An export
wraps its model in a `ServedModel`, and its graphs call that instead. The
numbers are the same (to float32 rounding); the graph is smaller:

- the vectors (biases, layer-norm gammas and betas) are constants of the
  graph, named as the variables, but for all-zero ones; the matrices stay
  variables (exports keep their weights as variables:
  `docs/guides/serving.md`, "Weights as constants");
- each layer norm takes the served form of `bert_tf.layers.norm`;
- each norm's beta is folded into the biases of the dense layers it feeds
  (`bert_tf.layers.folding`), the embeddings' norm's too: a float layer
  reads the folded bias, an int8 one takes the beta as an argument (it
  was converted with it, `BertEncoder.to_int8`);
- the attention takes its heads from the rows, and its output back, in
  one gather each way (`bert_tf.layers.token_rows`: no transposes), and
  takes its softmax
  in the logits' dtype: bf16 in bf16 exports and in int8 ones whose
  query/key/value come out in bf16 (`BertEncoder.to_int8`);
- an int8 block adds its two residuals inside the output matmuls' kernels
  (`SplitMatmuls`; BERT-Base, 32 RT sentences, with the attention in bf16:
  102.9 -> 113.7 sentences/s on 2 AMX cores);
- the blocks' matmuls and norms take the real tokens' rows only, padded
  back where the attention needs the batch's shape
  (`bert_tf.layers.transformer.TokenRows`): a batch padded to its longest
  text multiplies no padding (BERT-Base, 32 RT sentences: 22 -> 37
  sentences/s in fp32, 55 -> 85 in bf16, 77 -> 112 in int8, on 2 AMX
  cores; a text alone gains nothing, and its 26 row copies cost about
  0.6 ms). Outputs at padded positions copy a real token's row;
- the attention runs on packed rows (`bert_tf.layers.token_rows.PackedRows`):
  a batch's sequences two to a row where both fit in the longest one's
  length, each masked from the other; one text is not packed;
- each block matmul of an encoder at least 384 wide (MiniLM-L6 and up)
  (`bert_tf.precision.Precision.matmul_parts_for`) runs as two matmuls,
  which TensorFlow's inter-op threads run side by side: oneDNN's kernels
  hardly use a second core at a text's few rows, so exports serve fastest
  with one thread within an op (docs/benchmarks.md). The query/key/value
  matmul runs on each half of the heads' columns, and each half's
  attention on its own; the attention's output layer takes the two
  halves' context rows on its kernel's row halves and adds the products.
  The feed-forward runs so too: the intermediate layer on its kernel's
  column halves, the output layer on its row halves. So a block's two
  threads meet only at its two residual adds (`SplitMatmuls`: a float
  kernel's halves are variables of their own, an int8 layer's constants;
  BERT-Base on 2 EPYC cores, one thread within an op, batch 1: no
  concatenation between the feed-forward's layers, bf16 11.9 -> 10.5 ms;
  the attention in head halves, fp32 32.7 -> 30.3 ms, int8 15.3 -> 14.4;
  docs/benchmarks.md);
- the pooler runs only for a head that reads it;
- for a head that reads `[CLS]` alone (`reads_first_token_only`), the
  last block computes the first token's output only: its keys and values
  for every token, its query, attention output, feed-forward and norms
  for `[CLS]` (`sequence_output` is then [batch, 1, H]); not in fp32's
  graph copies per row class, whose matmuls must each see one class
  (BERT-Base, 32 RT sentences: bf16 83.1 -> 97.7 sentences/s, int8
  108.8 -> 125.9, on 2 AMX cores; docs/benchmarks.md).

The graph copy per row class (fp32 exports) is `map_in_chunks`'s, asked by
`row_classes` (`bert_tf.models.chunked`). Each copy, the loop over long
requests and each signature call one function per served encoder and input
shape, traced once; TensorFlow inlines it at every call, so each copy still
has nodes (and oneDNN weight layouts) of its own. A tiny classifier's export
took 6.2 s when each call traced the encoder again (8 traces), 2.9 s now.
"""

import contextlib
import warnings

import keras
import numpy as np
import tensorflow as tf

from bert_tf.layers.copies import RowCopies, first_copy
from bert_tf.layers.folding import beta_of, biases_with, takes_folded_beta
from bert_tf.layers.norm import served_layer_norm
from bert_tf.layers.token_rows import PackedRows, TokenRows
from bert_tf.models.encoder import INPUT_NAMES, select_inputs
from bert_tf.models import split_matmuls

_MOVED = {"SplitMatmuls", "block_matmuls"}


def __getattr__(name):
    # The names that moved to `bert_tf.models.split_matmuls` on 2026-12-07.
    if name in _MOVED:
        warnings.warn(f"bert_tf.models.served.{name} is now bert_tf.models."
                      f"split_matmuls.{name}.", DeprecationWarning,
                      stacklevel=2)
        return getattr(split_matmuls, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@contextlib.contextmanager
def vectors_as_constants(variables):
    """Within it, traced layers read the float weights of rank 0 or 1
    among `variables` (biases, layer-norm gammas and betas) as constants
    of the graph being traced, named by the variables' paths; the others
    stay variables. Yields {id(variable): NumPy value} of those vectors.

    A variable costs a request a handle, a read and a hand-off into each
    function and branch around it (five nodes in an fp32 export), a
    constant one node; vectors are small enough to copy with each branch
    and function library.

    Examples:
        >>> dense = keras.layers.Dense(2, name="head")
        >>> dense.build((None, 3))
        >>> _ = dense.bias.assign([0.5, -0.5])
        >>> @tf.function
        ... def served(x):
        ...     with vectors_as_constants(dense.variables):
        ...         return dense(x)
        >>> x = tf.ones((1, 3))
        >>> graph = served.get_concrete_function(x).graph
        >>> sorted(n.name for n in graph.as_graph_def().node
        ...        if n.op == "Const" and "bias" in n.name)
        ['head/bias']
        >>> bool(tf.reduce_all(served(x) == dense(x)))
        True
    """
    variables = [v for v in variables if len(v.shape) <= 1 and
                 "float" in str(v.dtype)]
    with tf.init_scope():  # their values, read eagerly
        values = {id(v): v.numpy() for v in variables}
    # An all-zero bias as a constant is folded away by Grappler, and its
    # matmul then loses the fusion with bias and GELU that oneDNN runs (a
    # random BERT-Base's batch-1 p50 rose from 48 to 56 ms): such vectors
    # stay variables.
    kept = [v for v in variables if values[id(v)].any()]
    # At the graph's top scope, so that they are named as the variables
    # (`bert_tf.serving.weights.graph_constants` finds them by path).
    with tf.compat.v1.get_default_graph().name_scope(""):
        constants = [tf.constant(values[id(v)], name=v.path) for v in kept]
    with keras.StatelessScope(state_mapping=list(zip(kept, constants))):
        yield values


class ServedEncoder:
    """A `BertEncoder` as exports trace it (see the module docstring):
    called like the encoder, it returns the same outputs.

    Args:
        encoder: the `BertEncoder`, in float32 or bf16, or with int8
            matmuls (`BertEncoder.to_int8`).
        pooler: False: `pooled_output` is the `[CLS]` state unpooled, for
            a model whose head does not read it.
        first_token_only: True: the last layer's output at each
            sequence's first token alone (`sequence_output` and the last
            of `encoder_outputs` [batch, 1, H]), for a model whose head
            reads nothing else.
        matmuls: the `SplitMatmuls` its blocks' matmuls run by (None:
            each as one matmul).

    Examples:
        >>> import numpy as np
        >>> from bert_tf.models.encoder import BertEncoder
        >>> encoder = BertEncoder.from_preset("bert_tiny")
        >>> inputs = {"input_word_ids": np.array([[2, 7, 3]], "int32"),
        ...           "input_mask": np.ones((1, 3), "int32"),
        ...           "input_type_ids": np.zeros((1, 3), "int32")}
        >>> served = tf.function(ServedEncoder(encoder))(inputs)
        >>> float(np.abs(served["pooled_output"] -
        ...             encoder(inputs)["pooled_output"]).max()) < 1e-5
        True
    """

    def __init__(self, encoder, pooler=True, first_token_only=False,
                 matmuls=None):
        self.encoder = encoder
        self.pooler = pooler
        self.first_token_only = first_token_only
        self.matmuls = matmuls or split_matmuls.SplitMatmuls(encoder)
        self.config = encoder.config
        # One trace per input shape for every copy and signature that
        # calls it, inlined at each call (the module docstring).
        self._traced = tf.function(self._constants_and_forward,
                                   autograph=False)

    def __call__(self, inputs, training=False):
        if training:
            raise ValueError("A served encoder does not train: call the "
                             "BertEncoder itself.")
        inputs = select_inputs(inputs, INPUT_NAMES)
        if tf.executing_eagerly():  # nothing to share: run the ops
            return self._constants_and_forward(inputs)
        return self._traced(inputs)

    def _constants_and_forward(self, inputs):
        with vectors_as_constants(self.encoder.variables) as values:
            return self._forward(inputs, values)

    def _forward(self, inputs, values):
        encoder = self.encoder
        norm = encoder.embeddings.layer_norm
        fold = self._folds()
        # Not through a projection after the norm (factorized embeddings).
        fold_embeddings = fold and encoder.embeddings.projection is None \
            and all(takes_folded_beta(block.attention.qkv, True)
                    for block in encoder.transformer_layers[:1])
        x = encoder.embeddings(
            inputs["input_word_ids"], inputs["input_type_ids"],
            norm=lambda x: served_layer_norm(norm, x,
                                             add_beta=not fold_embeddings))
        missing = beta_of(norm, values) if fold_embeddings else None
        # Its beta back only where an output reads it (Grappler drops the
        # add elsewhere).
        embedding_output = x if missing is None else x + missing
        shape = tf.shape(x)
        rows = tf.reshape(x, (-1, self.config.hidden_size))
        # The blocks multiply the kept tokens' rows only (TokenRows); their
        # attention runs on packed rows. Computed once for all layers.
        token_rows = TokenRows(inputs["input_mask"],
                               self.config.attention == "causal")
        layer_rows = self._blocks(token_rows.compact(rows), values,
                                  token_rows, fold, missing)
        layers = [tf.reshape(token_rows.padded(r), shape)
                  for r in layer_rows[:-1]]
        if self.first_token_only:  # [batch, H]
            first = layer_rows[-1]
            layers.append(tf.expand_dims(first, 1))
        else:
            layers.append(tf.reshape(token_rows.padded(layer_rows[-1]),
                                     shape))
            first = layers[-1][:, 0, :]
        return {
            "sequence_output": layers[-1],
            "pooled_output": encoder.pooler(first) if self.pooler else first,
            "encoder_outputs": layers,
            "embedding_output": embedding_output,
        }

    def _folds(self):
        """Whether each block norm's beta is added by the matmuls after it
        (`bert_tf.layers.folding`): by those that read the norm (the
        intermediate layer, the next block's query/key/value) and those
        whose output is added to it (the two output layers). The first
        block's query/key/value reads the embeddings' norm, folded or not
        (`fold_embeddings` in `_forward`)."""
        return all(
            takes_folded_beta(block.attention.qkv, reads_norm=index > 0)
            and takes_folded_beta(block.attention.output_dense, False)
            and takes_folded_beta(block.intermediate, True)
            and takes_folded_beta(block.output_dense, False)
            for index, block in enumerate(self.encoder.transformer_layers))

    def _blocks(self, rows, values, token_rows, fold, missing):
        """Each block's output rows, from `rows` that lack `missing` (a
        beta, or None). With `fold`, each norm's beta is added by the
        matmuls after it (`served_block`): each layer's output gets its
        beta back in one add, which Grappler drops where nothing reads it
        (all but the last)."""
        blocks = self.encoder.transformer_layers
        packed = PackedRows(token_rows)
        outputs, rows_shape = [], tf.shape(rows)
        for index, block in enumerate(blocks):
            first = self.first_token_only and index == len(blocks) - 1
            with tf.name_scope(block.name):
                # [CLS]'s query alone: the padded layout, nothing to pack.
                rows, missing = served_block(
                    block, rows, missing, token_rows if first else packed,
                    rows_shape, values, fold, token_rows,
                    first_token_only=first, matmuls=self.matmuls)
            out = first_copy(rows)
            outputs.append(out if missing is None else out + missing)
        return outputs


def served_block(block, rows, missing, layout, rows_shape, values, fold,
                 token_rows=None, first_token_only=False, matmuls=None):
    """A `TransformerBlock` on the kept rows of `token_rows` that lack
    `missing` (the beta of the norm before, float32 [H], or None), served:
    returns (its output rows, less the output norm's beta when `fold`, that
    beta or None). `layout`: the attention's layout, `token_rows` or a
    `PackedRows` (its bias too). `values`: the NumPy values of the vectors
    ({id(variable): value}). `first_token_only`: the output rows are each
    sequence's first token's alone, [batch, H] (`layout` is then
    `token_rows`). `matmuls`: a `SplitMatmuls` (None: unsplit). `rows`,
    and the output rows, may be `RowCopies` (the first is the block's
    output: `bert_tf.layers.copies`)."""
    matmuls = matmuls or split_matmuls.SplitMatmuls(None)
    attention = block.attention
    first = first_copy(rows)
    if first_token_only:  # keys and values of all rows; the rest of [CLS]
        residual = token_rows.first(first)
        rows_shape = tf.shape(residual)
    else:
        residual = first
    with biases_with(missing, values, fed=[attention.qkv],
                     residual=[attention.output_dense]):
        with tf.name_scope(attention.name):
            # The query/key/value matmul reads `rows` (each head group its
            # own copy); the attention takes its shapes from the first.
            rows = matmuls(attention.output_dense, attention.context(
                first, attention_bias=layout.attention_bias(),
                rows_shape=rows_shape, token_rows=layout,
                first_query=first_token_only, float32_softmax=False,
                qkv=lambda _, x=rows: matmuls.query_key_value(
                    attention, x, shifted=missing is not None)),
                residual, copies=matmuls.copies, residual_lacks=missing)
    rows = _normed(block.attention_norm, rows, fold)
    missing = beta_of(block.attention_norm, values) if fold else None
    with biases_with(missing, values, fed=[block.intermediate],
                     residual=[block.output_dense]):
        rows = matmuls(block.output_dense, matmuls(
            block.intermediate, rows, output_parts=True,
            shifted=missing is not None), first_copy(rows),
            copies=matmuls.copies, residual_lacks=missing)
    rows = _normed(block.output_norm, rows, fold)
    return rows, beta_of(block.output_norm, values) if fold else None


def _normed(norm, rows, fold):
    """The served `norm` of `rows`, of each copy if `RowCopies`
    (`bert_tf.layers.copies`); without its beta if `fold`."""
    if isinstance(rows, RowCopies):
        return RowCopies(served_layer_norm(norm, copy, add_beta=not fold)
                         for copy in rows)
    return served_layer_norm(norm, rows, add_beta=not fold)


class ServedModel:
    """A task model, pre-trainer or encoder as exports trace it: calls
    give what the model's own calls give, with the encoder served
    (`ServedEncoder`) and the head's vectors as constants. Any other
    attribute is the model's (its config, `variables`, `is_windowed`...).

    Args:
        model: the Keras model; it answers `call_with(encode, inputs)`
            (what `model(inputs)` computes, with `encode` as its encoder),
            or is a `BertEncoder`.
        row_classes: the row-class bounds `map_in_chunks` copies the
            graph by (fp32 exports; `bert_tf.models.chunked`), or ().
        matmul_parts: the column slices of each block matmul
            (`SplitMatmuls`; exports: 2).
    """

    def __init__(self, model, row_classes=(), matmul_parts=1):
        self.model = model
        self.row_classes = tuple(int(b) for b in row_classes)
        encoder = getattr(model, "encoder", model)
        self.matmuls = split_matmuls.SplitMatmuls(encoder, matmul_parts)
        self.encoder = ServedEncoder(encoder, matmuls=self.matmuls)
        # Not in fp32's copies per row class: there the last layer's
        # matmuls would take as many rows as texts, in any class.
        self._encode = ServedEncoder(
            encoder, pooler=getattr(model, "reads_pooled_output", True),
            first_token_only=getattr(model, "reads_first_token_only", False)
            and not self.row_classes, matmuls=self.matmuls)
        encoder_ids = {id(v) for v in encoder.variables}
        self._head_variables = [v for v in model.variables
                                if id(v) not in encoder_ids]

    @property
    def variables(self):
        """The model's variables, each split kernel replaced by its slices
        (`SplitMatmuls`): what its export holds."""
        return [part for v in self.model.variables
                for part in self.matmuls.kernels.get(id(v), [v])]

    def __call__(self, inputs, training=False):
        if self.model is self.encoder.encoder:
            return self.encoder(inputs)
        return self.run("call_with", inputs)

    def run(self, method, inputs):
        """`model.<method>(encode, inputs)` with the served encoder and the
        head's vectors as constants."""
        with vectors_as_constants(self._head_variables):
            return getattr(self.model, method)(self._encode, inputs)

    def window_outputs(self, inputs, training=False):
        """A windowed classifier's `window_outputs`, served."""
        return self.run("window_outputs_with", inputs)

    def embed(self, inputs, training=False):
        """A similarity model's `embed`, served."""
        return self.run("embed_with", inputs)

    def __getattr__(self, name):
        # Reached only for names not set in __init__; before it has set
        # `model` (copy, pickle), looking it up here would recurse.
        if name == "model" or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.model, name)

