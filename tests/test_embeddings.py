"""Module 11 beyond the notebook's own tests: PyTorch parity, gradients, properties, bad input."""
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from gradcheck import check_gradients
from tinytorch.core.embeddings import (
    Embedding, LearnedPositionalEmbedding, PositionalEncoding, TokenIdError, TokenPositionEmbedding,
    as_token_ids, scatter_add_rows, sinusoidal_table, sum_rows_by_id,
)
from tinytorch.core.tensor import Tensor

FIXTURES = np.load(Path(__file__).parent / "fixtures" / "torch_embeddings.npz")


def one_hot(ids, vocab):
    return np.eye(vocab, dtype=np.float64)[np.asarray(ids).reshape(-1)]


# ---------------------------------------------------------------- parity with PyTorch (fixtures)

def _fixture_layer():
    return Embedding.from_pretrained(FIXTURES["weight"], freeze=False, padding_idx=int(FIXTURES["padding_idx"]))


def test_forward_matches_torch():
    out = _fixture_layer()(FIXTURES["ids"])
    np.testing.assert_allclose(out.data, FIXTURES["forward"], rtol=1e-6, atol=0)


def test_backward_matches_torch_with_duplicates_and_padding():
    layer = _fixture_layer()
    layer(FIXTURES["ids"]).backward(FIXTURES["grad_out"])
    np.testing.assert_allclose(layer.weight.grad, FIXTURES["grad_weight"], rtol=1e-6, atol=1e-7)
    assert np.all(layer.weight.grad[int(FIXTURES["padding_idx"])] == 0)


@pytest.mark.parametrize("key, shape", [("sinusoidal_50x16", (50, 16)), ("sinusoidal_40x7", (40, 7))])
def test_sinusoidal_table_matches_torch_recipe(key, shape):
    np.testing.assert_allclose(sinusoidal_table(*shape), FIXTURES[key], rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------- numerical gradients

def test_embedding_gradient_matches_finite_differences():
    ids = np.array([[0, 3, 3], [1, 0, 4]])
    table = np.random.default_rng(0).normal(size=(5, 3))

    def op(w):
        layer = Embedding.from_pretrained(np.ones((5, 3)), freeze=False, padding_idx=None)
        layer.weight = w                       # differentiate with respect to the given tensor
        return layer(ids)
    check_gradients(op, table)


def test_padding_row_gets_zero_gradient_even_numerically_nonzero():
    layer = Embedding(5, 2, padding_idx=3, seed=0)
    layer([3, 3, 1]).backward(np.ones((3, 2), np.float32))
    assert layer.weight.grad[3].tolist() == [0.0, 0.0] and layer.weight.grad[1].tolist() == [1.0, 1.0]


@pytest.mark.parametrize("make", [
    lambda: PositionalEncoding(4, 10),
    lambda: LearnedPositionalEmbedding(10, 4, seed=0),
])
def test_positional_layers_pass_gradients_to_input(make):
    layer = make()
    check_gradients(lambda x: layer(x), np.random.default_rng(1).normal(size=(2, 6, 4)))


def test_learned_positions_gradient_matches_finite_differences():
    lpe = LearnedPositionalEmbedding(8, 3, seed=0)
    x = np.random.default_rng(2).normal(size=(2, 5, 3))

    def op(w, x_):
        lpe.position_embedding.weight = w
        return lpe(x_)
    check_gradients(op, lpe.position_embedding.weight.data, x)


@pytest.mark.parametrize("positions", ["sinusoidal", "learned", "none"])
def test_token_position_layer_gradient(positions):
    layer = TokenPositionEmbedding(7, 4, max_seq_length=6, positions=positions, scale_embeddings=True, seed=0)
    ids = np.array([[1, 2, 2], [6, 0, 1]])

    def op(w):
        layer.tokens.weight = w
        return layer(ids)
    check_gradients(op, layer.tokens.weight.data)


# ---------------------------------------------------------------- properties

id_arrays = st.integers(2, 40).flatmap(lambda vocab: st.tuples(
    st.just(vocab),
    hnp.arrays(np.int64, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5),
               elements=st.integers(0, vocab - 1))))


@settings(max_examples=60, deadline=None)
@given(id_arrays, st.integers(1, 6))
def test_forward_shape_dtype_and_one_hot_identity(vocab_ids, dim):
    vocab, ids = vocab_ids
    layer = Embedding(vocab, dim, seed=0)
    out = layer(ids)
    assert out.shape == ids.shape + (dim,) and out.dtype == np.float32
    expected = one_hot(ids, vocab) @ layer.weight.data.astype(np.float64)
    np.testing.assert_allclose(out.data.reshape(-1, dim), expected, rtol=1e-6, atol=1e-7)


