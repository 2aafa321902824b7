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
