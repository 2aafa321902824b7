"""Module 11 beyond the notebook's own tests: PyTorch parity, gradients, properties, bad input."""
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from definitions import dense_reference, one_hot
from gradcheck import check_gradients
from tinytorch.core.embeddings import (
    Embedding, LearnedPositionalEmbedding, PositionalEncoding, RotaryPositionalEmbedding, TokenIdError,
    TokenPositionEmbedding, as_token_ids, lesson_kernels, library_kernels, scatter_add_rows,
    sinusoidal_table, sum_rows_by_id,
)
from tinytorch.core import row_kernels as kernels
from tinytorch.core.nn import SGD
from tinytorch.core.tensor import RowSparseGrad, Tensor

FIXTURES = np.load(Path(__file__).parent / "fixtures" / "torch_embeddings.npz")


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
    with pytest.raises(ValueError, match=r"sequence length 4 .* past max_seq_length 3"):
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
    layer = TokenPositionEmbedding(12, 4, max_seq_length=8, padding_idx=0, seed=0)
    before = layer.tokens.weight.data.copy()
    ids = np.array([[3, 4, 0, 0], [4, 5, 6, 0]])
    out = layer(ids)
    (out * out).mean().backward()
    SGD(layer.parameters, lr=1.0).step()
    changed = np.flatnonzero(np.any(layer.tokens.weight.data != before, axis=1))
    assert changed.tolist() == [3, 4, 5, 6]


# ---------------------------------------------------------------- id checks (the lesson's and the row kernels') and the layer's fast paths

@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint64])
def test_validation_every_integer_dtype(dtype):
    info = np.iinfo(dtype)
    vocab = min(int(info.max), 300)
    layer = Embedding(vocab, 3, seed=0)
    ids = np.array([0, vocab - 1, 1], dtype)
    np.testing.assert_array_equal(layer(ids).data, layer.weight.data[[0, vocab - 1, 1]])
    with pytest.raises(TokenIdError, match=str(vocab)):
        layer(np.array([1, vocab], dtype))
    if info.min < 0:
        with pytest.raises(TokenIdError, match="-1"):
            layer(np.array([2, -1], dtype))


@pytest.mark.parametrize("check", [as_token_ids, kernels.as_token_ids], ids=["lesson", "row_kernels"])
@pytest.mark.parametrize("dtype", [np.int8, np.int16])
def test_validation_small_signed_dtype_with_a_larger_vocab(dtype, check):
    # viewed as unsigned, -1 is 255 (int8) or 65535 (int16): below such a vocab_size, so max() alone misses it
    vocab = int(np.iinfo(dtype).max) * 2 + 10
    with pytest.raises(TokenIdError, match="-1"):
        check(np.array([3, -1], dtype), vocab)
    assert check(np.array([3, 4], dtype), vocab).tolist() == [3, 4]
    layer = Embedding(vocab, 2, seed=0)                   # the forward checks during its lookup
    with pytest.raises(TokenIdError, match="-1"):
        layer(np.array([3, -1], dtype))


@pytest.mark.parametrize("check", [as_token_ids, kernels.as_token_ids], ids=["lesson", "row_kernels"])
def test_validation_allocates_nothing_and_forward_only_its_output(check):
    import tracemalloc
    layer = Embedding(5000, 64, seed=0)
    ids = np.random.default_rng(0).integers(0, 5000, (16, 512))
    layer(ids)                                            # warm caches
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    check(ids, 5000)
    validate_peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    out = layer(ids)
    forward_peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    output = ids.size * 64 * 4
    assert out.dtype == np.float32 and out.data.nbytes == output
    assert validate_peak < 4096, f"validation allocated {validate_peak} bytes for {ids.nbytes} bytes of ids"
    assert forward_peak < output + 16384, f"forward peak {forward_peak} bytes, output {output}"


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("pad", [None, 0, 4])
def test_backward_duplicates_heavy_ids_padding(sparse, pad):
    rng = np.random.default_rng(5)
    # id 1 appears 40 times (the "heavy" path), 4 appears 30 times, others a few times, 7 once
    ids = rng.permutation(np.r_[np.full(40, 1), np.full(30, 4), rng.integers(0, 9, 50), [7]]).reshape(11, 11)
    g = rng.normal(size=ids.shape + (6,)).astype(np.float32)
    layer = Embedding(9, 6, padding_idx=pad, seed=0, sparse=sparse)
    layer(ids).backward(g)
    grad = layer.weight.grad
    assert isinstance(grad, RowSparseGrad) == sparse
    dense = grad.to_dense() if sparse else grad
    assert dense.dtype == np.float32
    np.testing.assert_allclose(dense, dense_reference(ids, g, 9, pad), rtol=1e-5, atol=1e-5)
    if sparse:
        expected = sorted(set(ids.ravel().tolist()) - {pad})
        assert grad.indices.tolist() == expected


