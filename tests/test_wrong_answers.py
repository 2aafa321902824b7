"""Typical wrong attempts at module 11's exercises, each put into the student release with every other
part solved: the visible tests must take the points of the right part, with a message that says what
was expected and what came back.

One release is built; each wrong attempt is then exported the way `tinytorch grade` exports a
submission (its `#| export` cells, in one file) and judged the way `tinytorch grade` judges it
(`tinytorch.course.checking.judge`): the release's test cells run in a judge process against that file, imported in another. One
attempt also goes through the real `tinytorch test 11` command, which runs the whole notebook in a kernel (handed in
without the lesson's demonstration cells, which earn no points).

`--nbs-dir DIR` takes the lesson from DIR instead of nbs/ (to check another version of its tests).
"""
import json
import subprocess
import textwrap
import sys
from pathlib import Path

import pytest
from requirements import require

require("nbgrader")

from course_scenarios import demo_cells, edit, replace, solve, without_demos  # noqa: E402
from tinytorch.course.authoring.assignments import graded_parts, release  # noqa: E402
from tinytorch.course.checking.judge import judge_submission  # noqa: E402
from tinytorch.course.grading.recheck_run import exported_source, judged_verdicts  # noqa: E402
from tinytorch.course.checking.recheck import recheck_program  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CLI = Path(sys.executable).parent / "tinytorch"

# name: (solution cell, code in the solution, the wrong code, the part that must lose its points,
#        words its message must contain, other parts allowed to fail because they use the broken code)
DELEGATED = ["called the library's", "withheld while this exercise is graded"]

