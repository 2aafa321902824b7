import math

import numpy as np
import pytest

from gradcheck import check_gradients
from tinytorch.core.tensor import Tensor, cross_entropy, no_grad

rng = np.random.default_rng(42)
A = rng.normal(size=(3, 4))
B = rng.normal(size=(3, 4))
ROW = rng.normal(size=(4,))
COL = rng.normal(size=(3, 1))
POS = rng.uniform(0.5, 2.0, size=(3, 4))


@pytest.mark.parametrize("name, op, inputs", [
    ("add", lambda a, b: a + b, (A, B)),
    ("add broadcast row", lambda a, b: a + b, (A, ROW)),
    ("add broadcast col", lambda a, b: b + a, (A, COL)),
    ("add scalar", lambda a: 2.5 + a, (A,)),
    ("sub", lambda a, b: a - b, (A, B)),
    ("sub broadcast", lambda a, b: b - a, (A, ROW)),
    ("rsub scalar", lambda a: 1.0 - a, (A,)),
    ("mul", lambda a, b: a * b, (A, B)),
    ("mul broadcast", lambda a, b: a * b, (A, COL)),
    ("div", lambda a, b: a / b, (A, POS)),
    ("div broadcast", lambda a, b: a / b, (A, POS[0])),
    ("rdiv scalar", lambda b: 3.0 / b, (POS,)),
    ("neg", lambda a: -a, (A,)),
    ("matmul", lambda a, b: a @ b, (A, B.T.copy())),
    ("matmul vec", lambda a, v: a @ v, (A, ROW)),
    ("vec matmul", lambda v, b: v @ b, (ROW, B.T.copy())),
    ("batched matmul broadcast", lambda a, b: a @ b, (rng.normal(size=(2, 3, 4)), rng.normal(size=(4, 5)))),
    ("sum all", lambda a: a.sum(), (A,)),
    ("sum axis", lambda a: a.sum(axis=0), (A,)),
    ("sum keepdims", lambda a: a.sum(axis=1, keepdims=True), (A,)),
    ("sum negative axis", lambda a: a.sum(axis=-1), (A,)),
    ("mean all", lambda a: a.mean(), (A,)),
    ("mean axes", lambda a: a.mean(axis=(0, 2)), (rng.normal(size=(2, 3, 4)),)),
    ("reshape", lambda a: a.reshape(2, 6) * 2, (A,)),
    ("transpose", lambda a: a.transpose(), (A,)),
    ("transpose axes", lambda a: a.transpose(1, 2, 0), (rng.normal(size=(2, 3, 4)),)),
    ("exp", lambda a: a.exp(), (A,)),
    ("log", lambda a: a.log(), (POS,)),
    ("used twice", lambda a: a * a + a, (A,)),
    ("chain", lambda a, b: ((a * b).exp() / (1 + (a * b).exp())).mean(axis=0), (A, B)),
    ("cross_entropy", lambda z: cross_entropy(z, np.array([0, 3, 1])), (A,)),
    ("cross_entropy ignore", lambda z: cross_entropy(z, np.array([0, -100, 1]), ignore_index=-100), (A,)),
    ("cross_entropy 3d", lambda z: cross_entropy(z, np.array([[0, 1, 2], [3, 3, 0]])), (rng.normal(size=(2, 3, 4)),)),
])
def test_gradients_match_finite_differences(name, op, inputs):
    check_gradients(op, *inputs)


def test_gradient_accumulates_across_backward_calls():
    x = Tensor([1.0, 2.0], requires_grad=True)
    (x * 3).sum().backward()
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad, [6.0, 6.0])
    x.zero_grad()
    assert x.grad is None


def test_diamond_graph_sums_both_paths():
    x = Tensor([2.0], requires_grad=True)
    y = x * x          # used by two consumers
    z = y + y * 3
    z.backward()
    assert z.item() == 16.0
    np.testing.assert_allclose(x.grad, [16.0])   # d(4x²)/dx = 8x


def test_deep_chain_does_not_hit_recursion_limit():
    x = Tensor([1.0], requires_grad=True)
    y = x
    for _ in range(5000):
        y = y + 0.0
    y.backward()
    np.testing.assert_array_equal(x.grad, [1.0])