def test_sum_rows_adds_in_occurrence_order_bit_for_bit():
    rng = np.random.default_rng(9)
    ids = rng.integers(0, 5, 300)                      # every id is heavy (> 16 repeats)
    ids[:20] = 5 + np.arange(20) % 4                   # and some light ones with 5 repeats
    rows = rng.normal(size=(300, 3)).astype(np.float32) * 1e3
    unique, summed = sum_rows_by_id(ids, rows)
    for u, s in zip(unique, summed):
        acc = np.zeros(3, np.float32)
        for r in rows[ids == u]:
            acc = acc + r                               # float32, in the order the ids occurred
        np.testing.assert_array_equal(s, acc)


def test_empty_input_backward():
    for sparse in (False, True):
        layer = Embedding(5, 2, padding_idx=1, seed=0, sparse=sparse)
        out = layer(np.zeros((3, 0), np.int64))
        out.backward(np.zeros((3, 0, 2), np.float32))
        grad = layer.weight.grad
        dense = grad.to_dense() if sparse else grad
        assert dense.shape == (5, 2) and not dense.any()
    layer = Embedding(5, 2, padding_idx=1, seed=0, sparse=True)
    layer([1, 1]).backward(np.ones((2, 2), np.float32))   # only padding: no rows at all
    assert layer.weight.grad.indices.size == 0


def test_sparse_grads_accumulate_over_two_backward_calls():
    rng = np.random.default_rng(1)
    layer = Embedding(20, 4, padding_idx=3, seed=0, sparse=True)
    a, b = rng.integers(0, 20, (3, 7)), rng.integers(0, 20, (5,))
    ga, gb = rng.normal(size=(3, 7, 4)).astype(np.float32), rng.normal(size=(5, 4)).astype(np.float32)
    layer(a).backward(ga)
    np.testing.assert_allclose(layer.weight.grad.to_dense(), dense_reference(a, ga, 20, 3), rtol=1e-5, atol=1e-6)
    layer(b).backward(gb)
    grad = layer.weight.grad
    assert isinstance(grad, RowSparseGrad)
    expected = dense_reference(a, ga, 20, 3) + dense_reference(b, gb, 20, 3)
    np.testing.assert_allclose(grad.to_dense(), expected, rtol=1e-5, atol=1e-6)
    assert grad.indices.tolist() == sorted(set(a.ravel()) | set(b.ravel()) - {3})


def test_dense_grads_accumulate_in_place_over_two_backward_calls():
    rng = np.random.default_rng(2)
    layer = Embedding(20, 4, seed=0)
    a = rng.integers(0, 20, 30)
    g = rng.normal(size=(30, 4)).astype(np.float32)
    layer(a).backward(g)
    held = layer.weight.grad
    layer(a).backward(g)
    assert layer.weight.grad is held, "a row-sparse contribution is added into the existing array"
    np.testing.assert_allclose(held, 2 * dense_reference(a, g, 20), rtol=1e-5, atol=1e-5)