MISTAKES = {
    # handing the work to the library's kernels: the kernels are withheld while the exercise's test runs
    "as_token_ids delegates to the library": (
        "as-ids", "    if isinstance(ids, Tensor):\n        ids = ids.data\n    if isinstance(ids, (bytes, str)):",
        "    return library_kernels.as_token_ids(ids, vocab_size)\n    if isinstance(ids, (bytes, str)):",
        "test_as_token_ids", ["your as_token_ids called the library's as_token_ids", *DELEGATED], set()),
    "lookup_rows delegates to the library": (
        "lookup", "    vocab_size = table.shape[0]\n", "    return library_kernels.lookup_rows(table, ids)\n",
        "test_lookup_rows", ["your lookup_rows called the library's lookup_rows", *DELEGATED], set()),
    "lookup_rows delegates through a fresh import of the gather": (
        "lookup", "    return np.take(table, ids, axis=0)",
        "    from tinytorch.core.row_kernels import gather_rows\n"
        "    return gather_rows(table, ids, np.empty(ids.shape + table.shape[1:], table.dtype), checked=True)",
        "test_lookup_rows", ["your lookup_rows called the library's gather_rows", *DELEGATED], set()),
    "scatter_add_rows delegates to the library": (
        "scatter", "    flat_ids = np.ravel(ids)\n", "    return library_kernels.scatter_add_rows(np.ravel(ids), rows, num_rows)\n",
        "test_scatter_add_rows", ["your scatter_add_rows called the library's scatter_add_rows", *DELEGATED], set()),
    "scatter_add_rows delegates to add_rows_at": (
        "scatter", "    np.add.at(dense, flat_ids, rows)", "    library_kernels.add_rows_at(dense, flat_ids, rows)",
        "test_scatter_add_rows", ["your scatter_add_rows called the library's add_rows_at", *DELEGATED], set()),
    "sum_rows_by_id delegates to the library": (
        "scatter", "    unique_ids, slot = np.unique(np.ravel(ids), return_inverse=True)\n",
        "    return library_kernels.sum_rows_by_id(ids, rows)\n",
        "test_sum_rows_by_id", ["your sum_rows_by_id called the library's sum_rows_by_id", *DELEGATED], set()),
    # module 01's plain versions (the Tensor's own row-sparse gradient) are the library's too
    "sum_rows_by_id delegates to module 01's coalescing": (
        "scatter", "    unique_ids, slot = np.unique(np.ravel(ids), return_inverse=True)\n",
        "    from tinytorch.core import tensor\n    return tensor._sum_rows_sorted(np.ravel(ids), rows)\n",
        "test_sum_rows_by_id", ["your sum_rows_by_id called the library's", *DELEGATED], set()),
    "scatter_add_rows delegates to module 01's add": (
        "scatter", "    flat_ids = np.ravel(ids)\n",
        "    from tinytorch.core import tensor\n"
        "    return tensor._add_rows_coalesced(np.empty((num_rows,) + rows.shape[1:], rows.dtype), np.ravel(ids), rows, True)\n",
        "test_scatter_add_rows", ["your scatter_add_rows called the library's", *DELEGATED], set()),
    "scatter_add_rows delegates to a RowSparseGrad": (
        "scatter", "    flat_ids = np.ravel(ids)\n",
        "    return RowSparseGrad((num_rows,) + rows.shape[1:], np.ravel(ids), rows).to_dense()\n",
        "test_scatter_add_rows", ["your scatter_add_rows called the library's", *DELEGATED], set()),
    "embedding_grad delegates to the library's scatter-add": (
        "embedding-grad", "    return scatter_add_rows(flat_ids, flat_rows, num_rows)",
        "    return library_kernels.scatter_add_rows(flat_ids, flat_rows, num_rows)",
        "test_embedding_grad", ["your embedding_grad called the library's scatter_add_rows", *DELEGATED], set()),
    # as_token_ids: one mistake per step of its TODO
    "negative ids accepted": (
        "as-ids", "if ids.min() < 0 or ids.max() >= vocab_size:", "if ids.max() >= vocab_size:",
        "test_as_token_ids", ["as_token_ids([-1], 5) returned array([-1])", "expected TokenIdError"], set()),
    "plain ValueError for a bad id": (
        "as-ids", "raise TokenIdError(f\"token id", "raise ValueError(f\"token id",
        "test_as_token_ids", ["raised ValueError", "expected TokenIdError"], set()),
    "Tensor input not unwrapped": (
        "as-ids", "    if isinstance(ids, Tensor):\n        ids = ids.data\n", "",
        "test_as_token_ids", ["as_token_ids(Tensor([[0, 4]]), 5)"], set()),
    "empty list left float64": (
        "as-ids", "    if was_sequence and ids.size == 0:\n        ids = ids.astype(np.int64)                  # np.asarray([]) is float64\n", "",
        "test_as_token_ids", ["as_token_ids([], 5) raised TypeError", "an empty list or tuple becomes an empty int64 array"], set()),
    "unsigned ids refused": (
        "as-ids", "if ids.dtype.kind not in ('i', 'u'):", "if ids.dtype.kind != 'i':",
        "test_as_token_ids", ["as_token_ids(uint8 [4], 5) raised TypeError", "unsigned integers are integers too"], set()),
    "only float ids refused (bool passes)": (
        "as-ids", "if ids.dtype.kind not in ('i', 'u'):", "if ids.dtype.kind == 'f':",
        "test_as_token_ids", ["as_token_ids([True, False], 5) returned", "expected TypeError"], set()),
    "float ids truncated instead of refused": (
        "as-ids", "if ids.dtype.kind not in ('i', 'u'):", "if ids.dtype.kind == 'f':\n        ids = ids.astype(np.int64)\n    if ids.dtype.kind not in ('i', 'u'):",
        "test_as_token_ids", ["as_token_ids([1.0, 2.0], 5) returned", "expected TypeError"], set()),
    "vocab_size=None skips the type check too": (
        "as-ids", "    was_sequence = isinstance(ids, (list, tuple))\n",
        "    was_sequence = isinstance(ids, (list, tuple))\n    if vocab_size is None:\n        return np.asarray(ids)\n",
        "test_as_token_ids", ["as_token_ids([0.5], None) returned", "expected TypeError"], set()),
    # init_embedding_table
    "float64 table": (
        "init", "table = rng.random(shape, dtype=np.float32)", "table = rng.random(shape)",
        "test_init_embedding_table", ["expected a float32 table", "got float64"], set()),
    "float64 drawn, then cast": (
        "init", "table = rng.random(shape, dtype=np.float32)", "table = rng.random(shape).astype(np.float32)",
        "test_init_embedding_table", ["rng.random drew a float64 array of shape (200, 64)", "a float64 intermediate",
                                      "draw float32 directly"], set()),
    "xavier scaled by the width only": (
        "init", "bound = math.sqrt(6 / (vocab_size + embedding_dim))", "bound = math.sqrt(6 / embedding_dim)",
        "test_init_embedding_table", ["xavier (300, 100): a = √(6 / (300 + 100)) = 0.1225", "largest |value| is 0.24"], set()),
    "unknown init_type without the valid ones": (
        "init", 'raise ValueError(f"init_type must be one of {INIT_TYPES}, got {init_type!r}")',
        'raise ValueError(f"unknown init_type {init_type!r}")',
        "test_init_embedding_table", ["init_embedding_table(4, 4, 'zeros'): the ValueError should name ['uniform', 'normal', 'xavier']"],
        set()),
    "uniform init not centred, U(0, 2b)": (
        "init", "    table -= np.float32(bound)\n", "",
        "test_init_embedding_table", ["uniform: values should be centred on 0, their mean is 0.12", "the draw is shifted"], set()),
    # a part left unwritten costs that part only: other parts' tests stand in right versions for it
    "as_token_ids left unwritten": (
        "as-ids", "    if isinstance(ids, Tensor):\n        ids = ids.data\n", "    raise NotImplementedError()\n",
        "test_as_token_ids", ["not written yet", "NotImplementedError"], set()),
    "init_embedding_table left unwritten": (
        "init", "    shape = (vocab_size, embedding_dim)\n", "    raise NotImplementedError()\n",
        "test_init_embedding_table", ["NotImplementedError"], set()),
    "sinusoid frequencies with exponent -i/dim": (
        "sinusoidal", "freqs = base ** (-np.arange(0, embedding_dim, 2, dtype=np.float64) / embedding_dim)",
        "freqs = base ** (-np.arange((embedding_dim + 1) // 2, dtype=np.float64) / embedding_dim)",
        "test_sinusoidal_table", ["your pairs slow down by a factor 0.2154 per pair, so pair 3 would turn by 1.00e-02",
                                  "the contract says 1/base = 1e-04"], set()),
    "sinusoid frequencies growing, exponent +2i/dim": (
        "sinusoidal", "freqs = base ** (-np.arange(0, embedding_dim, 2, dtype=np.float64) / embedding_dim)",
        "freqs = base ** (np.arange(0, embedding_dim, 2, dtype=np.float64) / embedding_dim)",
        "test_sinusoidal_table", ["sinusoidal_table(4, 6): first wrong position",
                                  "each pair must be slower than the one before by one same factor"], set()),
    "sinusoid angles not proportional to the position": (
        "sinusoidal", "    angles = positions * freqs", "    angles = positions ** 2 * freqs ",
        "test_sinusoidal_table", ["a pair's angle must grow by the same step at every position"], set()),
    "sinusoid pairs counted from 1": (
        "sinusoidal", "freqs = base ** (-np.arange(0, embedding_dim, 2, dtype=np.float64) / embedding_dim)",
        "freqs = base ** (-np.arange(2, embedding_dim + 2, 2, dtype=np.float64) / embedding_dim)",
        "test_sinusoidal_table", ["pair 0 turns by 0.0464 radians per position, the contract says 1"], set()),
    "sinusoidal_table left unwritten": (
        "sinusoidal", "    positions = np.arange(max_seq_length, dtype=np.float64)[:, None]", "    raise NotImplementedError()",
        "test_sinusoidal_table", ["NotImplementedError"], set()),
    # weight tying: the table used by the lookup and by the read-out
    "tied table: the lookup's share only": (
        "tie", "    return from_lookup + from_readout.astype(from_lookup.dtype, copy=False)",
        "    return from_lookup",
        "test_tied_table_grad", ["that is the lookup's share alone", "the gradients of its two uses add"], set()),
    "tied table: the padding row left out of the read-out too": (
        "tie", "    return from_lookup + from_readout.astype(from_lookup.dtype, copy=False)",
        "    out = from_lookup + from_readout.astype(from_lookup.dtype, copy=False)\n"
        "    if padding_idx is not None:\n        out[padding_idx] = 0\n    return out",
        "test_tied_table_grad", ["the padding row got nothing", "the read-out still scores it"], set()),
    "tied table: the read-out's gradient transposed": (
        "tie", "d_logits.reshape(-1, num_rows).T @ hidden.reshape(-1, dim)",
        "hidden.reshape(-1, dim).T @ d_logits.reshape(-1, num_rows)",
        "test_tied_table_grad", ["raised ValueError", "both shares of the gradient have W's shape (4, 2)"], set()),
    # the gather and the scatter-adds
    "lookup without the id check": (
        "lookup", "    if ids.size and (ids.min() < 0 or ids.max() >= vocab_size):\n        first_bad = ids[(ids < 0) | (ids >= vocab_size)].flat[0]\n"
        "        raise TokenIdError(f\"token id {first_bad} is out of range: \"\n"
        "                           f\"ids must be in [0, {vocab_size})\")\n", "",
        "test_lookup_rows", ["lookup_rows(table, [-1]) returned", "expected TokenIdError (NumPy would silently read the last row"], set()),
    "lookup reads the wrong rows": (
        "lookup", "return np.take(table, ids, axis=0)", "return np.take(table, np.sort(ids, axis=-1), axis=0)",
        "test_lookup_rows", ["first wrong position at [0, 0]: expected [6.0, 7.0, 8.0], got [0.0, 1.0, 2.0]"], set()),
    "lookup returns a view into the table": (
        "lookup", "return np.take(table, ids, axis=0)", "return table[ids.min():ids.max() + 1] if ids.ndim == 1 and ids.size == 1 else np.take(table, ids, axis=0)",
        "test_lookup_rows", ["writing into the result changed the table: return a new array"], set()),
    "lookup fails on no ids with NumPy's own error": (
        "lookup", "if ids.size and (ids.min() < 0", "if (ids.min() < 0",
        "test_lookup_rows", ["lookup_rows(table, ids of shape (2, 0)) raised ValueError(zero-size array",
                             "no ids is valid input", "check ids.size first"], set()),
    "duplicate ids overwrite": (
        "scatter", "np.add.at(dense, flat_ids, rows)", "dense[flat_ids] += rows",
        "test_scatter_add_rows", ["first wrong row at [3]: expected [101.0, 202.0], got [100.0, 200.0]",
                                  "id 3 occurs twice"], set()),
    "duplicate ids overwrite (row-sparse)": (
        "scatter", "np.add.at(summed, slot.reshape(-1), rows)", "summed[slot.reshape(-1)] += rows",
        "test_sum_rows_by_id", ["first wrong row at [1]: expected [101.0, 202.0], got [100.0, 200.0]", "id 3 occurs twice"],
        set()),
    "scatter-add through a one-hot matrix": (
        "scatter", "    np.add.at(dense, flat_ids, rows)\n    return dense",
        "    one_hot = np.zeros((flat_ids.size, num_rows), rows.dtype)\n    one_hot[np.arange(flat_ids.size), flat_ids] = 1\n"
        "    return one_hot.T @ rows",
        "test_scatter_add_rows", ["scatter_add_rows(256 ids, rows (256, 4), 50_000) needed", "MB at its peak for a 0.8 MB result",
                                  "(a one-hot matrix?)"], set()),
    "sum by id in an array indexed by the ids": (
        "scatter", "    unique_ids, slot = np.unique(np.ravel(ids), return_inverse=True)\n"
        "    summed = np.zeros((unique_ids.size,) + rows.shape[1:], dtype=rows.dtype)\n"
        "    np.add.at(summed, slot.reshape(-1), rows)\n",
        "    flat = np.ravel(ids)\n    dense = np.zeros((flat.max() + 1 if flat.size else 0,) + rows.shape[1:], rows.dtype)\n"
        "    np.add.at(dense, flat, rows)\n    unique_ids = np.unique(flat)\n    summed = dense[unique_ids]\n",
        "test_sum_rows_by_id", ["sum_rows_by_id([10**12, 3, 10**12], rows) raised MemoryError",
                                "time and memory may depend on n only"], set()),
    "float64 scatter-add": (
        "scatter", "dense = np.zeros((num_rows,) + rows.shape[1:], dtype=rows.dtype)",
        "dense = np.zeros((num_rows,) + rows.shape[1:])",
        "test_scatter_add_rows", ["expected float32 like the rows", "got float64"], set()),
    "row-sparse sums in float32 whatever the rows": (
        "scatter", "summed = np.zeros((unique_ids.size,) + rows.shape[1:], dtype=rows.dtype)",
        "summed = np.zeros((unique_ids.size,) + rows.shape[1:], dtype=np.float64)",
        "test_sum_rows_by_id", ["expected float32 like the rows, got float64"], set()),
    # the layer's backward
    "padding positions not left out": (
        "embedding-grad", "    if padding_idx is not None:\n        keep = flat_ids != padding_idx\n        flat_ids, flat_rows = flat_ids[keep], flat_rows[keep]\n", "",
        "test_embedding_grad", ["embedding_grad(..., padding_idx=0): first wrong row at [0]", "the padding id 0 must get no gradient"], set()),
    "backward without the student's scatter-add": (
        "embedding-grad", "    return scatter_add_rows(flat_ids, flat_rows, num_rows)",
        "    out = np.zeros((num_rows, flat_rows.shape[1]), flat_rows.dtype)\n    np.add.at(out, flat_ids, flat_rows)\n    return out",
        "test_embedding_grad", ["embedding_grad never called scatter_add_rows"], set()),
    "backward in float32 whatever d_out": (
        "embedding-grad", "    return scatter_add_rows(flat_ids, flat_rows, num_rows)",
        "    return scatter_add_rows(flat_ids, flat_rows.astype(np.float32), num_rows)",
        "test_embedding_grad", ["float64, 1-D ids: expected row 1 = 2s in float64"], set()),
    # positions
    "odd embedding_dim": (
        "sinusoidal", "np.cos(angles[:, :embedding_dim // 2])", "np.cos(angles)",
        "test_sinusoidal_table", ["sinusoidal_table(10, 7) raised ValueError", "odd embedding_dim must work"], set()),
    "float64 sinusoidal table": (
        "sinusoidal", "return table.astype(np.float32)", "return table",
        "test_sinusoidal_table", ["expected a float32 table, got float64"], set()),
    "sinusoidal angles in float32": (
        "sinusoidal", "    angles = positions * freqs", "    angles = (positions * freqs).astype(np.float32)",
        "test_sinusoidal_table", ["position 4999: first wrong column", "the angles lost digits"], set()),
    "M_k with the sine signs swapped": (
        "shift", "[[c, s], [-s, c]]", "[[c, -s], [s, c]]",
        "test_shift_matrix", ["k = 1 (dim 6, base 100): M_k @ PE(0) should be PE(1); pair 0 should be [0.841471, 0.540302], "
                              "got [-0.841471, 0.540302]; rows 0 and 1 of your M_1: [0.5403, -0.8415, 0.0, 0.0, 0.0, 0.0] and "
                              "[0.8415, 0.5403, 0.0, 0.0, 0.0, 0.0]", "the sines of k·ω_i have the wrong sign"], set()),
    "M_k with the wrong frequencies": (
        "shift", "enumerate(base ** (-np.arange(0, embedding_dim, 2) / embedding_dim))",
        "enumerate(base ** (-np.arange(embedding_dim // 2) / embedding_dim))",
        "test_shift_matrix", ["k = 1 (dim 6, base 100): M_k @ PE(0) should be PE(1); pair 1 should be",
                              "rows 2 and 3 of your M_1"], set()),
    "M_k as a float32 matrix": (
        "shift", "M = np.zeros((embedding_dim, embedding_dim))", "M = np.zeros((embedding_dim, embedding_dim), np.float32)",
        "test_shift_matrix", ["expected float64, got float32"], set()),
    "learned positions: no batch-sum": (
        "learned", "per_position = g.reshape(-1, seq, dim).sum(axis=0)", "per_position = g.reshape(-1, seq, dim)[0]",
        "test_learned_positional_embedding", ["first wrong row at [6]", "sum over the batch of the gradients at position p"],
        set()),
    "learned positions: rows from 0 whatever start_pos": (
        "learned", "np.arange(start, start + seq)", "np.arange(seq)",
        "test_learned_positional_embedding", ["first wrong row at [0]: expected [0.0, 0.0", "rows 6…9"],
        set()),
    "learned positions get no gradient": (
        "learned", "return Tensor._from_op(out, (x, W), grad_fn)", "return Tensor(out)",
        "test_learned_positional_embedding", ["not connected to the position table", "requires_grad is False"], set()),
    "learned positions: inplace ignored": (
        "learned", "out = np.add(x.data, rows, out=x.data if inplace else None)", "out = x.data + rows",
        "test_learned_positional_embedding", ["inplace=True: the sum must be written into the input's own array"], set()),
    "missing √d scaling": (
        "tpe-forward", "x = x * math.sqrt(self.embedding_dim)", "x = x * 1.0",
        "test_token_position_embedding", ["multiplies the token rows by √8", "expected", "got"], set()),
    "√d scaling applied after the positions": (
        "tpe-forward", "        if self.scale_embeddings:\n            x = x * math.sqrt(self.embedding_dim)\n"
        "        if self.positions is None:\n            return x\n        return self.positions(x, inplace=True, start_pos=start)",
        "        if self.positions is not None:\n            x = self.positions(x, inplace=True, start_pos=start)\n"
        "        return x * math.sqrt(self.embedding_dim) if self.scale_embeddings else x",
        "test_token_position_embedding", ["scale_embeddings=True with positions from start_pos=1: scale the token rows, "
                                          "then add positions 1 and 2: first wrong position", "the positions were scaled too"], set()),
    "start_pos ignored by the token + position layer": (
        "tpe-forward", "self.positions(x, inplace=True, start_pos=start)", "self.positions(x, inplace=True)",
        "test_token_position_embedding", ["start_pos=2: token 3 alone must get the vector it has in the whole sequence"],
        set()),
    "3-D ids not refused by the token + position layer": (
        "tpe-forward", "        if ids.ndim not in (1, 2):\n            raise ValueError(f\"expected (seq,) or (batch, seq) token ids, \"\n"
        "                             f\"got shape {ids.shape}\")\n", "",
        "test_token_position_embedding", ["the message should name the shape (1, 1, 2)"], set()),
    "token + position layer looks up before checking the positions": (
        "tpe-forward", "        start = _position_start(", "        self.tokens(ids)\n        start = _position_start(",
        "test_token_position_embedding", ["ids (1, 13) from start_pos 0 were looked up, then refused"], set()),
    "token + position layer checks the length on the batch axis": (
        "tpe-forward", "_position_start(start_pos, ids.shape[-1]", "_position_start(start_pos, ids.shape[0]",
        "test_token_position_embedding", ["13 sequences of 2 tokens, ids (13, 2) raised ValueError",
                                          "the sequence length is the last axis of the ids, not the first"], set()),
    "RoPE pairs the two halves": (
        "rope", "a, b = x[..., 0::2], x[..., 1::2]\n    out = np.empty_like(x)\n    out[..., 0::2] = a * cos - b * sin\n"
        "    out[..., 1::2] = a * sin + b * cos",
        "h = x.shape[-1] // 2\n    a, b = x[..., :h], x[..., h:]\n    out = np.empty_like(x)\n    out[..., :h] = a * cos - b * sin\n"
        "    out[..., h:] = a * sin + b * cos",
        "test_rotate_pairs", ["expected [0.0, 1.0, 0.0, 2.0], got [0.0, 0.0, 1.0, 2.0]", "the pairs are neighbours (2i, 2i+1)"],
        set()),
    "RoPE turns the wrong way": (
        "rope", "out[..., 0::2] = a * cos - b * sin\n    out[..., 1::2] = a * sin + b * cos",
        "out[..., 0::2] = a * cos + b * sin\n    out[..., 1::2] = b * cos - a * sin",
        "test_rotate_pairs", ["expected [0.0, 1.0, 0.0, 2.0], got [0.0, -1.0, 0.0, 2.0]", "turned by −90° instead of +90°"],
        set()),
}

