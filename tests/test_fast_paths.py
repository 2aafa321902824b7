"""The engine behind module 11 (row kernels, thread pool) against its plain definitions: sorting, scatter-add, gather, threads."""
import multiprocessing
import os
import re
import threading
import time

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

import tinytorch.core.parallel as P
import tinytorch.core.row_kernels as K
import tinytorch.core.tensor as T
from definitions import dense_reference, one_hot
from tinytorch.core.embeddings import Embedding
from tinytorch.core.parallel import run_parallel, worker_count
from tinytorch.core.profiling import EmbeddingProfiler
from tinytorch.core.row_kernels import (TokenIdError, add_rows_at, gather_rows, lookup_rows, scatter_add_rows,
                                        stable_order)
from tinytorch.core.tensor import RowSparseGrad, Tensor


@pytest.fixture
def threads(monkeypatch, request):
    "Run with `request.param` threads, splitting even tiny inputs (so the threaded code is what runs)."
    monkeypatch.setenv("TINYTORCH_NUM_THREADS", str(request.param))
    monkeypatch.setattr(P, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(K, "_FEW_ROWS", 0)               # and plans the scatter-add even for a few rows
    return request.param


@pytest.fixture(autouse=True)
def no_remembered_plans(monkeypatch):
    "Every test starts with no scatter-add plan remembered from another (some change the planning constants)."
    monkeypatch.setattr(K, "_plans", {})


def loop_reference(base, ids, rows):
    "`base[ids[j]] += rows[j]` one j at a time, in float32: the definition every fast path must match."
    out = base.copy()
    np.add.at(out, ids, rows)              # unbuffered and in index order: a plain loop
    return out


def random_case(rng, num_rows, n, dim, heavy=0):
    ids = rng.integers(0, num_rows, n)
    if heavy:
        ids[rng.choice(n, size=min(n, heavy), replace=False)] = rng.integers(0, num_rows)
    rows = rng.standard_normal((n, dim), dtype=np.float32) * 100
    return ids, rows


# ---------------------------------------------------------------- sorting

@pytest.mark.parametrize("bound", [7, 1 << 16, (1 << 16) + 1, 3_000_000, 1 << 40])
def test_stable_order_is_a_stable_argsort(bound):
    rng = np.random.default_rng(bound % 1000)
    keys = rng.integers(0, min(bound, 50), 5000) * (bound // 50 or 1)      # many ties, wide range
    keys = np.minimum(keys, bound - 1)
    np.testing.assert_array_equal(stable_order(keys, bound), np.argsort(keys, kind="stable"))


# ---------------------------------------------------------------- scatter-add

@pytest.mark.parametrize("threads", [1, 2, 3], indirect=True)
@pytest.mark.parametrize("num_rows, n, heavy", [(9, 200, 0), (9, 200, 120), (50, 3000, 0), (5000, 300, 0),
                                                (5000, 3000, 200), (70_000, 4000, 0)])
@pytest.mark.parametrize("planned", [False, True])
def test_fresh_scatter_add_equals_the_loop_bit_for_bit(threads, num_rows, n, heavy, planned,
                                                       monkeypatch):
    # small tables are gathered in row order, large sparse ones are zeroed and scattered: both run
    # here; planned=False lets a small job with few repeats skip the plan, as outside the tests
    if planned:
        monkeypatch.setattr(K, "_FEW_VALUES", 0)
    ids, rows = random_case(np.random.default_rng(n + heavy), num_rows, n, 5, heavy)
    garbage = np.full((num_rows, 5), np.nan, np.float32)
    out = add_rows_at(garbage, ids, rows, fresh=True)
    assert out is garbage
    np.testing.assert_array_equal(out, loop_reference(np.zeros((num_rows, 5), np.float32), ids, rows))
    np.testing.assert_array_equal(scatter_add_rows(ids, rows, num_rows), out)


def bits(a):
    "The float32 bit patterns of `a`: tells -0.0 from +0.0 (and one NaN from another)."
    return np.ascontiguousarray(a, np.float32).view(np.uint32)


@pytest.mark.parametrize("threads", [1, 2, 3], indirect=True)
@pytest.mark.parametrize("num_rows, n, heavy", [(9, 200, 0), (9, 200, 120), (2000, 3000, 0), (2000, 3000, 400),
                                                (70_000, 4000, 0)])
@pytest.mark.parametrize("planned", [False, True])
def test_fresh_scatter_add_keeps_the_bits_of_a_loop_from_zeros(threads, num_rows, n, heavy, planned,
                                                               monkeypatch):
    # 0 + (-0.0) is +0.0: a sum that starts from zeros never ends as -0.0, in every fresh path
    # (the table filled in row order when most rows are touched, zeroed and scattered otherwise,
    # and a small job with few repeats without a plan)
    if planned:
        monkeypatch.setattr(K, "_FEW_VALUES", 0)
    rng = np.random.default_rng(num_rows + heavy)
    ids, rows = random_case(rng, num_rows, n, 4, heavy)
    rows[rng.random(rows.shape) < 0.3] = -0.0
    rows[rng.random(n) < 0.2] = -0.0                           # whole rows of -0.0, some ids only those
    out = add_rows_at(np.full((num_rows, 4), np.nan, np.float32), ids, rows, fresh=True)
    np.testing.assert_array_equal(bits(out), bits(loop_reference(np.zeros((num_rows, 4), np.float32), ids, rows)))


@pytest.mark.parametrize("threads", [1, 2], indirect=True)
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint32])
def test_fresh_scatter_add_with_small_id_dtypes(threads, dtype, monkeypatch):
    # the row-order fill builds sort keys from the ids: they must not overflow a small id dtype,
    # even with many parts (30 here: the keys reach part 29 x 33 levels)
    monkeypatch.setattr(K, "_FILL_CHUNK_BYTES", 1024)
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 120, 3000).astype(dtype)
    rows = rng.standard_normal((3000, 3), dtype=np.float32)
    out = add_rows_at(np.full((120, 3), np.nan, np.float32), ids, rows, fresh=True)
    np.testing.assert_array_equal(bits(out), bits(loop_reference(np.zeros((120, 3), np.float32), ids.astype(np.int64), rows)))


@pytest.mark.parametrize("threads", [1, 2], indirect=True)
@pytest.mark.parametrize("dtype", [np.float64, np.int32])
def test_scatter_add_keeps_other_table_dtypes(threads, dtype):
    rng = np.random.default_rng(4)
    for num_rows in (50, 60_000):                                        # row-order fill, zero-and-scatter
        ids = rng.integers(0, num_rows, 2000)
        rows = rng.integers(-5, 5, (2000, 2)).astype(dtype)
        out = add_rows_at(np.zeros((num_rows, 2), dtype), ids, rows, fresh=True)
        assert out.dtype == dtype
        np.testing.assert_array_equal(out, loop_reference(np.zeros((num_rows, 2), dtype), ids, rows))


@settings(max_examples=60, deadline=None)
@given(num_rows=st.integers(1, 200), n=st.integers(1, 600), dim=st.integers(1, 5), seed=st.integers(0, 2**16),
       spread=st.sampled_from([1, 2, 5, 1000]), threads=st.sampled_from(["1", "2", "3"]))