def test_tied_weight_and_dense_use_combine_exactly():
    rng = np.random.default_rng(3)
    first = Embedding(10, 3, seed=0, sparse=True)
    second = Embedding.from_pretrained(first.weight.data, freeze=False, sparse=True)
    second.weight = first.weight                         # one table used by two lookups
    a, b = rng.integers(0, 10, 8), rng.integers(0, 10, 6)
    ga, gb = rng.normal(size=(8, 3)).astype(np.float32), rng.normal(size=(6, 3)).astype(np.float32)
    (first(a) * Tensor(ga)).sum().__add__((second(b) * Tensor(gb)).sum()).backward()
    assert isinstance(first.weight.grad, RowSparseGrad)
    np.testing.assert_allclose(first.weight.grad.to_dense(), dense_reference(a, ga, 10) + dense_reference(b, gb, 10),
                               rtol=1e-5, atol=1e-6)
    # the same table also used densely: the gradients meet in the graph and become one dense array
    for dense_first in (False, True):                    # the two gradients meet in either order
        first.weight.grad = None
        lookup, dense_use = (first(a) * Tensor(ga)).sum(), (first.weight * 2.0).sum()
        (dense_use + lookup if dense_first else lookup + dense_use).backward()
        assert isinstance(first.weight.grad, np.ndarray)
        np.testing.assert_allclose(first.weight.grad, dense_reference(a, ga, 10) + 2.0, rtol=1e-5, atol=1e-6)


def test_weight_that_is_not_a_leaf_gets_a_dense_gradient():
    base = Tensor(np.random.default_rng(4).normal(size=(6, 2)), requires_grad=True)
    layer = Embedding(6, 2, seed=0, sparse=True)
    layer.weight = base * 3.0                            # an intermediate tensor, not a leaf
    ids = np.array([1, 1, 5])
    layer(ids).backward(np.ones((3, 2), np.float32))
    assert isinstance(base.grad, np.ndarray)
    np.testing.assert_allclose(base.grad, 3.0 * dense_reference(ids, np.ones((3, 2)), 6))


def test_sparse_training_builds_no_table_sized_array():
    import tracemalloc
    vocab, dim = 20_000, 256                             # a 20 MiB table
    ids = np.random.default_rng(0).integers(0, vocab, (4, 64))
    g = np.ones(ids.shape + (dim,), np.float32)
    peaks = {}
    for sparse in (False, True):
        layer = TokenPositionEmbedding(vocab, dim, max_seq_length=64, seed=0, sparse=sparse)
        opt = SGD(layer.parameters, lr=0.1)
        layer(ids).backward(g); opt.step(); opt.zero_grad()   # warm up
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        layer(ids).backward(g)
        opt.step()
        peaks[sparse] = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
    table = vocab * dim * 4
    assert peaks[True] < table / 10, f"sparse step peaked at {peaks[True] / 2**20:.1f} MiB"
    # the dense gradient itself is one table; SGD's slices add at most 4 MiB; a hidden copy would add a table
    assert peaks[False] < table + 6 * 2**20, f"dense step peaked at {peaks[False] / 2**20:.1f} MiB: a hidden table copy"


def test_inplace_positions_match_out_of_place_and_keep_gradients():
    rng = np.random.default_rng(10)
    x = rng.normal(size=(2, 5, 4)).astype(np.float32)
    pe = PositionalEncoding(4, 8)
    np.testing.assert_array_equal(pe(Tensor(x.copy()), inplace=True).data, pe(Tensor(x)).data)
    with pytest.raises(ValueError, match="leaf"):
        pe(Tensor(x, requires_grad=True), inplace=True)
    lpe = LearnedPositionalEmbedding(8, 4, seed=0)
    g = rng.normal(size=(2, 5, 4)).astype(np.float32)
    for inplace in (False, True):
        lpe.position_embedding.weight.grad = None
        w = Tensor(x.copy(), requires_grad=True)
        y = lpe(w * 1.0, inplace=inplace)
        y.backward(g)
        np.testing.assert_array_equal(w.grad, g)
        np.testing.assert_allclose(lpe.position_embedding.weight.grad[:5], g.sum(axis=0), rtol=1e-6)
        assert not lpe.position_embedding.weight.grad[5:].any()