MISTAKES.update({
    # more typical mistakes, part by part
    "lookup accepts id == vocab_size": (
        "lookup", "ids.max() >= vocab_size):", "ids.max() > vocab_size):",
        "test_lookup_rows", ["lookup_rows(table, [4]) raised IndexError", "expected TokenIdError"], set()),
    "lookup's message names no id": (
        "lookup", "raise TokenIdError(f\"token id {first_bad} is out of range: \"\n"
        "                           f\"ids must be in [0, {vocab_size})\")",
        "raise TokenIdError(\"bad token id\")",
        "test_lookup_rows", ["the message should name the first bad id -1 and the range [0, 4), got: bad token id"],
        set()),
    "lookup in float64 whatever the table": (
        "lookup", "return np.take(table, ids, axis=0)", "return np.take(table, ids, axis=0).astype(np.float64)",
        "test_lookup_rows", ["expected the table's dtype float32, got float64"], set()),
    "scatter-add with np.bincount, left float64": (
        "scatter", "    dense = np.zeros((num_rows,) + rows.shape[1:], dtype=rows.dtype)\n    np.add.at(dense, flat_ids, rows)\n",
        "    dense = np.stack([np.bincount(flat_ids, weights=rows[:, j], minlength=num_rows)\n"
        "                      for j in range(rows.shape[1])], axis=1)\n",
        "test_scatter_add_rows", ["expected float32 like the rows, got float64", "make the result in the rows' dtype"],
        set()),
    "scatter-add sized by the largest id": (
        "scatter", "dense = np.zeros((num_rows,) + rows.shape[1:], dtype=rows.dtype)",
        "dense = np.zeros((max(num_rows, flat_ids.max() + 1),) + rows.shape[1:], dtype=rows.dtype)",
        "test_scatter_add_rows", ["scatter_add_rows(no ids, rows (0, 3), 4) raised ValueError",
                                  "no ids is valid input"], set()),
    "sum by id in first-seen order": (
        "scatter", "    unique_ids, slot = np.unique(np.ravel(ids), return_inverse=True)\n",
        "    flat = np.ravel(ids)\n    unique_ids = np.array(list(dict.fromkeys(flat.tolist())), flat.dtype)\n"
        "    slot = np.array([np.flatnonzero(unique_ids == i)[0] for i in flat], np.int64)\n",
        "test_sum_rows_by_id", ["expected the distinct ids [1, 3], sorted, got [3, 1]"], set()),
    "sum by id: no ids give a 1-D sum": (
        "scatter", "    summed = np.zeros((unique_ids.size,) + rows.shape[1:], dtype=rows.dtype)\n"
        "    np.add.at(summed, slot.reshape(-1), rows)\n",
        "    summed = np.array([rows[slot.reshape(-1) == j].sum(axis=0) for j in range(unique_ids.size)],\n"
        "                      dtype=rows.dtype)\n",
        "test_sum_rows_by_id", ["no ids (n = 0): expected shapes (0,) and (0, 3), got (0,) and (0,)"], set()),
    "padding_idx 0 taken as no padding": (
        "embedding-grad", "    if padding_idx is not None:\n        keep", "    if padding_idx:\n        keep",
        "test_embedding_grad", ["embedding_grad(..., padding_idx=0): first wrong row at [0]",
                                "the padding id 0 must get no gradient"], set()),
    "gradient rows cut by the sequence length, not the width": (
        "embedding-grad", "np.reshape(d_out, (-1, d_out.shape[-1]))", "np.reshape(d_out, (-1, np.shape(ids)[-1]))",
        "test_embedding_grad", ["embedding_grad(ids (2, 3), g (2, 3, 4), 6) raised ValueError",
                                "g holds one row of dim 4 for each of the 6 ids"], set()),
    "padding positions left out of the ids only": (
        "embedding-grad", "        flat_ids, flat_rows = flat_ids[keep], flat_rows[keep]\n",
        "        flat_ids = flat_ids[keep]\n",
        "test_embedding_grad", ["embedding_grad(..., padding_idx=0) raised ValueError",
                                "leave the padding positions out of the ids and of the rows alike"], set()),
    "learned positions: a float64 gradient for a float32 table": (
        "learned", "    return g, RowSparseGrad(W.shape, np.arange(start, start + seq),\n"
        "                                    per_position.astype(W.dtype, copy=False),",
        "    return g, RowSparseGrad(W.shape, np.arange(start, start + seq),\n"
        "                                    per_position.astype(np.float64),",
        "test_learned_positional_embedding", ["the position table's gradient is float64",
                                              "expected float32 like the table"], set()),
    "lookup accepts negative ids": (
        "lookup", "if ids.size and (ids.min() < 0 or ids.max() >= vocab_size):",
        "if ids.size and ids.max() >= vocab_size:",
        "test_lookup_rows", ["lookup_rows(table, [-1]) returned", "NumPy would silently read the last row"], set()),
    "learned positions: g summed over its first axis whatever its shape": (
        "learned", "per_position = g.reshape(-1, seq, dim).sum(axis=0)", "per_position = g.sum(axis=0)",
        "test_learned_positional_embedding", ["(seq, dim) input, no batch, start_pos=2: the backward raised ValueError",
                                              "here (seq, dim) with no batch axis"], set()),
    "token + position layer reads the length from axis 1": (
        "tpe-forward", "_position_start(start_pos, ids.shape[-1]", "_position_start(start_pos, ids.shape[1]",
        "test_token_position_embedding", ["1-D ids (seq,) [7, 8] raised IndexError",
                                          "its length is the last axis of the ids"], set()),
    "tied table: the read-out's share without flattening the batch": (
        "tie", "d_logits.reshape(-1, num_rows).T @ hidden.reshape(-1, dim)", "d_logits.T @ hidden",
        "test_tied_table_grad", ["W's shape (4, 2)"], set()),
    "tied table: the padding id's lookup positions counted": (
        "tie", "embedding_grad(ids, d_rows, num_rows, padding_idx)", "embedding_grad(ids, d_rows, num_rows)",
        "test_tied_table_grad", ["the padding id's lookup positions were counted"], set()),
    "RoPE with cosine and sine swapped": (
        "rope", "out[..., 0::2] = a * cos - b * sin\n    out[..., 1::2] = a * sin + b * cos",
        "out[..., 0::2] = a * sin - b * cos\n    out[..., 1::2] = a * cos + b * sin",
        "test_rotate_pairs", ["rotate_pairs([1, 0, 0, 2]) with pair 0 turned by +90°: expected [0.0, 1.0, 0.0, 2.0]"],
        set()),
    "M_k for |k| whatever the sign": (
        "shift", "c, s = math.cos(k * w), math.sin(k * w)", "c, s = math.cos(abs(k) * w), math.sin(abs(k) * w)",
        "test_shift_matrix", ["M_-3 @ M_3 should be M_0"], set()),
    "RoPE pairs taken along axis 1": (
        "rope", "a, b = x[..., 0::2], x[..., 1::2]\n    out = np.empty_like(x)\n    out[..., 0::2] = a * cos - b * sin\n"
        "    out[..., 1::2] = a * sin + b * cos",
        "a, b = x[:, 0::2], x[:, 1::2]\n    out = np.empty_like(x)\n    out[:, 0::2] = a * cos - b * sin\n"
        "    out[:, 1::2] = a * sin + b * cos",
        "test_rotate_pairs", ["rotate_pairs(x (2, 5, 6), cos (5, 3), sin (5, 3)) raised ValueError",
                              "the pairs lie along the last axis of x"], set()),
    "scatter-add into an array shaped like the rows": (
        "scatter", "dense = np.zeros((num_rows,) + rows.shape[1:], dtype=rows.dtype)", "dense = np.zeros_like(rows)",
        "test_scatter_add_rows", ["scatter_add_rows([3, 1, 3], rows (3, 2), 5) raised IndexError",
                                  "the result has num_rows = 5 rows"], set()),
    "lookup from the flattened table": (
        "lookup", "return np.take(table, ids, axis=0)", "return np.take(table, ids)",
        "test_lookup_rows", ["expected a (2, 2, 3) array, got (2, 2)"], set()),
    "init draws from its own generator": (
        "init", "    shape = (vocab_size, embedding_dim)\n",
        "    shape = (vocab_size, embedding_dim)\n    rng = np.random.default_rng(0)\n",
        "test_init_embedding_table", ["nothing was drawn from the rng passed in"], set()),
    "empty tuple left float64": (
        "as-ids", "was_sequence = isinstance(ids, (list, tuple))", "was_sequence = isinstance(ids, list)",
        "test_as_token_ids", ["as_token_ids((), 5) raised TypeError", "an empty list or tuple becomes an empty int64 array"],
        set()),
    "normal init not scaled": (
        "init", "        table *= np.float32(1 / math.sqrt(embedding_dim))\n", "",
        "test_init_embedding_table", ["normal: expected standard deviation 1/√64 = 0.125, got 0.99"], set()),
    "uniform bound 1/dim": (
        "init", "        bound = 1 / math.sqrt(embedding_dim)\n", "        bound = 1 / embedding_dim\n",
        "test_init_embedding_table", ["uniform (dim 64): expected values filling [-1/8, 1/8], got [-0.0156"], set()),
    "as_token_ids accepts id == vocab_size": (
        "as-ids", "if ids.min() < 0 or ids.max() >= vocab_size:", "if ids.min() < 0 or ids.max() > vocab_size:",
        "test_as_token_ids", ["as_token_ids([0, 5], 5) returned array([0, 5])", "expected TokenIdError"], set()),
    "as_token_ids converts with dtype=int64": (
        "as-ids", "    ids = np.asarray(ids)\n", "    ids = np.asarray(ids, dtype=np.int64)\n",
        "test_as_token_ids", ["as_token_ids([1.0, 2.0], 5) returned array([1, 2])", "expected TypeError"], set()),
    "sinusoids with sine and cosine swapped": (
        "sinusoidal", "    table[:, 0::2] = np.sin(angles)\n    table[:, 1::2] = np.cos(angles[:, :embedding_dim // 2])",
        "    table[:, 0::2] = np.cos(angles)\n    table[:, 1::2] = np.sin(angles[:, :embedding_dim // 2])",
        "test_sinusoidal_table", ["position 0 is sin 0 = 0, cos 0 = 1 in every pair", "got [1.0, 0.0, 1.0, 0.0"], set()),
    "sinusoids as two halves, sines then cosines": (
        "sinusoidal", "    table[:, 0::2] = np.sin(angles)\n    table[:, 1::2] = np.cos(angles[:, :embedding_dim // 2])",
        "    h = (embedding_dim + 1) // 2\n    table[:, :h] = np.sin(angles)\n"
        "    table[:, h:] = np.cos(angles[:, :embedding_dim // 2])",
        "test_sinusoidal_table", ["position 0 is sin 0 = 0, cos 0 = 1 in every pair", "got [0.0, 0.0, 0.0, 1.0"],
        set()),
    "M_k turns by one step whatever k": (
        "shift", "c, s = math.cos(k * w), math.sin(k * w)", "c, s = math.cos(w), math.sin(w)",
        "test_shift_matrix", ["k = 0 moves nothing, M_0 must be the identity"], set()),
    "RoPE writes into x": (
        "rope", "    out = np.empty_like(x)\n    out[..., 0::2] = a * cos - b * sin",
        "    out = x\n    out[..., 0::2] = a * cos - b * sin",
        "test_rotate_pairs", ["rotate_pairs([1, 0, 0, 2]) with pair 0 turned by +90°: expected [0.0, 1.0, 0.0, 2.0], "
                              "got [0.0, 0.0, 0.0, 2.0]", "x itself was overwritten while it was being read"], set()),
    "RoPE result in float64": (
        "rope", "    out = np.empty_like(x)\n", "    out = np.empty(x.shape)\n",
        "test_rotate_pairs", ["keep float32 (got float64)"], set()),
})