def test_fresh_scatter_add_bits_property(num_rows, n, dim, seed, spread, threads):
    # few distinct ids (spread 1, 2, 5: many levels, heavy ids) or many; values with signed zeros and
    # ties; every shape down to one row and one column; the threaded split forced even for tiny input
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, min(num_rows, spread), n) * max(1, num_rows // spread) % num_rows
    rows = rng.choice(np.array([-0.0, 0.0, 1.5, -1.5, 3e-39, 7.25], np.float32), (n, dim))
    rows[:, 0] += rng.standard_normal(n, dtype=np.float32)
    old = os.environ.get("TINYTORCH_NUM_THREADS"), P.PARALLEL_MIN_BYTES, K._FEW_ROWS
    os.environ["TINYTORCH_NUM_THREADS"], P.PARALLEL_MIN_BYTES, K._FEW_ROWS = threads, 1, 0
    try:
        out = add_rows_at(np.full((num_rows, dim), np.nan, np.float32), ids, rows, fresh=True)
    finally:
        if old[0] is None:
            del os.environ["TINYTORCH_NUM_THREADS"]
        else:
            os.environ["TINYTORCH_NUM_THREADS"] = old[0]
        P.PARALLEL_MIN_BYTES, K._FEW_ROWS = old[1], old[2]
    np.testing.assert_array_equal(bits(out), bits(loop_reference(np.zeros((num_rows, dim), np.float32), ids, rows)))


@pytest.mark.parametrize("threads", [1, 2], indirect=True)
@pytest.mark.parametrize("heavy", [0, 300])
def test_accumulating_scatter_add_into_a_nonzero_table(threads, heavy):
    rng = np.random.default_rng(heavy)
    ids, rows = random_case(rng, 400, 1000, 7, heavy)
    base = rng.standard_normal((400, 7), dtype=np.float32)
    out = add_rows_at(base.copy(), ids, rows)
    expected = loop_reference(base, ids, rows)
    if heavy:   # a very frequent id's rows are summed first, then added: the same sum, rounded differently
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-3)
    else:
        np.testing.assert_array_equal(out, expected)
    untouched = np.setdiff1d(np.arange(400), ids)
    np.testing.assert_array_equal(out[untouched], base[untouched])


@pytest.mark.parametrize("fresh", [True, False])
def test_a_few_rows_are_added_without_a_plan_and_exactly(fresh, monkeypatch):
    # up to _FEW_ROWS rows take np.add.at, in order: bit for bit a loop, heavy repeats and -0.0 included
    planned = []
    monkeypatch.setattr(K, "id_runs", lambda *a: planned.append(a) or pytest.fail("planned a few rows"))
    ids = np.array([4, 1, 4, 4, 0] * 6)                                  # 30 rows
    rows = np.random.default_rng(5).standard_normal((30, 3), dtype=np.float32)
    rows[::5] = -0.0
    base = np.zeros((6, 3), np.float32) if fresh else np.arange(18, dtype=np.float32).reshape(6, 3)
    out = add_rows_at(np.full_like(base, np.nan) if fresh else base.copy(), ids, rows, fresh=fresh)
    np.testing.assert_array_equal(bits(out), bits(loop_reference(base, ids, rows)))


@pytest.mark.parametrize("fresh", [True, False])
@pytest.mark.parametrize("skip", [None, 0])
def test_a_mid_size_job_with_few_levels_is_added_without_a_plan_and_exactly(fresh, skip, monkeypatch):
    # 1,024 ids of 256 values into 10k rows (a batch's backward, new ids every step): up to 1 MiB
    # of rows whose ids occur at most _FEW_LEVELS times are added level by level, with no plan
    planned = []
    monkeypatch.setattr(K, "id_runs", lambda *a: planned.append(a) or pytest.fail("planned"))
    rng = np.random.default_rng(11)
    ids = rng.integers(0, 10_000, 1024)
    ids[[3, 50, 700, 1000, 1023]] = ids[0]                               # one id 6 times
    ids[rng.random(1024) < 0.04] = 0                     # padding: skipped, or a heavy id
    rows = rng.standard_normal((1024, 256), dtype=np.float32)
    rows[::7] = -0.0
    base = np.zeros((10_000, 256), np.float32) if fresh else rng.standard_normal(
        (10_000, 256), dtype=np.float32)
    keep = ids != skip
    expected = loop_reference(base, ids[keep], rows[keep])
    out = add_rows_at(np.full_like(base, np.nan) if fresh else base.copy(), ids, rows, fresh=fresh,
                      skip=skip)
    heavy = [0] if skip is None and not fresh else []      # a heavy id's rows are summed first
    np.testing.assert_allclose(out[heavy], expected[heavy], rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(bits(np.delete(out, heavy, 0)), bits(np.delete(expected, heavy, 0)))
    assert not planned and not K._plans


def test_a_mid_size_job_with_an_id_seen_often_is_planned(monkeypatch):
    planned = []
    real_id_runs = K.id_runs
    monkeypatch.setattr(K, "id_runs", lambda *a: planned.append(1) or real_id_runs(*a))
    ids = np.random.default_rng(12).integers(0, 10_000, 1024)
    ids[:K._FEW_LEVELS + 1] = 42                                          # seen once too often
    rows = np.random.default_rng(13).standard_normal((1024, 256), dtype=np.float32)
    out = scatter_add_rows(ids, rows, 10_000)
    np.testing.assert_array_equal(bits(out), bits(loop_reference(np.zeros_like(out), ids, rows)))
    assert planned


@settings(max_examples=40, deadline=None)
@given(num_rows=st.integers(1, 300), n=st.integers(0, 400), dim=st.integers(1, 4), seed=st.integers(0, 2**16),
       fresh=st.booleans())
def test_scatter_add_property(num_rows, n, dim, seed, fresh):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, num_rows, n) if rng.random() < 0.5 else rng.integers(0, min(num_rows, 3), n)
    rows = rng.standard_normal((n, dim), dtype=np.float32)
    old = os.environ.get("TINYTORCH_NUM_THREADS"), P.PARALLEL_MIN_BYTES
    os.environ["TINYTORCH_NUM_THREADS"], P.PARALLEL_MIN_BYTES = "2", 1
    try:
        base = np.zeros((num_rows, dim), np.float32) if fresh else rng.standard_normal((num_rows, dim), dtype=np.float32)
        out = add_rows_at(np.full_like(base, 7.0) if fresh else base.copy(), ids, rows, fresh=fresh)
    finally:
        if old[0] is None:
            del os.environ["TINYTORCH_NUM_THREADS"]
        else:
            os.environ["TINYTORCH_NUM_THREADS"] = old[0]
        P.PARALLEL_MIN_BYTES = old[1]
    np.testing.assert_allclose(out, loop_reference(base, ids, rows), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("threads", [2], indirect=True)
def test_threaded_embedding_backward_equals_single_threaded(threads, monkeypatch):
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 300, (8, 64))
    ids[:, :10] = 3                                          # one heavy id, plus padding rows
    g = rng.standard_normal((8, 64, 16), dtype=np.float32)
    grads = []
    for count in ("2", "1"):
        monkeypatch.setenv("TINYTORCH_NUM_THREADS", count)
        layer = Embedding(300, 16, padding_idx=5, seed=0)
        layer(ids).backward(g)
        grads.append(layer.weight.grad)
    np.testing.assert_array_equal(grads[0], grads[1])
    assert np.all(grads[0][5] == 0)


