import math

import numpy as np
import pytest

from gradcheck import check_gradients
from tinytorch.core.nn import SGD, Adam, Linear
from tinytorch.core.tensor import Tensor


def test_linear_gradients_match_finite_differences():
    layer = Linear(4, 3, seed=1)
    w, b = layer.weight.data.astype(np.float64), layer.bias.data.astype(np.float64) + 0.1
    x = np.random.default_rng(0).normal(size=(2, 5, 4))
    check_gradients(lambda x_, w_, b_: x_ @ w_ + b_, x, w, b)


def test_linear_is_float32_and_seeded():
    a, b = Linear(5, 2, seed=3), Linear(5, 2, seed=3)
    np.testing.assert_array_equal(a.weight.data, b.weight.data)
    assert a.weight.dtype == np.float32 and a(np.ones((1, 5))).dtype == np.float32


@pytest.mark.parametrize("args, err", [((0, 2), ValueError), ((2, -1), ValueError), ((2.5, 2), TypeError)])
def test_linear_rejects_bad_sizes(args, err):
    with pytest.raises(err, match=str(args[0]) if err is TypeError else "must be a positive integer"):
        Linear(*args)


def test_linear_rejects_wrong_input_width():
    with pytest.raises(ValueError, match=r"expected last dimension 3.*\(2, 4\)"):
        Linear(3, 1)(np.ones((2, 4)))


def test_sgd_step_is_exact():
    p = Tensor([1.0, -1.0], requires_grad=True)
    p.grad = np.array([0.5, 0.25], np.float32)
    SGD([p], lr=0.1).step()
    np.testing.assert_allclose(p.data, [0.95, -1.025], rtol=1e-7)
    assert p.dtype == np.float32


def test_adam_first_step_moves_by_lr():
    p = Tensor([1.0, -1.0], requires_grad=True)
    p.grad = np.array([3.0, -0.001], np.float32)
    Adam([p], lr=0.01).step()
    # bias-corrected first Adam step is lr * sign(g) (up to eps)
    np.testing.assert_allclose(p.data, [0.99, -0.99], rtol=1e-4)


def test_optimizer_skips_params_without_grad():
    p = Tensor([1.0], requires_grad=True)
    SGD([p], lr=1.0).step()
    assert p.data[0] == 1.0


@pytest.mark.parametrize("make, pattern", [
    (lambda p: SGD([p], lr=0), "lr"),
    (lambda p: SGD([p], lr=float("nan")), "lr"),
    (lambda p: SGD([p], momentum=1.0), "momentum"),
    (lambda p: Adam([p], betas=(0.9, 1.0)), "betas"),
    (lambda p: SGD([p, p]), "twice"),
    (lambda p: SGD([]), "empty"),
    (lambda p: SGD([Tensor([1.0])]), "requires_grad"),
])
def test_optimizer_rejects_bad_arguments(make, pattern):
    with pytest.raises((ValueError, TypeError), match=pattern):
        make(Tensor([1.0], requires_grad=True))


# ---------------------------------------------------------------- sliced dense updates, row-sparse updates

from tinytorch.core.nn import row_blocks  # noqa: E402
from tinytorch.core.tensor import RowSparseGrad  # noqa: E402


def test_sliced_dense_updates_equal_whole_array_formulas():
    rng = np.random.default_rng(0)
    shape = (2500, 1000)                                    # 10 MB: three slices
    assert len(row_blocks(np.empty(shape, np.float32))) == 3
    p0 = rng.normal(size=shape).astype(np.float32)
    g1, g2 = (rng.normal(size=shape).astype(np.float32) for _ in range(2))
    p = Tensor(p0.copy(), requires_grad=True)
    opt = SGD([p], lr=0.1, momentum=0.5)
    v = np.zeros_like(p0)
    expected = p0.copy()
    for g in (g1, g2):
        p.grad = g
        opt.step()
        v = v * np.float32(0.5) + g
        expected -= np.asarray(0.1 * v, np.float32)
    np.testing.assert_array_equal(p.data, expected)
    q = Tensor(p0.copy(), requires_grad=True)
    adam = Adam([q], lr=0.01)
    m, s = np.zeros_like(p0), np.zeros_like(p0)
    expected = p0.copy()
    for t, g in enumerate((g1, g2), start=1):
        q.grad = g
        adam.step()
        m *= 0.9; m += (1 - 0.9) * g
        s *= 0.999; s += (1 - 0.999) * g * g
        step = 0.01 * math.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
        expected -= (step * m / (np.sqrt(s) + 1e-8)).astype(np.float32)
    np.testing.assert_array_equal(q.data, expected)