# Right answers other than the lesson's own, each put in place of one solution region (cell, which region of the cell,
# the code): every visible test must pass with each of them, since the docstrings allow them all.
ALTERNATIVES = {
    "lookup by fancy indexing, bad ids found with a mask": ("lookup", 0, """
        bad = (ids < 0) | (ids >= table.shape[0])
        if bad.any():
            raise TokenIdError(f"token id {ids[bad][0]} is not in [0, {table.shape[0]})")
        return table[ids]
        """),
    "scatter-add with np.bincount, one column at a time": ("scatter", 0, """
        flat_ids = np.ravel(ids)
        dense = np.zeros((num_rows,) + rows.shape[1:], dtype=rows.dtype)
        for j in range(rows.shape[1]):
            dense[:, j] = np.bincount(flat_ids, weights=rows[:, j], minlength=num_rows)
        return dense
        """),
    "scatter-add by sorting the ids": ("scatter", 0, """
        flat_ids = np.ravel(ids)
        dense = np.zeros((num_rows,) + rows.shape[1:], dtype=rows.dtype)
        if flat_ids.size:
            order = np.argsort(flat_ids, kind="stable")
            sorted_ids = flat_ids[order]
            starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])
            dense[sorted_ids[starts]] = np.add.reduceat(rows[order], starts, axis=0)
        return dense
        """),
    "sum by id with np.bincount over the distinct ids' slots": ("scatter", 1, """
        unique_ids, slot = np.unique(np.ravel(ids), return_inverse=True)
        summed = np.zeros((unique_ids.size,) + rows.shape[1:], dtype=rows.dtype)
        for j in range(rows.shape[1]):
            summed[:, j] = np.bincount(slot.reshape(-1), weights=rows[:, j], minlength=unique_ids.size)
        return unique_ids, summed
        """),
    "sum by id by sorting and np.add.reduceat": ("scatter", 1, """
        flat = np.ravel(ids)
        order = np.argsort(flat, kind="stable")
        sorted_ids = flat[order]
        starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]]) if flat.size else np.zeros(0, np.int64)
        if not flat.size:
            return sorted_ids, np.zeros((0,) + rows.shape[1:], rows.dtype)
        return sorted_ids[starts], np.add.reduceat(rows[order], starts, axis=0).astype(rows.dtype, copy=False)
        """),
    "padding rows zeroed instead of left out": ("embedding-grad", 0, """
        flat_ids, flat_rows = np.reshape(ids, -1), np.reshape(d_out, (-1, d_out.shape[-1]))
        if padding_idx is not None:
            flat_rows = flat_rows * (flat_ids != padding_idx)[:, None].astype(flat_rows.dtype)
        dense = scatter_add_rows(flat_ids, flat_rows, num_rows)
        return dense
        """),
    "float32 draws scaled out of place": ("init", 0, """
        shape = (vocab_size, embedding_dim)
        if init_type == 'normal':
            return rng.standard_normal(shape, dtype=np.float32) / np.float32(math.sqrt(embedding_dim))
        if init_type not in INIT_TYPES:
            raise ValueError(f"unknown init_type {init_type!r}: use one of {', '.join(INIT_TYPES)}")
        bound = 1 / math.sqrt(embedding_dim) if init_type == 'uniform' else math.sqrt(6 / (vocab_size + embedding_dim))
        return rng.random(shape, dtype=np.float32) * np.float32(2 * bound) - np.float32(bound)
        """),
    "sinusoids interleaved with np.stack": ("sinusoidal", 0, """
        freqs = base ** (-np.arange(0, embedding_dim, 2) / embedding_dim)
        angles = np.outer(np.arange(max_seq_length), freqs)
        pairs = np.stack([np.sin(angles), np.cos(angles)], axis=-1).reshape(max_seq_length, -1)
        return pairs[:, :embedding_dim].astype(np.float32)
        """),
    "sinusoids written straight into a float32 table": ("sinusoidal", 0, """
        table = np.zeros((max_seq_length, embedding_dim), np.float32)
        for i in range(0, embedding_dim, 2):
            angle = np.arange(max_seq_length) * base ** (-i / embedding_dim)
            table[:, i] = np.sin(angle)
            if i + 1 < embedding_dim:
                table[:, i + 1] = np.cos(angle)
        return table
        """),
    "sinusoid speeds from np.geomspace": ("sinusoidal", 0, """
        pairs = (embedding_dim + 1) // 2
        last = base ** (-2 * (pairs - 1) / embedding_dim)
        speeds = np.geomspace(1.0, last, pairs) if pairs > 1 else np.ones(1)
        angles = np.arange(max_seq_length)[:, None] * speeds
        table = np.zeros((max_seq_length, embedding_dim))
        table[:, 0::2] = np.sin(angles)
        table[:, 1::2] = np.cos(angles[:, :embedding_dim // 2])
        return table.astype(np.float32)
        """),
    "sinusoids as complex exponentials, speeds by exp and log": ("sinusoidal", 0, """
        speeds = np.exp(-np.log(base) * np.arange(0, embedding_dim, 2) / embedding_dim)
        turns = np.exp(1j * np.outer(np.arange(max_seq_length), speeds))
        table = np.empty((max_seq_length, embedding_dim), np.float32)
        table[:, 0::2] = turns.imag
        table[:, 1::2] = turns.real[:, :embedding_dim // 2]
        return table
        """),
    "shift matrix filled by fancy indexing": ("shift", 0, """
        M = np.zeros((embedding_dim, embedding_dim))
        even = np.arange(0, embedding_dim, 2)
        turn = k * base ** (-even / embedding_dim)
        M[even, even] = M[even + 1, even + 1] = np.cos(turn)
        M[even, even + 1], M[even + 1, even] = np.sin(turn), -np.sin(turn)
        return M
        """),
    "learned positions with a dense gradient": ("learned", 0, """
        out = np.add(x.data, rows, out=x.data) if inplace else x.data + rows
        def grad_fn(g):
            grad_W = np.zeros(W.shape, np.float32)
            grad_W[start:start + seq] = g.reshape(-1, seq, dim).sum(axis=0)
            return g, grad_W
        return Tensor._from_op(out, (x, W), grad_fn)
        """),
    "learned positions summed over every leading axis": ("learned", 0, """
        out = np.add(x.data, rows, out=x.data if inplace else None)
        def grad_fn(g):
            summed = g.sum(axis=tuple(range(g.ndim - 2))).astype(np.float32)
            return g, RowSparseGrad(W.shape, np.arange(start, start + seq), summed, keep_sparse=False)
        return Tensor._from_op(out, (x, W), grad_fn)
        """),
    "rotation as complex multiplication": ("rope", 0, """
        turned = (x[..., 0::2] + 1j * x[..., 1::2]) * (cos + 1j * sin)
        out = np.empty_like(x)
        out[..., 0::2], out[..., 1::2] = turned.real, turned.imag
        return out
        """),
    "rotation as 2 × 2 matrices with np.einsum": ("rope", 0, """
        pairs = x.reshape(x.shape[:-1] + (-1, 2))
        R = np.stack([np.stack([cos, -sin], -1), np.stack([sin, cos], -1)], -2)
        return np.einsum('...ij,...j->...i', R, pairs).reshape(x.shape).astype(x.dtype, copy=False)
        """),
    "tied table with tensordot and np.add.at": ("tie", 0, """
        flat, rows = np.reshape(ids, -1), d_rows.reshape(-1, d_rows.shape[-1])
        lead = tuple(range(d_logits.ndim - 1))
        out = np.tensordot(d_logits, hidden, axes=(lead, lead)).astype(d_rows.dtype)
        keep = flat != padding_idx
        np.add.at(out, flat[keep], rows[keep])
        return out
        """),
    "token + position layer checks the positions first": ("tpe-forward", 0, """
        ids = as_token_ids(input_ids, None)
        start = _position_start(start_pos, ids.shape[-1] if ids.ndim else 0, self.max_seq_length, 'TokenPositionEmbedding')
        if ids.ndim not in (1, 2):
            raise ValueError(f"token ids must be (seq,) or (batch, seq), got shape {ids.shape}")
        x = self.tokens(ids)
        if self.scale_embeddings:
            x = x * np.float32(math.sqrt(self.embedding_dim))
        return x if self.positions is None else self.positions(x, start_pos=start)
        """),
}