@settings(max_examples=60, deadline=None)
@given(id_arrays, st.integers(1, 5), st.data())
def test_backward_is_one_hot_transpose(vocab_ids, dim, data):
    vocab, ids = vocab_ids
    pad = data.draw(st.none() | st.integers(0, vocab - 1))
    layer = Embedding(vocab, dim, padding_idx=pad, seed=1)
    g = data.draw(hnp.arrays(np.float32, ids.shape + (dim,), elements=st.floats(-4, 4, width=32)))
    layer(ids).backward(g)
    expected = one_hot(ids, vocab).T @ g.reshape(-1, dim).astype(np.float64)
    if pad is not None:
        expected[pad] = 0
    np.testing.assert_allclose(layer.weight.grad, expected, rtol=1e-5, atol=1e-5)


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.int64, st.integers(0, 50), elements=st.integers(0, 9)))
def test_sum_rows_by_id_groups_exactly(ids):
    rows = np.arange(ids.size * 2, dtype=np.float32).reshape(-1, 2)
    unique, summed = sum_rows_by_id(ids, rows)
    assert unique.tolist() == sorted(set(ids.tolist()))
    for u, s in zip(unique, summed):
        assert s.tolist() == rows[ids == u].sum(axis=0).tolist()
    assert np.array_equal(scatter_add_rows(ids, rows, 10)[unique], summed)


# ---------------------------------------------------------------- bad input leaves state unchanged

def _snapshot(layer):
    return [(p.data.copy(), None if p.grad is None else p.grad.copy()) for p in layer.parameters]


def _assert_unchanged(layer, snap):
    for p, (data, grad) in zip(layer.parameters, snap):
        assert np.array_equal(p.data, data)
        assert (p.grad is None and grad is None) or np.array_equal(p.grad, grad)


@pytest.mark.parametrize("bad, err, pattern", [
    ([0, 10], TokenIdError, r"token id 10 .*\[0, 10\)"),
    ([[1], [-1]], TokenIdError, r"token id -1"),
    (np.array([2.7]), TypeError, "float64"),
    (np.array([2.0]), TypeError, "float64"),
    (np.array([True]), TypeError, "bool"),
    (np.array([1 + 0j]), TypeError, "complex"),
    (np.array([1, None], dtype=object), TypeError, "object"),
    ("abc", TypeError, "abc"),
    (np.array(["1"]), TypeError, "<U1"),
    (Tensor(np.array([1.0])), TypeError, "float32"),
])
def test_embedding_bad_ids(bad, err, pattern):
    layer = Embedding(10, 3, padding_idx=0, seed=0)
    layer([1, 2]).backward(np.ones((2, 3), np.float32))
    snap = _snapshot(layer)
    with pytest.raises(err, match=pattern):
        layer(bad)
    _assert_unchanged(layer, snap)


def test_token_id_error_is_both_value_and_index_error():
    with pytest.raises(ValueError):
        as_token_ids([5], 5)
    with pytest.raises(IndexError):
        as_token_ids([-5], 5)


@pytest.mark.parametrize("kwargs, err, pattern", [
    (dict(vocab_size=0, embedding_dim=4), ValueError, "vocab_size"),
    (dict(vocab_size=10, embedding_dim=-1), ValueError, "embedding_dim"),
    (dict(vocab_size=10.0, embedding_dim=4), TypeError, "10.0"),
    (dict(vocab_size=10, embedding_dim=4, padding_idx=10), ValueError, r"padding_idx 10 .*\[-10, 10\)"),
    (dict(vocab_size=10, embedding_dim=4, padding_idx=-11), ValueError, "-11"),
    (dict(vocab_size=10, embedding_dim=4, padding_idx=1.0), TypeError, "1.0"),
    (dict(vocab_size=10, embedding_dim=4, init_type="kaiming"), ValueError, r"kaiming.*|.*uniform.*normal.*xavier"),
])
def test_embedding_bad_constructor_arguments(kwargs, err, pattern):
    with pytest.raises(err, match=pattern):
        Embedding(**kwargs)


def test_negative_padding_idx_counts_from_the_end():
    layer = Embedding(10, 2, padding_idx=-2, seed=0)
    assert layer.padding_idx == 8 and np.all(layer.weight.data[8] == 0)


@pytest.mark.parametrize("weights, err", [(np.ones(4), ValueError), (np.ones((2, 2, 2)), ValueError),
                                          (np.ones((3, 2), np.int64), TypeError), (np.ones((0, 2)), ValueError)])