def _row_sparse(rng, ids, shape):
    "A RowSparseGrad of `shape` with random float32 rows at `ids` (duplicates allowed)."
    return RowSparseGrad(shape, ids, rng.normal(size=(len(ids),) + shape[1:]).astype(np.float32))


@pytest.mark.parametrize("momentum", [0.0, 0.8])
def test_sgd_row_sparse_step_equals_dense_step(momentum):
    rng = np.random.default_rng(1)
    p0 = rng.normal(size=(8, 3)).astype(np.float32)
    dense, sparse = Tensor(p0.copy(), requires_grad=True), Tensor(p0.copy(), requires_grad=True)
    opts = SGD([dense], lr=0.2, momentum=momentum), SGD([sparse], lr=0.2, momentum=momentum)
    # duplicates, and rows left untouched for a step or two while momentum keeps moving them
    for ids in ([1, 1, 6], [2], [6, 0, 0, 0], [7, 7]):
        grad = RowSparseGrad((8, 3), ids, rng.normal(size=(len(ids), 3)).astype(np.float32))
        dense.grad, sparse.grad = grad.to_dense(), grad
        for o in opts:
            o.step()
        np.testing.assert_array_equal(dense.data, sparse.data)


def test_lazy_adam_leaves_untouched_rows_and_their_moments_alone():
    p = Tensor(np.ones((5, 2)), requires_grad=True)
    opt = Adam([p], lr=0.1)
    p.grad = RowSparseGrad((5, 2), [3, 3], np.array([[1, -1], [1, -1]], np.float32))
    opt.step()
    np.testing.assert_allclose(p.data[3], [0.9, 1.1], rtol=1e-6)          # first step moves by lr·sign(g)
    assert np.all(p.data[[0, 1, 2, 4]] == 1)
    p.grad = RowSparseGrad((5, 2), [0], np.array([[2, 2]], np.float32))
    opt.step()
    np.testing.assert_allclose(p.data[3], [0.9, 1.1], rtol=1e-6, err_msg="row 3 was not touched: lazy Adam leaves it")
    assert opt.state[0]['t'] == 2 and opt.state[0]['m'][3].tolist() == pytest.approx([0.2, -0.2])


def test_lazy_adam_first_step_equals_dense_adam():
    rng = np.random.default_rng(8)
    grad = _row_sparse(rng, [3, 0, 3, 9], (10, 2))          # duplicate ids are summed
    p0 = rng.normal(size=(10, 2)).astype(np.float32)
    dense, sparse = Tensor(p0.copy(), requires_grad=True), Tensor(p0.copy(), requires_grad=True)
    dense.grad, sparse.grad = grad.to_dense(), grad
    Adam([dense], lr=0.05).step()
    Adam([sparse], lr=0.05).step()
    np.testing.assert_array_equal(dense.data, sparse.data)


def test_lazy_adam_differs_from_dense_adam_only_on_untouched_rows():
    rng = np.random.default_rng(7)
    p0 = rng.normal(size=(12, 3)).astype(np.float32)
    dense, sparse = Tensor(p0.copy(), requires_grad=True), Tensor(p0.copy(), requires_grad=True)
    opt_d, opt_s = Adam([dense], lr=0.1), Adam([sparse], lr=0.1)
    for ids in ([1, 2, 2], [2, 5]):
        grad = _row_sparse(rng, ids, (12, 3))
        before = sparse.data.copy()
        dense.grad, sparse.grad = grad.to_dense(), grad
        opt_d.step(); opt_s.step()
        moved = np.flatnonzero(np.any(sparse.data != before, axis=1))
        assert moved.tolist() == sorted(set(ids)), moved
    assert opt_s.state[0]['t'] == 2 and np.all(opt_s.state[0]['m'][[0, 3, 4, 6]] == 0), "untouched rows keep zero moments"
    # at step 2 dense Adam keeps moving row 1 on its momentum; lazy Adam leaves it where step 1 put it
    assert not np.array_equal(dense.data[1], sparse.data[1])