ALTERNATIVES.update({
    "lookup one id at a time in a Python loop": ("lookup", 0, """
        flat = ids.reshape(-1)
        out = np.empty((flat.size,) + table.shape[1:], table.dtype)
        for j, i in enumerate(flat):
            if not 0 <= i < table.shape[0]:
                raise TokenIdError(f"token id {i} is outside [0, {table.shape[0]})")
            out[j] = table[i]
        return out.reshape(ids.shape + table.shape[1:])
        """),
    "scatter-add one row at a time in a Python loop": ("scatter", 0, """
        dense = np.zeros((num_rows,) + rows.shape[1:], dtype=rows.dtype)
        for i, row in zip(np.ravel(ids), rows):
            dense[i] += row
        return dense
        """),
    "sum by id in a dict, one row at a time": ("scatter", 1, """
        sums = {}
        for i, row in zip(np.ravel(ids).tolist(), rows):
            sums[i] = sums[i] + row if i in sums else row.copy()
        keys = sorted(sums)
        summed = np.zeros((len(keys),) + rows.shape[1:], rows.dtype)
        for j, i in enumerate(keys):
            summed[j] = sums[i]
        return np.array(keys, np.int64), summed
        """),
    "padding positions left out with an n-d mask": ("embedding-grad", 0, """
        ids = np.asarray(ids)
        keep = np.ones(ids.shape, bool) if padding_idx is None else ids != padding_idx
        return scatter_add_rows(ids[keep], d_out[keep], num_rows)
        """),
    "padding row zeroed after the scatter-add": ("embedding-grad", 0, """
        dense = scatter_add_rows(np.ravel(ids), d_out.reshape(-1, d_out.shape[-1]), num_rows)
        if padding_idx is not None:
            dense[padding_idx] = 0
        return dense
        """),
    "float32 draws into one array with out=": ("init", 0, """
        table = np.empty((vocab_size, embedding_dim), np.float32)
        bounds = {'uniform': 1 / math.sqrt(embedding_dim),
                  'xavier': math.sqrt(6 / (vocab_size + embedding_dim))}
        if init_type == 'normal':
            rng.standard_normal(dtype=np.float32, out=table)
            table /= np.float32(math.sqrt(embedding_dim))
            return table
        if init_type not in bounds:
            raise ValueError(f"{init_type!r} is none of {INIT_TYPES}")
        rng.random(dtype=np.float32, out=table)
        np.multiply(table, 2 * bounds[init_type], out=table, casting='same_kind')
        table -= np.float32(bounds[init_type])
        return table
        """),
    "token ids checked with np.issubdtype and a mask": ("as-ids", 0, """
        if isinstance(ids, Tensor):
            ids = ids.data
        if isinstance(ids, (list, tuple)) and len(ids) == 0:
            return np.zeros(0, np.int64)
        arr = np.asarray(ids)
        if not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(f"expected integer token ids, got dtype {arr.dtype}")
        if vocab_size is not None:
            bad = (arr < 0) | (arr >= vocab_size)
            if bad.any():
                raise TokenIdError(f"id {arr[bad][0]} is not in [0, {vocab_size})")
        return arr
        """),
    "token ids copied, the first bad one found in a loop": ("as-ids", 0, """
        data = ids.data if isinstance(ids, Tensor) else ids
        if isinstance(data, str):
            raise TypeError("token ids must be integers, got a str")
        arr = np.array(data)
        if isinstance(data, (list, tuple)) and arr.size == 0:
            arr = arr.astype(np.int64)
        if arr.dtype.kind not in 'iu':
            raise TypeError(f"token ids must be integers, got {arr.dtype}")
        for i in arr.flat if vocab_size is not None else ():
            if i < 0 or i >= vocab_size:
                raise TokenIdError(f"token id {i} outside [0, {vocab_size})")
        return arr
        """),
    "shift matrix as 2 × 2 blocks placed by np.einsum": ("shift", 0, """
        w = base ** (-np.arange(0, embedding_dim, 2) / embedding_dim)
        c, s = np.cos(k * w), np.sin(k * w)
        blocks = np.stack([np.stack([c, s], -1), np.stack([-s, c], -1)], -2)  # (d/2, 2, 2)
        half = embedding_dim // 2
        return np.einsum('ij,iab->iajb', np.eye(half), blocks).reshape(embedding_dim, embedding_dim)
        """),
    "token + position layer without as_token_ids": ("tpe-forward", 0, """
        ids = np.asarray(input_ids.data if isinstance(input_ids, Tensor) else input_ids)
        if ids.ndim not in (1, 2):
            raise ValueError(f"ids of shape {ids.shape}: expected 1-D or 2-D")
        start = _position_start(start_pos, ids.shape[-1], self.max_seq_length, 'TokenPositionEmbedding')
        x = self.tokens(ids)
        if self.scale_embeddings:
            x = x * math.sqrt(self.embedding_dim)
        if self.positions is not None:
            x = self.positions(x, False, start)
        return x
        """),
    "tied table through embedding_grad, read-out by np.einsum, added in place": ("tie", 0, """
        grad = embedding_grad(ids, d_rows, d_logits.shape[-1], padding_idx)
        V, D = d_logits.shape[-1], hidden.shape[-1]
        grad += np.einsum('nv,nd->vd', d_logits.reshape(-1, V), hidden.reshape(-1, D)).astype(grad.dtype)
        return grad
        """),
})