# ---------------------------------------------------------------- padding: one id left out

def loop_reference_skipping(base, ids, rows, skip):
    "A plain float32 loop that leaves out every occurrence of `skip`."
    out = base.copy()
    for i, r in zip(ids, rows):
        if i != skip:
            out[i] += r
    return out


@pytest.mark.parametrize("threads", [1, 2, 3], indirect=True)
@pytest.mark.parametrize("num_rows, n, skip_count", [(40, 3000, 0), (40, 3000, 5), (40, 3000, 700), (40, 300, 300),
                                                     (9000, 3000, 160), (9000, 20, 7)])
@pytest.mark.parametrize("fresh", [True, False])
def test_scatter_add_leaving_out_the_padding_id_keeps_the_bits_of_a_loop(threads, num_rows, n, skip_count, fresh):
    # the padding id occurring never, a few times, as a heavy id, everywhere; in the row-order fill (40 rows), in
    # the zero-and-scatter path (9000 rows) and below _FEW_ROWS (20 ids); signed zeros; fresh and accumulating
    rng = np.random.default_rng(n + skip_count)
    skip = 3
    ids = rng.integers(0, num_rows, n)
    ids[ids == skip] = skip + 1
    ids[rng.choice(n, skip_count, replace=False)] = skip
    rows = rng.standard_normal((n, 4), dtype=np.float32)
    rows[rng.random(rows.shape) < 0.3] = -0.0
    base = np.zeros((num_rows, 4), np.float32) if fresh else rng.standard_normal((num_rows, 4), dtype=np.float32)
    base[skip] = -0.0 if not fresh else 0
    out = add_rows_at(np.full_like(base, np.nan) if fresh else base.copy(), ids, rows, fresh=fresh, skip=skip)
    expected = loop_reference_skipping(base, ids, rows, skip)
    if fresh or num_rows > 1000:
        np.testing.assert_array_equal(bits(out), bits(expected))
    else:   # 40 rows: every id is heavy, its rows summed first and then added: rounded differently
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-4)
    assert bits(out[skip]).tolist() == bits(base[skip]).tolist(), "the padding row must get nothing"
    assert np.array_equal(bits(scatter_add_rows(ids, rows, num_rows, skip=skip)),
                          bits(loop_reference_skipping(np.zeros_like(base), ids, rows, skip)))


@pytest.mark.parametrize("threads", [1, 2], indirect=True)
def test_row_sums_leaving_out_the_padding_id_equal_the_sums_of_the_other_ids(threads):
    rng = np.random.default_rng(8)
    ids = rng.integers(0, 30, 2000)
    ids[:400] = 0                                                    # the padding id, heavy
    rows = rng.standard_normal((2000, 3), dtype=np.float32)
    unique, summed = K.sum_rows_by_id(ids, rows, skip=0)
    keep = ids != 0
    expected = loop_reference(np.zeros((30, 3), np.float32), ids[keep], rows[keep])
    np.testing.assert_array_equal(unique, np.unique(ids[keep]))
    np.testing.assert_array_equal(bits(summed), bits(expected[unique]))
    unique, summed = K.sum_rows_by_id(np.zeros(5, np.int64), np.ones((5, 3), np.float32), skip=0)
    assert unique.shape == (0,) and summed.shape == (0, 3)


def test_the_padding_id_must_be_a_row_of_the_table():
    table = np.zeros((6, 2), np.float32)
    for skip, err, pattern in [(6, ValueError, r"skip 6 is outside \[0, 6\)"), (-1, ValueError, "skip -1"),
                               (1.0, TypeError, "skip must be a row id"), (True, TypeError, "True")]:
        with pytest.raises(err, match=pattern):
            add_rows_at(table, np.array([0, 1]), np.ones((2, 2), np.float32), skip=skip)
        assert not table.any()
    rows = np.arange(6, dtype=np.float32).reshape(3, 2)                 # a few rows: no plan, the id still left out
    out = add_rows_at(table, np.array([0, 1, 0]), rows, skip=0)
    assert out.tolist() == [[0, 0], [2, 3], [0, 0], [0, 0], [0, 0], [0, 0]]


@pytest.mark.parametrize("num_rows, n, row_bytes", [(10_000, 8192, 1024), (50_000, 32768, 2048), (300, 5000, 64)])
def test_a_filled_table_stages_little_enough_per_part_to_stay_in_cache(num_rows, n, row_bytes):
    "Each part of a row-order fill stages at most ~1 MiB of rows (2 MiB with the first part's head start), in at most 16 parts."
    ids = np.random.default_rng(n).integers(0, num_rows, n)
    plan = K._new_plan(ids, num_rows, row_bytes, True, None, 2)
    assert plan.fill, "most rows are touched: the table is filled in row order"
    staged = np.diff(plan.steps.bounds[::K._LEVELS]) * row_bytes          # bytes of gradient rows staged by each part
    parts = len(staged)
    assert parts <= 16 and parts * K._LEVELS ** 2 <= 1 << 16, f"{parts} parts: too many NumPy calls, a wider sort key"
    if parts < 16:
        assert staged.max() <= 2 << 20, f"a part stages {staged.max() / 2**20:.1f} MiB: more than a core's L2 cache"
    assert staged.sum() <= n * row_bytes and parts >= 2                    # heavy ids are summed apart


@pytest.mark.parametrize("threads", [1, 2], indirect=True)
def test_a_table_filled_in_many_parts_keeps_the_bits_of_a_loop(threads):
    rng = np.random.default_rng(8)
    ids, rows = random_case(rng, 2000, 8192, 256, heavy=100)                 # 8 MiB of rows: 8 parts
    assert len(K._new_plan(ids, 2000, 1024, True, 0, threads).steps.part_starts) - 1 >= 8
    out = add_rows_at(np.full((2000, 256), np.nan, np.float32), ids, rows, fresh=True, skip=0)
    np.testing.assert_array_equal(bits(out), bits(loop_reference_skipping(np.zeros((2000, 256), np.float32), ids, rows, 0)))


# ---------------------------------------------------------------- plans remembered for ids that come again

@pytest.mark.parametrize("threads", [1, 2], indirect=True)
@pytest.mark.parametrize("num_rows", [50, 9000])                   # row-order fill, zero-and-scatter
def test_a_remembered_plan_is_used_only_for_equal_ids(threads, num_rows, monkeypatch):
    monkeypatch.setattr(K, "_FEW_VALUES", 0)                         # planned however small
    planned = []
    real_id_runs = K.id_runs
    monkeypatch.setattr(K, "id_runs", lambda *a: planned.append(1) or real_id_runs(*a))
    rng = np.random.default_rng(num_rows)
    ids, rows = random_case(rng, num_rows, 600, 3)
    def check(ids):
        out = add_rows_at(np.full((num_rows, 3), np.nan, np.float32), ids, rows, fresh=True, skip=1)
        np.testing.assert_array_equal(bits(out), bits(loop_reference_skipping(np.zeros((num_rows, 3), np.float32), ids, rows, 1)))
    check(ids)
    check(ids)
    check(ids.copy())                                                # another array, the same ids: the same plan
    assert len(planned) == 1
    ids[[0, 1]] = ids[[1, 0]] if ids[0] != ids[1] else (ids[0] + 1) % num_rows   # changed in place
    ids[-1] = (ids[-1] + 7) % num_rows
    check(ids)
    assert len(planned) == 2, "ids changed in place must get a new plan"
    check(ids.astype(np.int32))                                      # another id dtype: planned on its own
    out = add_rows_at(np.full((num_rows, 3), np.nan, np.float32), ids, rows, fresh=True)   # no padding id
    np.testing.assert_array_equal(bits(out), bits(loop_reference(np.zeros((num_rows, 3), np.float32), ids, rows)))
    assert len(planned) == 4 and len(K._plans) <= K._PLANS_KEPT