def test_from_pretrained_bad_shapes(weights, err):
    with pytest.raises(err, match="shape|dtype|vocab_size"):
        Embedding.from_pretrained(weights)


def test_from_pretrained_copies_and_freezes():
    w = np.arange(6, dtype=np.float64).reshape(3, 2)
    layer = Embedding.from_pretrained(w)
    assert layer.weight.dtype == np.float32 and not layer.weight.requires_grad
    w[0, 0] = 99
    assert layer.weight.data[0, 0] == 0
    assert "frozen" in repr(layer)


@pytest.mark.parametrize("layer", [PositionalEncoding(4, 6), LearnedPositionalEmbedding(6, 4, seed=0)],
                         ids=["sinusoidal", "learned"])
@pytest.mark.parametrize("shape, pattern", [((7, 4), r"7 .*6"), ((2, 3, 5), r"4.*5"), ((4,), r"\(4,\)"),
                                            ((1, 2, 3, 4), r"\(1, 2, 3, 4\)")])
def test_positional_layers_refuse_bad_shapes(layer, shape, pattern):
    snap = [p.copy() for p in ([layer.pe.data] if hasattr(layer, "pe") else [layer.parameters[0].data])]
    with pytest.raises(ValueError, match=pattern):
        layer(Tensor(np.zeros(shape)))
    now = [layer.pe.data] if hasattr(layer, "pe") else [layer.parameters[0].data]
    assert all(np.array_equal(a, b) for a, b in zip(snap, now))


@pytest.mark.parametrize("kwargs", [dict(embedding_dim=0), dict(embedding_dim=4, max_seq_length=0),
                                    dict(embedding_dim=4, dropout=1.0), dict(embedding_dim=4, dropout=-0.1)])
def test_positional_encoding_bad_arguments(kwargs):
    with pytest.raises((ValueError, TypeError)):
        PositionalEncoding(**kwargs)


def test_token_position_refuses_long_sequences_before_lookup():
    layer = TokenPositionEmbedding(5, 2, max_seq_length=3, positions="learned", seed=0)
    with pytest.raises(ValueError, match=r"4 exceeds .*3"):
        layer([[0, 1, 2, 3]])
    with pytest.raises(ValueError, match="positions must be one of"):
        TokenPositionEmbedding(5, 2, positions="rotary")


# ---------------------------------------------------------------- behaviour

def test_dropout_trains_and_evaluates():
    pe = PositionalEncoding(8, 16, dropout=0.5, seed=0)
    x = Tensor(np.ones((4, 16, 8)))
    y = pe(x).data
    zeros = np.mean(y == 0)
    assert 0.4 < zeros < 0.6, zeros
    kept = y[y != 0]
    np.testing.assert_allclose(kept, (1 + np.broadcast_to(pe.pe.data[:16], (4, 16, 8)))[y != 0] * 2, rtol=1e-6)
    pe.eval()
    np.testing.assert_allclose(pe(x).data, np.broadcast_to(1 + pe.pe.data[:16], (4, 16, 8)), rtol=1e-6)


def test_embedding_init_is_seeded_and_float32():
    a, b = Embedding(20, 5, seed=3), Embedding(20, 5, seed=3)
    assert np.array_equal(a.weight.data, b.weight.data) and a.weight.dtype == np.float32
    assert not np.array_equal(a.weight.data, Embedding(20, 5, seed=4).weight.data)


def test_memory_usage_follows_dtype():
    layer = Embedding.from_pretrained(np.ones((1000, 64), np.float32))
    stats = layer.get_memory_usage()
    assert stats["total_memory_mb"] == 1000 * 64 * 4 / 2**20 and stats["memory_per_token_kb"] == 64 * 4 / 1024
    assert stats["bytes_per_parameter"] == 4 and stats["dtype"] == "float32"


def test_sinusoidal_is_accurate_far_out():
    table = sinusoidal_table(5000, 64)
    freqs = 10000.0 ** (-np.arange(0, 64, 2) / 64)
    np.testing.assert_allclose(table[4321, 0::2], np.sin(4321 * freqs), atol=1e-7)
    assert table.dtype == np.float32


def test_training_moves_only_used_rows():
    from tinytorch.core.nn import SGD
    layer = TokenPositionEmbedding(12, 4, max_seq_length=8, padding_idx=0, seed=0)
    before = layer.tokens.weight.data.copy()
    ids = np.array([[3, 4, 0, 0], [4, 5, 6, 0]])
    out = layer(ids)
    (out * out).mean().backward()
    SGD(layer.parameters, lr=1.0).step()
    changed = np.flatnonzero(np.any(layer.tokens.weight.data != before, axis=1))
    assert changed.tolist() == [3, 4, 5, 6]