# the graded part each solution region is checked by
PART_OF = {("lookup", 0): "test_lookup_rows", ("scatter", 0): "test_scatter_add_rows",
           ("scatter", 1): "test_sum_rows_by_id", ("embedding-grad", 0): "test_embedding_grad",
           ("init", 0): "test_init_embedding_table", ("as-ids", 0): "test_as_token_ids",
           ("sinusoidal", 0): "test_sinusoidal_table", ("shift", 0): "test_shift_matrix",
           ("learned", 0): "test_learned_positional_embedding",
           ("tpe-forward", 0): "test_token_position_embedding", ("tie", 0): "test_tied_table_grad",
           ("rope", 0): "test_rotate_pairs"}


def with_solution(nb: dict, cell_id: str, index: int, code: str) -> dict:
    "`nb` with the `index`-th solution region of cell `cell_id` holding `code` (written at any indentation)."
    def swap(source):
        parts = source.split("### BEGIN SOLUTION")
        body, rest = parts[index + 1].split("### END SOLUTION", 1)
        pad = body.rsplit("\n", 1)[1]
        parts[index + 1] = "\n" + textwrap.indent(textwrap.dedent(code).strip("\n"), pad) + "\n" + pad + "### END SOLUTION" + rest
        return "### BEGIN SOLUTION".join(parts)
    return edit(nb, cell_id, swap)