@pytest.mark.parametrize("threads", [2], indirect=True)
def test_an_embedding_called_again_with_mutated_ids_gets_their_gradient(threads):
    # the hot loop: the same ids array, changed in place between two steps
    rng = np.random.default_rng(2)
    layer = Embedding(200, 4, seed=0)
    ids = rng.integers(0, 200, (6, 40))
    g = rng.standard_normal((6, 40, 4), dtype=np.float32)
    for _ in range(3):
        layer.weight.grad = None
        layer(ids).backward(g)
        np.testing.assert_array_equal(bits(layer.weight.grad),
                                      bits(loop_reference(np.zeros((200, 4), np.float32), ids.reshape(-1), g.reshape(-1, 4))))
        ids[rng.integers(0, 6), rng.integers(0, 40)] = rng.integers(0, 200)
        ids[::2] = ids[::2, ::-1].copy()


# ---------------------------------------------------------------- ids as users pass them

@pytest.mark.parametrize("threads", [1, 2], indirect=True)
@pytest.mark.parametrize("kind", ["list of lists", "Tensor", "int32 array"])
def test_kernels_take_ids_the_ways_users_pass_them(threads, kind):
    rng = np.random.default_rng(6)
    ids = rng.integers(0, 70, (5, 60))
    given = {"list of lists": ids.tolist(), "Tensor": Tensor(ids), "int32 array": ids.astype(np.int32)}[kind]
    table = rng.standard_normal((70, 4), dtype=np.float32)
    np.testing.assert_array_equal(lookup_rows(table, given), table[ids])
    np.testing.assert_array_equal(gather_rows(table, given, np.empty((5, 60, 4), np.float32)), table[ids])
    rows = rng.standard_normal((300, 4), dtype=np.float32)
    flat = given if kind != "list of lists" else ids.reshape(-1).tolist()
    flat = flat.reshape(-1) if kind == "Tensor" else flat
    out = add_rows_at(np.full((70, 4), np.nan, np.float32), flat if kind != "int32 array" else given.reshape(-1),
                      rows, fresh=True, skip=2)
    np.testing.assert_array_equal(bits(out), bits(loop_reference_skipping(np.zeros((70, 4), np.float32), ids.reshape(-1), rows, 2)))


@pytest.mark.parametrize("threads", [2], indirect=True)
@pytest.mark.parametrize("kind", ["list of lists", "Tensor"])
@pytest.mark.parametrize("pad", [None, 0])
def test_embedding_takes_ids_the_ways_users_pass_them(threads, kind, pad):
    rng = np.random.default_rng(7)
    ids = rng.integers(0, 90, (4, 50))
    ids[:, -6:] = 0
    g = rng.standard_normal((4, 50, 3), dtype=np.float32)
    grads = []
    for given in (ids, ids.tolist() if kind == "list of lists" else Tensor(ids)):
        layer = Embedding(90, 3, padding_idx=pad, seed=1)
        out = layer(given)
        np.testing.assert_array_equal(out.data, layer.weight.data[ids])
        out.backward(g)
        grads.append(layer.weight.grad)
    np.testing.assert_array_equal(bits(grads[0]), bits(grads[1]))
    expected = loop_reference_skipping(np.zeros((90, 3), np.float32), ids.reshape(-1), g.reshape(-1, 3), pad)
    np.testing.assert_array_equal(bits(grads[1]), bits(expected))


# ---------------------------------------------------------------- gather

def _gather_into_nan(table, ids):
    out = np.full(ids.shape + table.shape[1:], np.nan, table.dtype)
    assert gather_rows(table, ids, out) is out
    return out


@settings(max_examples=200, deadline=None)
@given(n=st.integers(0, 100_000), row_bytes=st.integers(0, 1 << 16), pieces=st.integers(1, 32))
@example(n=1, row_bytes=0, pieces=2).via("fewer rows than slices")
@example(n=8192, row_bytes=1024, pieces=2).via("the 10k lookup")
def test_head_start_cuts_cover_every_row_once_the_first_slice_longest(n, row_bytes, pieces):
    cuts = K._head_start_cuts(n, row_bytes, pieces)
    sizes = np.diff(cuts)
    assert len(cuts) == pieces + 1 and cuts[0] == 0 and cuts[-1] == n and (sizes >= 0).all(), cuts
    rest = sizes[1:]
    if rest.size:                          # the first slice is longer by at most the head start
        assert rest.max() - rest.min() <= 1 and sizes[0] >= rest.max(), cuts
        assert sizes[0] - rest.min() <= K._HEAD_START_BYTES // max(1, row_bytes) + 1, cuts
        assert sizes[0] <= 3 * rest.max() + 2, cuts        # the head start is at most one equal share


@pytest.fixture(params=["piece per thread", "4 pieces per thread"])
def pieces(monkeypatch, request):
    "Cut a threaded gather in one piece per thread (small gathers) or in four (big ones), even for tiny input."
    if request.param == "4 pieces per thread":
        monkeypatch.setattr(K, "_PIECE_BYTES", 1)
    return request.param


@pytest.mark.parametrize("threads", [1, 2, 3], indirect=True)
@pytest.mark.parametrize("shape", [(0,), (1,), (7,), (4, 33), (2, 3, 5)])
@pytest.mark.parametrize("gather", [_gather_into_nan, lookup_rows], ids=["gather_rows", "lookup_rows"])
def test_gathers_equal_fancy_indexing(threads, pieces, shape, gather):
    rng = np.random.default_rng(1)
    table = rng.standard_normal((50, 6), dtype=np.float32)
    ids = rng.integers(0, 50, shape)
    rows = gather(table, ids)
    assert rows.shape == shape + (6,) and rows.dtype == np.float32
    np.testing.assert_array_equal(rows, table[ids])


@pytest.mark.parametrize("threads", [1, 2, 3], indirect=True)
@pytest.mark.parametrize("where", [0, 61, 131])            # in the first, a middle and the last slice
@pytest.mark.parametrize("bad", [-1, 50, 2**40])
def test_lookup_rows_finds_a_bad_id_anywhere(threads, pieces, where, bad):
    table = np.arange(100, dtype=np.float32).reshape(50, 2)
    ids = np.random.default_rng(where).integers(0, 50, 132)
    ids[where] = bad
    with pytest.raises(TokenIdError, match=rf"token id {bad} is out of range: ids must be in \[0, 50\)"):
        lookup_rows(table, ids)
    strided = np.stack([ids, np.zeros_like(ids)], axis=1)[:, 0]          # the same ids, not contiguous
    with pytest.raises(TokenIdError, match=rf"token id {bad} is out of range"):
        lookup_rows(table, strided)


