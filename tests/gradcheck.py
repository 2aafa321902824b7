"""Central finite differences for tinytorch tensors, on float64 copies."""
import numpy as np

from tinytorch.core.tensor import Tensor


def numerical_grad(f, arrays, index, eps=1e-6):
    "d sum(f(*arrays) * seed) / d arrays[index], by central differences (arrays are float64)."
    x = arrays[index]
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + eps
        plus = f(*arrays)
        x[i] = old - eps
        minus = f(*arrays)
        x[i] = old
        grad[i] = (plus - minus) / (2 * eps)
    return grad


def check_gradients(op, *inputs, seed=0, rtol=1e-5, atol=1e-7):
    """Compare autograd with finite differences for `op(*tensors) -> Tensor`.

    The output is contracted with a fixed random array so every output element matters.
    Returns the largest absolute difference seen.
    """
    arrays = [np.array(x, dtype=np.float64) for x in inputs]
    out_shape = op(*[Tensor(a, dtype=np.float64) for a in arrays]).shape
    weights = np.random.default_rng(seed).normal(size=out_shape)

    def scalar(*arrs):
        return float((op(*[Tensor(a, dtype=np.float64) for a in arrs]).data * weights).sum())

    tensors = [Tensor(a.copy(), requires_grad=True, dtype=np.float64) for a in arrays]
    op(*tensors).backward(weights)
    worst = 0.0
    for k, t in enumerate(tensors):
        expected = numerical_grad(scalar, arrays, k)
        assert t.grad is not None, f"input {k} got no gradient"
        assert t.grad.shape == t.shape, f"input {k}: grad shape {t.grad.shape} != {t.shape}"
        np.testing.assert_allclose(t.grad, expected, rtol=rtol, atol=atol,
                                   err_msg=f"gradient of input {k} differs from finite differences")
        worst = max(worst, float(np.abs(t.grad - expected).max()))
    return worst