def test_token_position_layer_adds_positions_into_the_lookup_output():
    layer = TokenPositionEmbedding(10, 4, max_seq_length=6, seed=0)
    ids = np.array([[1, 2, 3]])
    out = layer(ids)
    token_node = out._parents[0]
    assert out.data is token_node.data, "positions are added into the lookup's own array"
    np.testing.assert_allclose(out.data, layer.tokens.weight.data[ids] + sinusoidal_table(6, 4)[:3], rtol=1e-6)


# ---------------------------------------------------------------- the layer's kernels: the library's by default, the lesson's on request

def test_layers_use_the_library_kernels_by_default():
    assert Embedding(5, 2).kernels is library_kernels
    assert TokenPositionEmbedding(5, 2, max_seq_length=4).tokens.kernels is library_kernels
    assert Embedding.from_pretrained(np.ones((3, 2), np.float32)).kernels is library_kernels
    assert Embedding(5, 2, kernels=lesson_kernels).kernels is lesson_kernels
    assert "kernels=lesson_kernels" in repr(Embedding(5, 2, kernels=lesson_kernels))


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("pad", [None, 3])
def test_lesson_kernels_give_the_library_gradient(sparse, pad):
    rng = np.random.default_rng(4)
    ids = rng.integers(0, 30, (6, 40))
    g = rng.standard_normal((6, 40, 5), dtype=np.float32)
    grads = []
    for kern in (lesson_kernels, library_kernels):
        layer = Embedding(30, 5, seed=0, padding_idx=pad, sparse=sparse, kernels=kern)
        out = layer(ids)
        out.backward(g)
        out2 = layer(ids[:3])
        out2.backward(g[:3])                       # a second backward accumulates
        grad = layer.weight.grad
        grads.append(grad.to_dense() if sparse else grad)
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6, atol=1e-6)
    expected = dense_reference(ids, g, 30, pad) + dense_reference(ids[:3], g[:3], 30, pad)
    np.testing.assert_allclose(grads[0], expected, rtol=1e-5, atol=1e-5)


def test_kernels_without_the_interface_are_refused():
    class Half:
        def lookup_rows(self, table, ids):
            return table[ids]
    with pytest.raises(TypeError, match="lacks sum_rows_by_id, add_rows_at"):
        Embedding(5, 2, kernels=Half())
    with pytest.raises(TypeError, match="lacks lookup_rows"):
        Embedding.from_pretrained(np.ones((3, 2), np.float32), kernels=object())


# ---------------------------------------------------------------- positions one token at a time (start_pos)

def _position_layers():
    return {
        "sinusoidal": (PositionalEncoding(6, 10), lambda layer, x, s: layer(x, start_pos=s)),
        "learned": (LearnedPositionalEmbedding(10, 6, seed=0), lambda layer, x, s: layer(x, start_pos=s)),
        "rotary": (RotaryPositionalEmbedding(6, 10), lambda layer, x, s: layer(x, start_pos=s)),
    }


@pytest.mark.parametrize("kind", ["sinusoidal", "learned", "rotary"])
def test_token_by_token_equals_the_whole_sequence(kind):
    layer, call = _position_layers()[kind]
    x = np.random.default_rng(2).standard_normal((2, 10, 6), dtype=np.float32)
    whole = call(layer, Tensor(x.copy()), 0).data
    one_by_one = np.concatenate([call(layer, Tensor(x[:, t:t + 1].copy()), t).data for t in range(10)], axis=1)
    np.testing.assert_allclose(one_by_one, whole, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="start_pos 10 needs positions up to 10, past max_seq_length 10"):
        call(layer, Tensor(x[:, :1].copy()), 10)
    with pytest.raises(ValueError, match="start_pos must be a non-negative integer, got -1"):
        call(layer, Tensor(x[:, :1].copy()), -1)