@pytest.mark.parametrize("threads", [2], indirect=True)
def test_lookup_rows_error_comes_from_the_check_even_when_the_gather_meets_the_bad_id_first(threads, monkeypatch):
    check = K.as_token_ids
    def slow_check(ids, vocab_size):
        if vocab_size is not None:
            time.sleep(0.05)                    # the helpers gather every slice before the check ends
        return check(ids, vocab_size)
    monkeypatch.setattr(K, "as_token_ids", slow_check)
    table = np.zeros((50, 2), np.float32)
    with pytest.raises(TokenIdError, match="token id 77 is out of range"):
        lookup_rows(table, np.array([3, 77] * 100))


@pytest.mark.parametrize("threads", [1, 2], indirect=True)
def test_lookup_rows_names_the_first_bad_id_for_every_dtype(threads):
    table = np.zeros((300, 2), np.float32)
    with pytest.raises(TokenIdError, match="token id -7 "):
        lookup_rows(table, np.array([1, -7, 400, 2] * 40))
    # int8 ids and 300 rows: viewed as unsigned, -100 is 156 < 300, so the unsigned max alone would miss it
    with pytest.raises(TokenIdError, match="-100"):
        lookup_rows(table, np.array([5, -100, 7] * 40, np.int8))
    assert lookup_rows(table, np.array([5, 127], np.int8)).shape == (2, 2)
    with pytest.raises(TokenIdError, match=str(2**63 + 5)):
        lookup_rows(table, np.array([2**63 + 5, 1] * 40, np.uint64))
    with pytest.raises(TypeError, match="float64"):
        lookup_rows(table, [1.0, 2.0])


# ---------------------------------------------------------------- threads

def test_worker_count_setting(monkeypatch):
    monkeypatch.setenv("TINYTORCH_NUM_THREADS", "3")
    assert worker_count() == 3
    for bad in ("0", "-2", "two", "1.5"):
        monkeypatch.setenv("TINYTORCH_NUM_THREADS", bad)
        with pytest.raises(ValueError, match=f"TINYTORCH_NUM_THREADS must be a positive integer, got '{bad}'"):
            worker_count()
    monkeypatch.delenv("TINYTORCH_NUM_THREADS")
    assert 1 <= worker_count() <= 8


def _two_threads_meet(barrier: threading.Barrier, i: int):
    "Tasks 0 and 1 wait for each other: they return only if two threads run them at once, however busy the machine."
    if i < 2:
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            raise AssertionError("no second thread took a task within 30 s: everything ran on one thread") from None


@pytest.mark.parametrize("threads", [3], indirect=True)
def test_run_parallel_keeps_order_and_uses_threads(threads):
    barrier = threading.Barrier(2, timeout=30)
    def task(i):
        _two_threads_meet(barrier, i)
        return i * i
    assert run_parallel(task, [(i,) for i in range(12)]) == [i * i for i in range(12)]


@pytest.mark.parametrize("threads", [2], indirect=True)
def test_run_parallel_raises_only_after_running_tasks_finished(threads):
    started, failing, finished = threading.Event(), threading.Event(), []
    def task(i):
        if i == 0:                              # this thread's first task fails while a helper is busy
            assert started.wait(30), "no helper thread took a task"
            failing.set()
            raise RuntimeError("task 0 failed")
        started.set()
        assert failing.wait(30)
        time.sleep(0.5)                         # still running while the error is recorded
        finished.append(i)
    with pytest.raises(RuntimeError, match="task 0 failed"):
        run_parallel(task, [(i,) for i in range(6)])
    assert finished == [1], f"returned before the running task ended, or started tasks after the error: {finished}"


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs a CPU affinity API and two CPUs")
@pytest.mark.parametrize("threads", [2], indirect=True)
def test_helpers_keep_off_the_callers_cpu(threads, monkeypatch):
    allowed = sorted(os.sched_getaffinity(0))
    monkeypatch.setattr(P, "_pool", {})                  # fresh helpers, pinned only in this test's pool
    monkeypatch.setattr(P, "_cpu_now", lambda: allowed[0])
    barrier, seen = threading.Barrier(2, timeout=30), {}
    def task(i):
        _two_threads_meet(barrier, i)
        seen[threading.get_ident()] = os.sched_getaffinity(0)
    run_parallel(task, [(i,) for i in range(2)])
    helper = [cpus for ident, cpus in seen.items() if ident != threading.get_ident()]
    assert helper == [set(allowed[1:])], f"the helper may run on {helper}, the caller was on CPU {allowed[0]}"


def _gather_in_child(queue):
    table = np.arange(20, dtype=np.float32).reshape(10, 2)
    out = np.empty((6, 2), np.float32)
    gather_rows(table, np.array([1, 2, 3, 4, 5, 6]), out)
    seen, barrier = set(), threading.Barrier(2, timeout=30)
    def task(i):
        seen.add(threading.get_ident())
        _two_threads_meet(barrier, i)
    try:
        run_parallel(task, [(i,) for i in range(10)])
    except AssertionError:
        pass                                    # reported below as the number of threads seen
    queue.put((out.tolist(), len(seen)))


def test_threads_work_after_fork(monkeypatch):
    monkeypatch.setenv("TINYTORCH_NUM_THREADS", "2")
    monkeypatch.setattr(P, "PARALLEL_MIN_BYTES", 1)
    run_parallel(lambda i: i, [(0,), (1,)])               # the parent's pool exists before the fork
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_gather_in_child, args=(queue,))
    child.start()
    child.join(timeout=120)
    if child.is_alive():
        child.kill()
        pytest.fail("gather_rows hung in a forked child")
    rows, threads_used = queue.get(timeout=60)
    assert rows == [[2, 3], [4, 5], [6, 7], [8, 9], [10, 11], [12, 13]]
    assert threads_used == 2, "the child ran everything on one thread: the parent's dead helpers were reused"


# ---------------------------------------------------------------- row-sparse gradient hooks

def test_raw_row_sparse_gradient_goes_straight_into_the_dense_array():
    calls = []
    def add_rows(dense, ids, rows, fresh=False):
        calls.append(fresh)
        return add_rows_at(dense, ids, rows, fresh=fresh)
    ids, rows = np.array([3, 1, 3, 3]), np.arange(8, dtype=np.float32).reshape(4, 2)
    raw = RowSparseGrad((5, 2), ids, rows, add_rows=add_rows)
    dense = raw.to_dense()
    assert calls == [True] and raw._coalesced is None
    np.testing.assert_array_equal(dense, loop_reference(np.zeros((5, 2), np.float32), ids, rows))
    base = np.ones((5, 2), np.float32)
    np.testing.assert_array_equal(raw.add_to(base.copy()), loop_reference(base, ids, rows))
    assert calls == [True, False]
    raw.coalesce()                                        # from now on the coalesced pair is used
    np.testing.assert_array_equal(raw.to_dense(), dense)
    assert calls == [True, False]