@pytest.fixture(scope="module")
def source_path(request):
    folder = request.config.getoption("--nbs-dir")
    return Path(folder or ROOT / "nbs") / "11_embeddings.ipynb"


@pytest.fixture(scope="module")
def solved(tmp_path_factory, source_path, request):
    "The student release of module 11 with every exercise filled in correctly."
    if source_path.parent == ROOT / "nbs":             # the session's release of nbs/, built once
        released = request.getfixturevalue("release_11")
    else:
        released = release(11, source_path.parent, tmp_path_factory.mktemp("release"))
    return solve(json.loads(released.read_text()), json.loads(source_path.read_text()))


def visible_results(nb: dict, workdir: Path) -> dict:
    "grade_id -> None (passed) or its error's first line: the notebook's test cells run against its own export."
    (workdir / "student_export.py").write_text(exported_source(nb), encoding="utf-8")
    (workdir / "11_embeddings.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    parts = [c["metadata"]["nbgrader"]["grade_id"] for c in nb["cells"]
             if c["cell_type"] == "code" and (c["metadata"].get("nbgrader") or {}).get("grade")]
    program = recheck_program(workdir / "11_embeddings.ipynb")
    outcome, said = judge_submission(workdir / "student_export.py", program, workdir, 120, 600, None, None)
    result = judged_verdicts(outcome, parts)
    assert result.import_error is None, (result.import_error, said, outcome.get("student_processes"))
    return result.errors