@pytest.mark.parametrize("positions", ["sinusoidal", "learned", "none"])
def test_token_position_layer_token_by_token_equals_the_whole_sequence(positions):
    layer = TokenPositionEmbedding(20, 6, max_seq_length=8, positions=positions, seed=0)
    ids = np.random.default_rng(3).integers(0, 20, (2, 8))
    whole = layer(ids).data
    one_by_one = np.concatenate([layer(ids[:, t:t + 1], start_pos=t).data for t in range(8)], axis=1)
    np.testing.assert_allclose(one_by_one, whole, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="sequence length 2 from start_pos 7 needs positions up to 8, past max_seq_length 8"):
        layer(ids[:, :2], start_pos=7)


def test_learned_start_pos_gradient_goes_to_the_right_rows():
    lpe = LearnedPositionalEmbedding(10, 3, seed=0)
    g = np.random.default_rng(5).standard_normal((4, 2, 3), dtype=np.float32)
    lpe(Tensor(np.zeros((4, 2, 3), np.float32)), start_pos=7).backward(g)
    expected = np.zeros((10, 3), np.float32)
    expected[7:9] = g.sum(axis=0)
    np.testing.assert_allclose(lpe.position_embedding.weight.grad, expected, rtol=1e-6)


# ---------------------------------------------------------------- the module as first published: the profiler

