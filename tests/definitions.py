"""The plain definitions the embedding's fast paths are tested against."""
import numpy as np


def one_hot(ids, vocab):
    "(n, vocab) float64 rows, one per id: the lookup is `one_hot(ids) @ W`."
    return np.eye(vocab, dtype=np.float64)[np.asarray(ids).reshape(-1)]


def dense_reference(ids, g, vocab, pad=None):
    "One-hot(ids)ᵀ @ g in float64, padding row zeroed: the definition of the table's gradient."
    dim = g.shape[-1]
    ref = one_hot(ids, vocab).T @ np.asarray(g, np.float64).reshape(-1, dim)
    if pad is not None:
        ref[pad] = 0
    return ref