def mutate(solved: dict, name: str) -> dict:
    cell, right, wrong = MISTAKES[name][:3]
    return replace(solved, cell, right, wrong)


def test_the_solved_release_passes_every_visible_test(solved, source_path, tmp_path):
    results = visible_results(solved, tmp_path)
    parts = {gid for gid, kind, _ in graded_parts(source_path) if kind == "test"}
    assert set(results) == parts, (sorted(results), sorted(parts))
    assert all(error is None for error in results.values()), results



def test_every_graded_part_has_two_other_right_answers_and_two_named_mistakes(source_path):
    "Each graded part: at least two right answers other than the lesson's own, and two typical mistakes with messages."
    parts = {gid for gid, kind, _ in graded_parts(source_path) if kind == "test"}
    assert set(PART_OF.values()) == parts, sorted(parts ^ set(PART_OF.values()))
    right = {part: [n for n, (cell, i, _) in ALTERNATIVES.items() if PART_OF[cell, i] == part] for part in parts}
    wrong = {part: [n for n, m in MISTAKES.items() if m[3] == part and "delegates" not in n] for part in parts}
    few = {part: (len(right[part]), len(wrong[part])) for part in sorted(parts)
           if len(right[part]) < 2 or len(wrong[part]) < 2}
    assert not few, f"parts with fewer than two other right answers or two named mistakes: {few}"

@pytest.mark.parametrize("name", list(ALTERNATIVES))
def test_every_right_answer_gets_full_marks(solved, tmp_path, name):
    results = visible_results(with_solution(solved, *ALTERNATIVES[name]), tmp_path)
    failed = {part: error for part, error in results.items() if error is not None}
    assert not failed, f"{name}: a right answer lost points: {failed}"


@pytest.mark.parametrize("name", list(ALTERNATIVES))
def test_every_right_answer_passes_the_hidden_tests_too(source_path, tmp_path, name):
    "The lesson's own notebook, hidden tests included, with the other right answer in place of the lesson's."
    lesson = json.loads(source_path.read_text())
    results = visible_results(with_solution(lesson, *ALTERNATIVES[name]), tmp_path)
    failed = {part: error for part, error in results.items() if error is not None}
    assert not failed, f"{name}: a right answer lost points on the hidden tests: {failed}"


@pytest.mark.parametrize("name", list(MISTAKES))
def test_a_wrong_attempt_loses_its_part_and_says_why(solved, tmp_path, name):
    *_, part, words, may_also_fail = MISTAKES[name]
    results = visible_results(mutate(solved, name), tmp_path)
    assert part in results, f"no visible test {part} in the release"
    error = results[part]
    assert error is not None, f"{name}: {part} passed with the wrong code"
    missing = [w for w in words if w not in error]
    assert not missing, f"{name}: the message of {part} lacks {missing}: {error!r}"
    others = {p for p, e in results.items() if e is not None} - {part} - may_also_fail
    assert not others, f"{name}: other parts failed too: { {p: results[p] for p in others} }"


def test_tinytorch_test_shows_the_message(solved, tmp_path):
    "The real student command: the missing √d scaling loses exactly its part, with a message that says why."
    notebook = tmp_path / "11_embeddings.ipynb"
    notebook.write_text(json.dumps(without_demos(mutate(solved, "missing √d scaling"), demo_cells(solved))), encoding="utf-8")
    out = subprocess.run([CLI, "test", "11", "--notebook", notebook], capture_output=True, text=True, timeout=900)
    assert out.returncode == 1, out.stdout + out.stderr
    lines = {line.split()[1]: line for line in out.stdout.splitlines() if line.strip().startswith(("PASS", "FAIL"))}
    failed = [gid for gid, line in lines.items() if line.strip().startswith("FAIL")]
    assert failed == ["test_token_position_embedding"], out.stdout
    assert "AssertionError: scale_embeddings=True multiplies the token rows by √8" in lines[failed[0]], out.stdout
    assert "expected" in lines[failed[0]] and "got" in lines[failed[0]], out.stdout


def test_tinytorch_test_refuses_a_delegation(solved, tmp_path):
    "In the student's own kernel (the whole notebook, as `tinytorch test` runs it) a delegating exercise loses its part."
    notebook = tmp_path / "11_embeddings.ipynb"
    notebook.write_text(json.dumps(without_demos(mutate(solved, "scatter_add_rows delegates to the library"), demo_cells(solved))), encoding="utf-8")
    out = subprocess.run([CLI, "test", "11", "--notebook", notebook], capture_output=True, text=True, timeout=900)
    assert out.returncode == 1, out.stdout + out.stderr
    lines = {line.split()[1]: line for line in out.stdout.splitlines() if line.strip().startswith(("PASS", "FAIL"))}
    failed = [gid for gid, line in lines.items() if line.strip().startswith("FAIL")]
    assert failed == ["test_scatter_add_rows"], out.stdout
    assert "LibraryCodeWithheld: your scatter_add_rows called the library's scatter_add_rows" in lines[failed[0]], out.stdout