def test_float32_default_and_int_ids():
    assert Tensor(1.5).dtype == np.float32
    assert Tensor(np.zeros(2, np.float64)).dtype == np.float32
    assert Tensor([1, 2, 3]).dtype.kind == "i"
    x = Tensor(np.ones((2, 2)), requires_grad=True)
    y = (x * 0.5 + 1.0) / 3.0 - x.exp().log()
    assert y.dtype == np.float32
    y.sum().backward()
    assert x.grad.dtype == np.float32


def test_explicit_float64_is_kept():
    x = Tensor([1.0], dtype=np.float64, requires_grad=True)
    y = x * 2.0 + 1
    assert y.dtype == np.float64


def test_no_grad_builds_no_graph():
    x = Tensor([1.0], requires_grad=True)
    with no_grad():
        y = x * 2
    assert not y.requires_grad
    with pytest.raises(RuntimeError, match="does not require grad"):
        y.backward()


def test_backward_needs_scalar_or_grad():
    x = Tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"\(2,\)"):
        (x * 2).backward()
    with pytest.raises(ValueError, match=r"\(3,\).*\(2,\)"):
        (x * 2).backward(np.ones(3))


def test_matmul_shape_mismatch_names_both_shapes():
    with pytest.raises(ValueError, match=r"\(2, 3\) @ \(4, 5\)"):
        Tensor(np.ones((2, 3))) @ Tensor(np.ones((4, 5)))


def test_requires_grad_on_integers_is_refused():
    with pytest.raises(TypeError, match="int"):
        Tensor([1, 2], requires_grad=True)


def test_string_data_is_refused():
    with pytest.raises(TypeError, match="numeric"):
        Tensor(["a"])


def test_cross_entropy_matches_numpy():
    z = rng.normal(size=(5, 7)).astype(np.float32)
    t = np.array([0, 6, 3, 3, 1])
    expected = np.mean(np.log(np.exp(z).sum(1)) - z[np.arange(5), t])
    got = cross_entropy(Tensor(z), t).item()
    assert math.isclose(got, expected, rel_tol=1e-6), (got, expected)


def test_cross_entropy_is_stable_for_huge_logits():
    z = Tensor(np.array([[1e4, -1e4, 0.0], [-1e4, 1e4, 1e4]], np.float32), requires_grad=True)
    loss = cross_entropy(z, [0, 0])
    assert math.isclose(loss.item(), (0 + 2e4 + math.log(2)) / 2, rel_tol=1e-6), loss.item()
    loss.backward()
    assert np.all(np.isfinite(z.grad))
    np.testing.assert_allclose(z.grad[1], [-0.5, 0.25, 0.25], atol=1e-7)


def test_cross_entropy_ignore_index_excludes_tokens():
    z = rng.normal(size=(4, 3))
    full = cross_entropy(Tensor(z[:2]), [1, 2]).item()
    masked = cross_entropy(Tensor(z), [1, 2, -1, -1], ignore_index=-1)
    assert math.isclose(masked.item(), full, rel_tol=1e-6), (masked.item(), full)


@pytest.mark.parametrize("targets, err, pattern", [
    ([0, 5], ValueError, "target 5"),
    ([0, -2], ValueError, "target -2"),
    ([0.0, 1.0], TypeError, "integers"),
    ([0, 1, 2], ValueError, r"\(3,\)"),
])
def test_cross_entropy_bad_targets(targets, err, pattern):
    with pytest.raises(err, match=pattern):
        cross_entropy(Tensor(np.zeros((2, 3))), np.array(targets))


def test_cross_entropy_all_ignored_is_an_error():
    with pytest.raises(ValueError, match="ignore_index"):
        cross_entropy(Tensor(np.zeros((2, 3))), [0, 0], ignore_index=0)


def test_axis_out_of_range():
    with pytest.raises(ValueError, match="axis 3"):
        Tensor(np.zeros((2, 2))).sum(axis=3)


# ---------------------------------------------------------------- row-sparse gradients

from tinytorch.core.tensor import RowSparseGrad, accumulate_grad  # noqa: E402


def _sparse(ids, rows, keep=True, shape=(6, 2)):
    return RowSparseGrad(shape, np.asarray(ids), np.asarray(rows, np.float32), keep_sparse=keep)