def test_importing_the_lesson_does_not_import_the_profiler():
    import subprocess
    import sys
    code = ("import sys, tinytorch.core.embeddings as e; assert 'tinytorch.core.profiling' not in sys.modules, 'eager'; "
            "from tinytorch.core.embeddings import EmbeddingProfiler; "
            "assert 'tinytorch.core.profiling' in sys.modules and EmbeddingProfiler.__module__ == 'tinytorch.core.profiling'; "
            "print('lazy')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "lazy", out.stderr


def test_unknown_attribute_is_still_an_attribute_error():
    import tinytorch.core.embeddings as e
    with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
        e.NoSuchThing


def test_the_published_profiler_calls():
    "The profiler calls of the module as first published, with their published arguments."
    from tinytorch.core.embeddings import EmbeddingProfiler
    profiler = EmbeddingProfiler(repeats=2, warmup=1)
    embed = Embedding(vocab_size=1000, embedding_dim=128)
    performance = profiler.measure_lookup_performance(embed, [8, 16], [32, 64])
    assert len(performance) == 4
    for metrics in performance.values():
        for key in ('batch_size', 'seq_length', 'total_tokens', 'lookup_time_ms', 'tokens_per_second',
                    'memory_bandwidth_mb_s'):
            assert isinstance(metrics[key], (int, float)) and metrics[key] >= 0, (key, metrics[key])
    scaling = profiler.analyze_memory_scaling([500, 1000], [64, 128])
    assert len(scaling) == 4
    for metrics in scaling.values():
        assert metrics['total_parameters'] == metrics['vocab_size'] * metrics['embedding_dim']
        assert metrics['memory_mb'] == pytest.approx(metrics['total_parameters'] * 4 / 2**20)
    comparison = profiler.compare_positional_encodings(seq_length=50, embedding_dim=64)
    assert set(comparison) == {'sinusoidal', 'learned'}
    for metrics in comparison.values():
        assert {'computation_time_ms', 'memory_usage_mb', 'parameters'} <= set(metrics)
    assert comparison['learned']['parameters'] == 100 * 64 and comparison['sinusoidal']['parameters'] == 0
    assert profiler.compare_positional_encodings(128, 256, verbose=False)['learned']['parameters'] == 256 * 256


# ---------------------------------------------------------------- one table, two padding ids

@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("kernels", ["library", "lesson"])
def test_two_layers_with_different_padding_ids_sharing_one_table(sparse, kernels):
    kern = {"library": library_kernels, "lesson": lesson_kernels}[kernels]
    rng = np.random.default_rng(11)
    first = Embedding(10, 3, padding_idx=0, seed=0, sparse=sparse, kernels=kern)
    second = Embedding.from_pretrained(first.weight.data, freeze=False, padding_idx=1, sparse=sparse, kernels=kern)
    second.weight = first.weight                             # one table, padded by id 0 in one use and by id 1 in the other
    a, b = rng.integers(0, 10, 12), rng.integers(0, 10, 9)
    a[:3], b[:3] = [0, 1, 1], [0, 0, 1]                      # both padding ids occur in both batches
    ga, gb = rng.standard_normal((12, 3), dtype=np.float32), rng.standard_normal((9, 3), dtype=np.float32)
    ((first(a) * Tensor(ga)).sum() + (second(b) * Tensor(gb)).sum()).backward()
    grad = first.weight.grad.to_dense() if sparse else first.weight.grad
    expected = dense_reference(a, ga, 10, 0) + dense_reference(b, gb, 10, 1)
    np.testing.assert_allclose(grad, expected, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- the layer's backward, M_k, the tests' messages

@pytest.mark.parametrize("pad", [None, 0, 4])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_embedding_grad_is_the_one_hot_product_without_the_padding_id(pad, dtype):
    from tinytorch.core.embeddings import embedding_grad
    rng = np.random.default_rng(7)
    ids = rng.integers(0, 6, (3, 5))
    d_out = rng.standard_normal((3, 5, 4)).astype(dtype)
    keep = ids.reshape(-1) != pad
    expected = np.eye(6)[ids.reshape(-1)[keep]].T @ d_out.reshape(-1, 4)[keep]
    got = embedding_grad(ids, d_out, 6, pad)
    assert got.dtype == dtype and got.shape == (6, 4)
    np.testing.assert_allclose(got, expected, atol=1e-5)
    if pad is not None:
        assert not got[pad].any()


def test_the_layer_on_lesson_kernels_takes_its_dense_gradient_from_embedding_grad(monkeypatch):
    import tinytorch.core.embeddings as E
    calls = []
    real = E.embedding_grad
    monkeypatch.setattr(E, "embedding_grad", lambda *a: calls.append(a[3]) or real(*a))
    layer = Embedding(5, 2, seed=0, padding_idx=1, kernels=lesson_kernels)
    layer(np.array([[1, 3, 3]])).backward(np.ones((1, 3, 2), np.float32))
    assert calls == [1] and layer.weight.grad[:, 0].tolist() == [0, 0, 0, 2, 0]


def test_shift_matrices_are_rotations_that_compose():
    from tinytorch.core.embeddings import shift_matrix
    table = sinusoidal_table(400, 32).astype(np.float64)
    for a, b in ((1, 2), (7, 30), (100, 250)):
        Ma, Mb = shift_matrix(a, 32), shift_matrix(b, 32)
        np.testing.assert_allclose(Ma @ Mb, shift_matrix(a + b, 32), atol=1e-12)
        np.testing.assert_allclose(Ma @ Ma.T, np.eye(32), atol=1e-12)
        assert np.abs(table[:400 - a] @ Ma.T - table[a:]).max() < 1e-6       # the float32 table, up to its rounding
    np.testing.assert_allclose(shift_matrix(-5, 32), shift_matrix(5, 32).T, atol=1e-12)


def test_first_difference_shows_float32_values_as_float32():
    from tinytorch.core.embeddings import _first_difference
    got = _first_difference(np.float32([[-0.5659, 1.0]]), np.array([[-0.5659, 2.0]]))
    assert got == "first wrong row at [0]: expected [-0.5659, 2.0], got [-0.5659, 1.0]", got
    got = _first_difference(np.float32([0.1234567]), np.float64([0.1234]), 'value')
    assert got == "first wrong value at [0]: expected 0.1234, got 0.1235", got
    got = _first_difference(np.float32([0.12341]), np.float64([0.1234]), "value")
    assert got == "first wrong value at [0]: expected 0.1234, got 0.12341", got     # more decimals only when needed
    assert "0000" not in _first_difference(np.float32([1 / 3]), np.array([0.25]), 'value')