# ---------------------------------------------------------------- profiler

def test_profiler_reports_gather_and_fresh_output_separately():
    prof = EmbeddingProfiler(repeats=3, warmup=1)
    bw = prof.measure_memory_bandwidth(size_mb=8)
    detail = prof.bandwidth_detail
    assert bw == max(detail["one_thread_gb_s"], detail["all_threads_gb_s"]) and detail["threads"] == worker_count()
    res = prof.measure_lookup_performance(Embedding(1000, 16, seed=0), [4], [32])["batch_4_seq_32"]
    assert res["gather_time_ms"] > 0 and res["gather_gb_per_s"] > 0
    assert res["fresh_output_ms"] == pytest.approx(res["lookup_time_ms"] - res["gather_time_ms"])
    assert res["gather_roofline_fraction"] == pytest.approx(res["gather_gb_per_s"] / res["copy_gb_per_s"])


# ---------------------------------------------------------------- shares of the roof as printed

def fake_side_by_side(medians_ms):
    "Calls each function once and reports the given medians (1 ms for the others): no clock at all."
    def fake(fns, repeats=20, warmup=3, clock=None):
        for fn in fns.values():
            fn()
        return {name: {**dict.fromkeys(("median_ms", "min_ms", "max_ms", "q1_ms", "q3_ms"),
                                       medians_ms.get(name, 1.0)), "repeats": repeats} for name in fns}
    return fake


def shares_printed(text):
    return [int(x) for x in re.findall(r"(\d+)%", text)]


COPY_SLOWER = {"forward": 0.01, "gather": 0.01, "copy": 0.03, "copy, all threads": 0.02}
COPY_FASTER = {"forward": 1.0, "gather": 1.0, "copy": 0.5, "copy, all threads": 0.5}


@pytest.fixture
def small_cache(monkeypatch):
    "A 256 KiB last-level cache: the lesson and the demo size their copies and tables from it."
    import tinytorch.core.profiling as prof
    monkeypatch.setattr(prof, "last_level_cache", lambda *a: {"level": 3, "bytes": 256 << 10})
    return prof


@pytest.mark.parametrize("timings, shares, words", [(COPY_SLOWER, [], 2), (COPY_FASTER, [50, 50], 0)],
                         ids=["copy timed slower than the lookup", "copy twice as fast"])
def test_the_demo_never_prints_a_share_of_the_roof_above_100_percent(small_cache, monkeypatch, timings,
                                                                     shares, words):
    from tinytorch.core.char_model import demo_measures, demo_report
    monkeypatch.setattr(small_cache, "time_side_by_side", fake_side_by_side(timings))
    lines = demo_report(demo_measures("The 3 cats sat on 12 mats. A Dog ate 7 logs! " * 20, steps=8))
    throughput = "\n".join(lines[next(i for i, l in enumerate(lines) if "Throughput" in l):])
    assert shares_printed(throughput) == shares, throughput
    assert throughput.count("at the roof (some rows were cached)") == words, throughput


@pytest.mark.parametrize("timings, shares, cached", [(COPY_SLOWER, [], 18), (COPY_FASTER, [50] * 18, 0)],
                         ids=["copy timed slower than the lookup", "copy twice as fast"])
