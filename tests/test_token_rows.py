"""The served attention's packed rows (`bert_tf.layers.token_rows`): any
batch's masks, packed two sequences to a row, give the attention the
padded layout gives, and the pairing is the most that fit."""

import numpy as np
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from bert_tf.layers.token_rows import (PackedRows, TokenRows, most_pairs,
                                       rounded_rows)
from bert_tf.layers.transformer import MultiHeadSelfAttention
from bert_tf.models.chunked import row_class

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True)
# A batch's masks: each row's kept positions, padding at the end, holes
# (a mask a caller of an encoder export may send) or nothing at all.
MASKS = st.integers(1, 8).flatmap(lambda length: st.lists(
    st.lists(st.booleans(), min_size=length, max_size=length) |
    st.integers(0, length).map(lambda n: [True] * n +
                               [False] * (length - n)),
    min_size=1, max_size=9))


def _greedy_pairs(lengths, capacity):
    """The two-pointer count of pairs (longest with shortest, if it fits)."""
    lengths, pairs, low, high = sorted(lengths), 0, 0, len(lengths) - 1
    while low < high:
        if lengths[low] + lengths[high] <= capacity:
            pairs, low = pairs + 1, low + 1
        high -= 1
    return pairs


@SETTINGS
@given(st.lists(st.integers(1, 64), min_size=1, max_size=40),
       st.integers(0, 64))
def test_most_pairs_is_the_greedy_count(lengths, extra):
    capacity = max(lengths) + extra
    got = most_pairs(tf.constant(sorted(lengths)), capacity)
    assert int(got) == _greedy_pairs(lengths, capacity)


@SETTINGS
@given(masks=MASKS, causal=st.booleans())
def test_packed_attention_equals_the_padded_one(masks, causal):
    """Each kept token's attention output is the same whether the batch's
    sequences sit in rows of their own or packed; fewer rows or as many."""
    mask = np.array(masks, "int32")
    batch, length = mask.shape
    attention = MultiHeadSelfAttention(8, 2, dropout=0.0, causal=causal)
    attention.build((None, None, 8))
    token_rows = TokenRows(mask, causal)
    x = token_rows.compact(tf.random.stateless_normal(
        (batch * length, 8), seed=(batch, length)))

    def attend(layout):
        return attention.context(x, attention_bias=layout.attention_bias(),
                                 rows_shape=tf.shape(x), token_rows=layout,
                                 float32_softmax=True)

    packed = PackedRows(token_rows)
    # A masked token's output means nothing (as any encoder's).
    kept = token_rows.kept.numpy()
    real = mask.reshape(-1)[kept] != 0
    np.testing.assert_allclose(attend(packed).numpy()[:len(kept)][real],
                               attend(token_rows).numpy()[:len(kept)][real],
                               atol=1e-5)
    kept = TokenRows.kept_tokens(mask).numpy().sum(axis=1)
    rows, _, queries, keys = packed.attention_bias().shape
    # One text is not packed: its bias is the padded layout's.
    assert (queries, keys) == ((kept.max(),) * 2 if batch > 1 else
                               (length if causal else 1, length))
    assert rows == batch - _greedy_pairs(kept, kept.max())


@SETTINGS
@given(masks=MASKS, heads=st.integers(1, 3))
def test_heads_gathers_are_the_rows_gathers_and_transposes(masks, heads):
    """`to_heads` is `to_attention` reshaped to heads and transposed;
    `from_heads` undoes that transpose, then `from_attention`: in either
    layout."""
    token_rows = TokenRows(np.array(masks, "int32"))
    size = 2
    kept = int(tf.size(token_rows.row_source))
    rows = tf.random.stateless_normal((kept, 3 * heads * size), (kept, 1))
    for layout in (token_rows, PackedRows(token_rows)):
        length = int(tf.shape(layout.attention_bias())[-1])
        padded = tf.reshape(layout.to_attention(rows),
                            (-1, length, 3, heads, size))
        expected = tf.transpose(padded, (2, 0, 3, 1, 4))
        got = layout.to_heads(rows, heads, size)
        for part in range(3):
            np.testing.assert_array_equal(got[part], expected[part])
        context = got[2] * 2.0
        back = layout.from_attention(tf.reshape(tf.transpose(
            context, (0, 2, 1, 3)), (-1, heads * size)))
        np.testing.assert_array_equal(
            tf.reshape(layout.from_heads(context), (-1, heads * size)), back)


def test_a_batch_of_sentences_packs_into_fewer_rows():
    """32 lengths like RT sentences' (mean 28, longest 55): 20 rows."""
    lengths = np.random.default_rng(0).integers(8, 47, 32)
    lengths[0] = 55
    mask = np.arange(55)[None, :] < lengths[:, None]
    packed = PackedRows(TokenRows(mask.astype("int32")))
    assert packed.attention_bias().shape == (20, 1, 55, 55)


@SETTINGS
@given(st.integers(1, 1 << 20))
def test_rounded_rows_waste_little_and_keep_their_fp32_class(count):
    rows = int(rounded_rows(count))
    assert count <= rows <= count * 1.0625
    assert rows == count if count < 64 else rows % 4 == 0
    assert int(row_class(tf.constant(rows))) == int(
        row_class(tf.constant(count)))


def test_rounded_rows_come_back_as_they_were():
    """135 kept tokens run as 136 rows (a copy of the first appended);
    padded and first rows read the real ones only."""
    mask = (np.arange(20)[None, :] < [[20], [20], [20], [20], [20], [20],
                                      [15]]).astype("int32")
    token_rows = TokenRows(mask)
    x = tf.reshape(tf.range(140.0), (140, 1))
    compact = token_rows.compact(x)
    assert compact.shape == (136, 1)
    assert compact[-1, 0] == 0.0
    padded = token_rows.padded(compact)[:, 0].numpy()
    np.testing.assert_array_equal(padded[:135], np.arange(135.0))
    assert set(padded[135:]) == {134.0}
    np.testing.assert_array_equal(token_rows.first(compact)[:, 0],
                                  np.arange(0.0, 140.0, 20.0))
    packed = PackedRows(token_rows)
    attended = packed.from_attention(packed.to_attention(compact))
    assert attended.shape == (136, 1)
    np.testing.assert_array_equal(attended[:135, 0], np.arange(135.0))