def test_row_sparse_grad_coalesces_duplicates_and_concatenates():
    g = _sparse([4, 1, 4, 4], [[1, 1], [2, 2], [3, 3], [4, 4]])
    assert g.indices.tolist() == [1, 4] and g.values.tolist() == [[2, 2], [8, 8]]
    total = g + _sparse([0, 4], [[5, 5], [1, 0]])
    assert total.indices.tolist() == [0, 1, 4] and total.values.tolist() == [[5, 5], [2, 2], [9, 8]]
    assert g.indices.tolist() == [1, 4], "adding must not change either operand"
    dense = total.to_dense()
    assert dense.shape == (6, 2) and dense.dtype == np.float32 and dense[[2, 3, 5]].sum() == 0
    with pytest.raises(ValueError, match=r"\(6, 2\).*\(5, 2\)"):
        g + _sparse([0], [[1, 1]], shape=(5, 2))
    with pytest.raises(ValueError, match="rows of shape"):
        RowSparseGrad((6, 2), [1, 2], np.ones((3, 2)))
    with pytest.raises(TypeError, match="integers"):
        RowSparseGrad((6, 2), [1.0], np.ones((1, 2)))


def test_leaf_accumulation_rules():
    leaf = Tensor(np.zeros((6, 2)), requires_grad=True)
    accumulate_grad(leaf, _sparse([1, 1], [[1, 2], [3, 4]]))
    assert isinstance(leaf.grad, RowSparseGrad)                       # None + sparse(keep) -> sparse
    accumulate_grad(leaf, _sparse([2], [[1, 1]]))
    assert isinstance(leaf.grad, RowSparseGrad) and leaf.grad.indices.tolist() == [1, 2]
    accumulate_grad(leaf, np.ones((6, 2), np.float32))                    # sparse + dense -> dense
    assert isinstance(leaf.grad, np.ndarray) and leaf.grad[1].tolist() == [5, 7] and leaf.grad[0].tolist() == [1, 1]
    held = leaf.grad
    accumulate_grad(leaf, _sparse([0, 0], [[1, 1], [1, 1]]))              # dense + sparse -> in place
    assert leaf.grad is held and held[0].tolist() == [3, 3]
    fresh = Tensor(np.zeros((6, 2)), requires_grad=True)
    accumulate_grad(fresh, _sparse([5], [[2, 2]], keep=False))           # None + sparse(dense wanted) -> dense
    assert isinstance(fresh.grad, np.ndarray) and fresh.grad[5].tolist() == [2, 2] and fresh.grad.sum() == 4


def test_dense_accumulation_never_aliases_the_incoming_gradient():
    x = Tensor([1.0, 2.0], requires_grad=True)
    seed = np.ones(2, np.float32)
    (x + 1.0).backward(seed)             # addition passes the very same array down to x
    seed[0] = 100.0
    assert x.grad.tolist() == [1.0, 1.0]
    y = Tensor([1.0, 2.0], requires_grad=True)
    y.backward(seed)                     # a leaf's own backward
    seed[1] = -5.0
    assert y.grad.tolist() == [100.0, 1.0]


def test_constants_get_no_gradient_work():
    calls = []
    a = Tensor([1.0, 2.0], requires_grad=True)
    const = Tensor([3.0, 4.0])
    for op in (lambda: a * const, lambda: const * a, lambda: a / const, lambda: a + const, lambda: const - a):
        out = op()
        grads = out._grad_fn(np.ones(2, np.float32))
        calls.append([g is None for g in grads])
    assert calls == [[False, True], [True, False], [False, True], [False, True], [True, False]]


# ---------------------------------------------------------------- row-sparse gradients with a padding id (skip)

def _definition(shape, *parts):
    "float64 sum of every (ids, rows, skip) part, each leaving out its own `skip`: what the gradient means."
    out = np.zeros(shape)
    for ids, rows, skip in parts:
        for i, r in zip(ids, rows):
            if i != skip:
                out[i] += r
    return out


def _parts(rng, shape, skips):
    return [(rng.integers(0, shape[0], 12), rng.standard_normal((12,) + shape[1:], dtype=np.float32), s) for s in skips]