def test_the_lessons_roofline_table_never_prints_a_share_above_100_percent(small_cache, monkeypatch,
                                                                           capsys, timings, shares, cached):
    import json
    from pathlib import Path
    import matplotlib.pyplot as plt
    cells = json.loads((Path(__file__).parents[1] / "nbs" / "11_embeddings.ipynb").read_text())["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c.get("id") in ("profiler-import-use", "profile-run"))
    monkeypatch.setattr(small_cache, "time_side_by_side", fake_side_by_side(timings))
    exec(compile(code, "section 14", "exec"), {"np": np, "Embedding": Embedding})
    plt.close("all")
    table = capsys.readouterr().out.split("batch×seq", 1)[1]
    assert shares_printed(table) == shares, table
    assert table.count("cached") == cached, table


@pytest.mark.parametrize("threads", [2, 3], indirect=True)
@pytest.mark.parametrize("shape", [(0,), (3, 0), (6, 50), (400,)])
@pytest.mark.parametrize("pad", [None, 2])
def test_threaded_layer_is_the_one_hot_product(threads, shape, pad):
    # forward = one_hot(ids) @ W, backward = one_hot(ids)^T @ g (padding positions left out), with
    # duplicates (vocab 11), every fast path threaded, and empty input
    rng = np.random.default_rng(len(shape))
    layer = Embedding(11, 5, padding_idx=pad, seed=3)
    ids = rng.integers(0, 11, shape)
    out = layer(ids)
    np.testing.assert_allclose(out.data.reshape(-1, 5), one_hot(ids, 11) @ layer.weight.data, rtol=1e-6)
    g = rng.standard_normal(shape + (5,), dtype=np.float32)
    out.backward(g)
    np.testing.assert_allclose(layer.weight.grad, dense_reference(ids, g, 11, pad), rtol=1e-5, atol=1e-5)
    assert layer.weight.grad.dtype == np.float32


@pytest.mark.parametrize("threads", [3], indirect=True)
def test_run_parallel_works_where_threads_cannot_start(threads, monkeypatch):
    class NoThreads:
        def __init__(self, *args, **kwargs):
            pass
        def start(self):
            raise RuntimeError("can't start new thread")
    monkeypatch.setattr(P, "_pool", {})                  # no helpers yet, and none may start
    monkeypatch.setattr(P.threading, "Thread", NoThreads)
    assert run_parallel(lambda i: i + 1, [(i,) for i in range(5)]) == [1, 2, 3, 4, 5]
    table = np.arange(12, dtype=np.float32).reshape(6, 2)
    np.testing.assert_array_equal(gather_rows(table, np.array([5, 0, 5]), np.empty((3, 2), np.float32)), table[[5, 0, 5]])


def test_fast_paths_refuse_bad_input_and_change_nothing():
    table = np.arange(12, dtype=np.float32).reshape(6, 2)
    out = np.full((3, 2), -1, np.float32)
    for ids, err, pattern in [([1, 6, 2], IndexError, "token id 6 is out of range"), ([-1, 0, 0], IndexError, "-1"),
                              ([1.0, 2.0, 0.0], TypeError, "float64")]:
        with pytest.raises(err, match=pattern):
            gather_rows(table, ids, out)
        assert np.all(out == -1), "a refused gather wrote into out"
    for bad_out, err, pattern in [(np.empty((3, 3), np.float32), ValueError, r"shape \(3, 2\)"),
                                  (np.empty((3, 2), np.float64), TypeError, "float64, expected float32"),
                                  (np.empty((2, 3), np.float32).T, ValueError, "C-contiguous")]:
        with pytest.raises(err, match=pattern):
            gather_rows(table, [1, 2, 3], bad_out)
    before = table.copy()
    for ids, rows, err, pattern in [([0, 6], np.ones((2, 2), np.float32), IndexError, "token id 6"),
                                    ([0, 1], np.ones((3, 2), np.float32), ValueError, r"need rows of shape \(2, 2\)"),
                                    ([0, 1], np.ones((2, 2), np.float64), TypeError, "float64, the table float32")]:
        with pytest.raises(err, match=pattern):
            add_rows_at(table, np.array(ids), rows)
        np.testing.assert_array_equal(table, before)


# ---------------------------------------------------------------- padding in the layer: left out, never copied

@pytest.mark.parametrize("threads", [2], indirect=True)
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("kernels", ["library", "lesson"])
def test_padded_embedding_gradient_keeps_the_bits_and_a_zero_padding_row(threads, sparse, kernels):
    from tinytorch.core.embeddings import lesson_kernels, library_kernels
    rng = np.random.default_rng(8)
    ids = rng.integers(0, 120, (6, 50))
    ids[:, -7:] = 0                                           # the padding id at the end of every row
    ids[:, :5] = 9                                            # and one heavy id
    g = rng.standard_normal((6, 50, 4), dtype=np.float32)
    g[:, -7:] = rng.standard_normal((6, 7, 4), dtype=np.float32) * 1e6   # large gradients where the padding is
    layer = Embedding(120, 4, padding_idx=0, seed=3, sparse=sparse,
                      kernels={"library": library_kernels, "lesson": lesson_kernels}[kernels])
    expected = loop_reference_skipping(np.zeros((120, 4), np.float32), ids.reshape(-1), g.reshape(-1, 4), 0)
    layer(ids).backward(g)
    first = layer.weight.grad.to_dense() if sparse else layer.weight.grad
    np.testing.assert_array_equal(bits(first), bits(expected))
    if sparse:
        assert 0 not in layer.weight.grad.indices.tolist(), "the padding id is no row of a row-sparse gradient"
    layer(ids[:2]).backward(g[:2])                            # a second backward accumulates
    grad = layer.weight.grad.to_dense() if sparse else layer.weight.grad
    assert bits(grad[0]).tolist() == [0] * 4, f"the padding row must stay exactly zero, got {grad[0]}"
    second = loop_reference_skipping(np.zeros((120, 4), np.float32), ids[:2].reshape(-1), g[:2].reshape(-1, 4), 0)
    np.testing.assert_allclose(grad, expected + second, rtol=1e-6, atol=1e-4)


class _RecordingKernels:
    "The library's kernels, recording the rows and keyword arguments the backward hands them."
    def __init__(self):
        self.calls = []

    def lookup_rows(self, table, ids):
        return K.lookup_rows(table, ids)

    def sum_rows_by_id(self, ids, rows, **kw):
        self.calls.append((rows, kw))
        return K.sum_rows_by_id(ids, rows, **kw)

    def add_rows_at(self, out, ids, rows, fresh=False, **kw):
        self.calls.append((rows, kw))
        return K.add_rows_at(out, ids, rows, fresh=fresh, **kw)


@pytest.mark.parametrize("sparse", [False, True])
def test_the_padded_backward_hands_the_kernels_the_output_gradient_itself(sparse):
    # leaving the padding out by masking would copy the whole gradient: the kernels leave it out instead
    kern = _RecordingKernels()
    layer = Embedding(30, 4, padding_idx=2, seed=0, sparse=sparse, kernels=kern)
    ids = np.random.default_rng(1).integers(0, 30, (3, 20))
    ids[:, -4:] = 2
    g = np.random.default_rng(2).standard_normal((3, 20, 4), dtype=np.float32)
    layer(ids).backward(g)
    if sparse:
        layer.weight.grad.coalesce()
    (rows, kw), = kern.calls
    assert kw == {"skip": 2}, f"the padding id must reach the kernel as skip=2, got {kw}"
    assert np.shares_memory(rows, g), "the kernel got a copy of the output gradient, not the gradient itself"


# ---------------------------------------------------------------- byte order, and the kernels withheld

@pytest.mark.parametrize("dtype", [">i8", ">u4", ">i2", ">u2", "<i8", "=u8", "|u1", "|i1"])
@pytest.mark.parametrize("sparse", [False, True])
def test_embedding_takes_ids_of_every_byte_order(dtype, sparse):
    "Big-endian ids used to be read through a native unsigned view: the check found no maximum and crashed."
    embed = Embedding(5, 3, seed=0, sparse=sparse)
    ids = np.array([[3, 0, 3]], dtype)
    out = embed(ids)
    assert np.array_equal(out.data, embed.weight.data[[[3, 0, 3]]])
    out.backward(np.ones((1, 3, 3), np.float32))
    grad = embed.weight.grad.to_dense() if sparse else embed.weight.grad
    assert grad[:, 0].tolist() == [1, 0, 0, 2, 0]
    for bad in (5, 100):
        with pytest.raises(TokenIdError, match=f"token id {bad} "):
            embed(np.array([1, bad], dtype))
    if np.dtype(dtype).kind == "i":
        with pytest.raises(TokenIdError, match="token id -1 "):
            embed(np.array([2, -1], dtype))


@pytest.mark.parametrize("kernel, call", [
    ("lookup_rows", lambda: lookup_rows(np.eye(4, dtype=np.float32), [1, 2])),
    ("gather_rows", lambda: gather_rows(np.eye(4, dtype=np.float32), [1], np.empty((1, 4), np.float32))),
    ("scatter_add_rows", lambda: scatter_add_rows(np.array([1, 1]), np.ones((2, 3), np.float32), 4)),
    ("add_rows_at", lambda: add_rows_at(np.zeros((4, 3), np.float32), np.array([1]), np.ones((1, 3), np.float32))),
    ("sum_rows_by_id", lambda: K.sum_rows_by_id(np.array([1, 1]), np.ones((2, 3), np.float32))),
    ("as_token_ids", lambda: K.as_token_ids([1], 4)),
    ("stable_order", lambda: stable_order(np.array([2, 1]), 4)),
])
def test_every_kernel_refuses_while_withheld_and_works_after(kernel, call):
    with K.withheld("my_exercise"):
        with pytest.raises(K.LibraryKernelWithheld, match=f"your my_exercise called the library's {kernel} "):
            call()
    call()                                    # the block is over: the fast path is back


def test_a_layer_outside_the_block_keeps_the_fast_path():
    embed = Embedding(6, 2, seed=0)
    with K.withheld("x"):
        with pytest.raises(K.LibraryKernelWithheld):
            embed([1])
    assert T._withheld_for is None            # module 01 holds the switch
    embed([1]).backward(np.ones((1, 2), np.float32))
    assert embed.weight.grad[1].tolist() == [1, 1]


# ---------------------------------------------------------------- a busy machine

def _with_a_held_up_slice(monkeypatch, which):
    "Make a threaded lookup act as if a helper were held up in task `which` ('last slice', 'check')."
    real = K.run_parallel
    def held_up(fn, tasks, threads=None, **options):
        assert options.get("give_up"), "lookup_rows waited for every helper"
        held = len(tasks) - 1 if which == "check" else len(tasks) - 2
        def not_run(*task):                          # that task never runs: its rows stay garbage
            return None if task == tasks[held] else fn(*task)
        results = real(not_run, tasks, threads, **options)
        results[held] = P.UNFINISHED
        return results
    monkeypatch.setattr(K, "run_parallel", held_up)


@pytest.mark.parametrize("threads", [2], indirect=True)
@pytest.mark.parametrize("which", ["last slice", "check"])
def test_lookup_rows_does_not_wait_for_a_held_up_helper(threads, which, monkeypatch):
    table = np.random.default_rng(0).standard_normal((50, 3), dtype=np.float32)
    ids = np.random.default_rng(1).integers(0, 50, (4, 60))
    _with_a_held_up_slice(monkeypatch, which)
    np.testing.assert_array_equal(lookup_rows(table, ids), table[ids])
    ids[2, 7] = 50
    with pytest.raises(TokenIdError, match=r"token id 50 is out of range: .* \[0, 50\)"):
        lookup_rows(table, ids)


@pytest.mark.parametrize("threads", [2], indirect=True)
def test_a_held_up_helper_writes_only_into_rows_nobody_reads(threads, monkeypatch):
    table = np.arange(200, dtype=np.float32).reshape(50, 4)
    ids = np.arange(50)[::-1].copy()
    writes = []
    real = K.run_parallel
    def late_writer(fn, tasks, threads=None, **options):
        results = real(fn, tasks, threads, **options)
        a, b = tasks[len(tasks) - 2]             # the last slice: written after the return
        results[len(tasks) - 2] = P.UNFINISHED
        writes.append(lambda out: out.reshape(-1, 4)[a:b].fill(-1))
        return results
    monkeypatch.setattr(K, "run_parallel", late_writer)
    seen = {}
    real_empty = np.empty
    def remember_first(*args, **kwargs):
        arr = real_empty(*args, **kwargs)
        seen.setdefault("first", arr)
        return arr
    monkeypatch.setattr(K.np, "empty", remember_first)
    rows = lookup_rows(table, ids)
    monkeypatch.setattr(K.np, "empty", real_empty)
    writes[0](seen["first"])                              # the late helper's write lands now
    assert rows is not seen["first"]
    np.testing.assert_array_equal(rows, table[ids])


@pytest.mark.skipif(not os.path.exists("/proc/loadavg"), reason="no /proc/loadavg")
def test_the_machine_is_read_without_opening_a_file_each_time(monkeypatch):
    # a lookup that runs on one thread all the same pays for every reading: one pread, no open
    monkeypatch.setattr(P, "_pool", {})
    opened, real_open = [], os.open
    monkeypatch.setattr(P.os, "open", lambda *a, **k: opened.append(a) or real_open(*a, **k))
    readings = [P._read_running() for _ in range(3)]
    assert all(isinstance(r, int) and r >= 0 for r in readings), readings
    assert len(opened) == 1, opened
    os.close(P._pool["loadavg"])


@pytest.mark.parametrize("threads", [1, 2], indirect=True)
@pytest.mark.parametrize("kernels", ["library", "lesson"])
def test_zero_grad_reuses_the_dense_gradient_and_keeps_its_bits(threads, kernels):
    # a training loop's steps: the optimizer's zero_grad, then a backward into the same array (no
    # fresh memory to map), every step's gradient the loop's bits with the padding row zero
    import weakref
    from tinytorch.core.embeddings import lesson_kernels, library_kernels
    from tinytorch.core.nn import SGD
    rng = np.random.default_rng(11)
    layer = Embedding(300, 4, padding_idx=0, seed=2,
                      kernels={"library": library_kernels, "lesson": lesson_kernels}[kernels])
    optimizer, previous = SGD(layer.parameters, lr=0.1), None
    for step in range(3):
        ids = rng.integers(0, 300, (5, 40))
        ids[:, -3:] = 0
        g = rng.standard_normal((5, 40, 4), dtype=np.float32)
        optimizer.zero_grad()
        layer(ids).backward(g)
        expected = loop_reference_skipping(np.zeros((300, 4), np.float32), ids.reshape(-1),
                                           g.reshape(-1, 4), 0)
        np.testing.assert_array_equal(bits(layer.weight.grad), bits(expected))
        if previous is not None:
            assert previous() is layer.weight.grad, f"step {step}: not written into the kept array"
        previous = weakref.ref(layer.weight.grad)
        optimizer.step()


@pytest.mark.parametrize("threads", [2], indirect=True)
def test_helpers_let_go_of_a_finished_calls_arrays(threads):
    # a helper thread waiting for work holds nothing of the last call: a table the caller dropped
    # is freed (and the gradient array zero_grad kept is unshared, so the next backward reuses it)
    import weakref
    table, workers = np.zeros((1000, 8), np.float32), set()
    def task(rows, i):
        workers.add(threading.get_ident())
        time.sleep(0.001)                                   # long enough for a helper to join in
    for _ in range(200):
        run_parallel(task, [(table, i) for i in range(8)])
        if len(workers) > 1:
            break
    assert len(workers) > 1, "no helper thread took a task"
    alive = weakref.ref(table)
    del table
    for _ in range(3000):                                   # the helper may still be finishing up
        if alive() is None:
            break
        time.sleep(0.01)
    assert alive() is None, "a helper thread still holds the finished call's array"


def test_a_table_written_again_is_not_counted_as_new_memory(monkeypatch):
    # a fresh table in new memory counts its whole size toward sharing the work on a busy machine
    # (its pages are mapped as they are first written); the same array written again (the gradient
    # zero_grad kept) has no page left to map: only the rows count
    moved, real = [], K.parts_for
    monkeypatch.setattr(K, "parts_for", lambda n, nbytes, m=None: moved.append(m) or real(n, nbytes, m))
    monkeypatch.setattr(K, "_FEW_VALUES", 0)                    # planned, as a large job is
    ids, rows = random_case(np.random.default_rng(5), 5000, 3000, 8)
    table = np.empty((5000, 8), np.float32)
    add_rows_at(table, ids, rows, fresh=True)
    first = table.copy()
    table[:] = np.nan                                           # garbage again
    add_rows_at(table, ids, rows, fresh=True)
    np.testing.assert_array_equal(bits(table), bits(first))
    assert moved == [5000 * 8 * 4, None], moved


def test_a_shared_scatter_add_is_timed_alone_first_as_a_lookup_is(monkeypatch):
    # the same plan on the calling thread alone, for the first calls (their time is kept), then
    # shared: whether sharing pays is measured, not assumed; the bits are the same either way
    used = []
    real = K.run_parallel
    monkeypatch.setattr(K, "run_parallel", lambda fn, tasks, threads=None, **kw:
                        used.append(threads) or real(fn, tasks, threads, **kw))
    monkeypatch.setattr(K, "parts_for", lambda n, nbytes, moved=None: 2)
    monkeypatch.setattr(K, "_FEW_VALUES", 0)
    monkeypatch.setattr(P, "_timings", {})
    monkeypatch.setitem(P._pool, "solo", 0)
    monkeypatch.delenv("TINYTORCH_NUM_THREADS", raising=False)   # a count set is the count used
    ids, rows = random_case(np.random.default_rng(9), 5000, 3000, 8)
    expected = loop_reference(np.zeros((5000, 8), np.float32), ids, rows)
    for _ in range(3):
        out = add_rows_at(np.full((5000, 8), np.nan, np.float32), ids, rows, fresh=True)
        np.testing.assert_array_equal(bits(out), bits(expected))
    assert used[:2] == [1, 1] and used[2] in (1, 2), used