@pytest.mark.parametrize("kernels", ["simple", "library"])
def test_row_sparse_skip_leaves_the_padding_id_out_of_every_form(kernels):
    from tinytorch.core import row_kernels
    extra = {} if kernels == "simple" else dict(sum_rows=row_kernels.sum_rows_by_id, add_rows=row_kernels.add_rows_at)
    rng = np.random.default_rng(0)
    ids, rows = np.array([0, 3, 0, 1, 3, 0]), rng.standard_normal((6, 2), dtype=np.float32)
    expected = _definition((5, 2), (ids, rows, 0))
    make = lambda: RowSparseGrad((5, 2), ids, rows, skip=0, **extra)   # noqa: E731
    assert make().to_dense().tolist() == expected.astype(np.float32).tolist()
    assert np.array_equal(make().to_dense()[0].view(np.uint32), np.zeros(2, np.uint32)), "padding row: exactly +0.0"
    base = np.full((5, 2), 7.0, np.float32)
    make().add_to(base)
    assert base[0].tolist() == [7.0, 7.0], "adding into an existing array must leave the padding row untouched"
    np.testing.assert_allclose(base - 7.0, expected, rtol=1e-6, atol=1e-6)
    g = make()
    assert g.indices.tolist() == [1, 3]
    np.testing.assert_allclose(g.values, expected[[1, 3]], rtol=1e-6)
    assert "skip=0" in repr(make()) and "skip" not in repr(RowSparseGrad((5, 2), ids, rows))


def test_row_sparse_skip_reaches_the_kernels_only_when_given():
    seen = []

    def add_rows(dense, ids, rows, fresh=False, **kw):      # a kernel that records what it is asked
        seen.append((rows, kw))
        if fresh:
            dense.fill(0)
        keep = ids != kw.get("skip", -1)
        np.add.at(dense, ids[keep], rows[keep])
        return dense

    ids, rows = np.array([2, 0, 2]), np.ones((3, 2), np.float32)
    assert RowSparseGrad((4, 2), ids, rows, add_rows=add_rows, skip=2).to_dense().sum() == 2
    assert RowSparseGrad((4, 2), ids, rows, add_rows=add_rows).to_dense().sum() == 6
    assert [kw for _, kw in seen] == [{"skip": 2}, {}], seen
    assert seen[0][0] is rows, "the rows must reach the kernel as given (no masked copy)"


@pytest.mark.parametrize("skips", [(0, 1), (0, None), (None, 2), (1, 1), (None, None), (0, 1, 0)])
def test_sum_of_row_sparse_gradients_with_different_padding_ids(skips):
    # two layers with different padding ids sharing one table: each part leaves out only its own id
    rng = np.random.default_rng(len(skips))
    parts = _parts(rng, (4, 3), skips)
    for p in parts:
        p[0][:3] = [0, 1, 2]                               # every padding id occurs in every part
    total = RowSparseGrad((4, 3), *parts[0][:2], skip=parts[0][2])
    for ids, rows, skip in parts[1:]:
        total = total + RowSparseGrad((4, 3), ids, rows, skip=skip)
    expected = _definition((4, 3), *parts)
    np.testing.assert_allclose(total.to_dense(), expected, rtol=1e-5, atol=1e-6)
    base = np.zeros((4, 3), np.float32)
    np.testing.assert_allclose(total.add_to(base), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(total.values, expected[total.indices], rtol=1e-5, atol=1e-6)
    assert set(total.indices.tolist()) == {i for ids, _, s in parts for i in ids.tolist() if i != s}


@pytest.mark.parametrize("skip, err, pattern", [(5, ValueError, r"skip 5 is outside \[0, 5\)"),
                                                (-1, ValueError, r"skip -1 is outside"),
                                                (1.0, TypeError, "skip must be a row id.*1.0"),
                                                (True, TypeError, "got True"), ("0", TypeError, "'0'")])
def test_row_sparse_skip_must_be_a_row_id(skip, err, pattern):
    with pytest.raises(err, match=pattern):
        RowSparseGrad((5, 2), [1], np.ones((1, 2), np.float32), skip=skip)
    assert RowSparseGrad((5, 2), [1], np.ones((1, 2), np.float32), skip=np.int64(4)).to_dense()[1].tolist() == [1, 1]
