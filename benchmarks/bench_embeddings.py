"""Benchmark module 11's embedding fast paths against PyTorch (CPU), side by side in one run.

Usage: python benchmarks/bench_embeddings.py [--quick] [--repeats 25] [--hot-rounds 40] [--configs 10k,50k,100k]
                                            [--no-torch] [--torch-huge-pages] [--no-details]

First, the targets, in two regimes, each a side-by-side race (every round runs ours and torch once,
in a new random order, untimed set-up before each call; medians):
  hot   a training loop's view: the same ids and output gradient every call, table and ids warm in
        cache, nothing between the calls but the other framework's call
  cold  a 256 MiB copy (untimed) right before every call: caches flushed, as after other work
and three operations per configuration, each checked against its target (ours / torch <= 1.0):
  forward             Embedding.forward incl. id validation, no graph  vs  F.embedding under no_grad
  fwd + dense bwd     forward, then backward into a fresh dense (vocab, dim) gradient  vs  the same in torch
  fwd + sparse bwd    the same with sparse=True: our lazy row-sparse gradient  vs  torch's uncoalesced COO
each without and with padding_idx=0, on padded batches (the last 5 ids of every sequence are the padding
id 0, as in a batch of sentences of different lengths), ids given as a NumPy array. Then the same
operations in the hot regime with padding, ids given as a Tensor (torch: a torch tensor) and as a list
of lists (both frameworks convert it inside the timed call: torch.tensor(ids) for torch).
plus the fixed cost of one call (1 id: forward on the 10k table; forward + dense backward on a
64 x 256 table, so that no big zero table hides the fixed cost), hot, many rounds. The dense gradient
is asserted bit-equal (float32 bit patterns) to torch's in every configuration, with and without padding. Each target prints
PASS or MISS (from the ratio of the medians), then the middle half (25-75%) of the ratios ours / torch
taken round by round (the two calls of one round run back to back, so a busy spell of the machine
moves both: when that range reaches below the target, a MISS is within the race's noise), and the
median minor page faults of one call of each (fresh memory mapped page by page as it is first written:
glibc's malloc hands out new pages or reuses freed ones depending on what was freed before, so a
framework's faults, and its time, can change from one race to the next). The load average is printed
with every target and at the start and the end (other work on the machine moves every number).
--quick: fewer rounds and no details, for development.
--torch-huge-pages sets THP_MEM_ALLOC_ENABLE=1 before torch loads: its allocator then asks for
transparent huge pages as NumPy already does for large arrays (the stretch comparison).

Then the details (skipped with --quick or --no-details):

for each configuration (vocab, dim, ids), as medians of interleaved repeats (every round runs each
contender once, in a new random order; each call gets a fresh batch of ids from a small pool):
  forward      Embedding.forward incl. id validation  vs  torch.nn.functional.embedding
  gather       gather_rows (checks the ids first) into a reused output  vs  torch.index_select(..., out=)
  validation   what checking the ids adds to the forward's lookup: lookup_rows (which checks the ids
               while the helper threads start gathering) minus gather_rows(checked=True) into a new
               array, paired per round over many rounds; also as_token_ids timed alone, as a pass of
               its own before the lookup would cost (it then also pays for bringing NumPy's code
               and the ids back into cache after the previous lookup)
  bwd dense    out.backward(g) into a dense (vocab, dim) gradient  vs  torch's embedding backward
               (the same ids every call: from the second call on, the scatter-add's plan is remembered)
  step, new ids  forward + dense backward on the next batch of the pool each call, so that no plan
               is remembered (what a training loop over new batches pays)
  bwd sparse   sparse=True: out.backward(g), lazily row-sparse  vs  torch sparse=True (uncoalesced)
  +coalesce    the same followed by summing duplicate ids  vs  torch's .coalesce()
  sin. add     sinusoidal positions added in place (inplace=True)  vs  torch's x + pe[:S]
  train step   token+position layer: forward, backward, SGD step; peak extra memory by tracemalloc
Both frameworks run under their no-grad mode for forward and the positional add. Lookups report
GB/s (rows read + output written + ids read) and the fraction of this machine's copy bandwidth.
For the forward and the gather that bandwidth is measured in the same rounds as they are (np.copyto
on 256 MiB, one thread and all threads, the better of the two), since a shared machine's bandwidth
drifts by 20% or more over a run; other rows use the bandwidth measured once at the start
(EmbeddingProfiler.measure_memory_bandwidth: np.copyto on 256 MiB, read + write, the better of one
thread and all threads). Prints one table and writes JSON to benchmarks/results/.
PyTorch is optional: without it only our numbers are printed.

The grid (--grid, --grid-only; --load idle,busy) races each comparison on its own, paired: ours
against NumPy's checked table[ids] (forward), torch, our one-thread path, and ours against itself
(the A/A control), the two contenders alternating call by call (A, B, A, B, ... in rounds of 4
pairs, B first in every other round), so that both see the same moments of the machine. The ratio
is the median of the per-pair ratios, with their middle half; each contender's median time beside
it. On a loaded machine a call either keeps its core or loses it for a time slice, so the times of
one contender fall into two groups, and the median of a few dozen calls per contender lands in one
or the other: two independent medians of the same code differed by up to 2.9x, while a pair's two
calls, back to back, mostly share their fate. The A/A control shows what the method reports for
no difference at all: it must come out at 1.00 within its spread, idle and busy.

Why a random order: a kernel timed right after the other framework's pays for the cores and
caches that one left behind. Measured on the 2-core machine (10k forward, 150 rounds): ours took
1.46-1.57 ms after ours but 1.68-1.82 ms right after torch; torch took 1.31-1.49 ms after torch
and 1.43-1.58 ms after ours. A fixed order (ours, torch, ours, ...) always timed ours right after
torch: 1.13-1.23x where the random order gave 1.05x for the same code.

OMP_WAIT_POLICY=PASSIVE is set for the run (before torch loads) unless already set: by default
PyTorch's OpenMP workers busy-wait for a few milliseconds after each call, which takes a core away
from whatever runs next — here our own two-thread kernels, timed right after torch. Measured on
the 2-core machine (interleaved, 10k config, gather into a reused output): ours 2.7-3.0 ms under
the default policy, 1.7 ms under PASSIVE; torch 1.4-1.6 ms under both. Pass --omp-wait-policy
ACTIVE (or set the variable yourself) to reproduce the biased comparison.
"""
import argparse
import contextlib
import gc
import itertools
import json
import os
import platform
import resource
import time
import sys
import tracemalloc
from pathlib import Path

import numpy as np

from tinytorch.core.embeddings import Embedding, PositionalEncoding, TokenPositionEmbedding, sinusoidal_table
from tinytorch.core.profiling import EmbeddingProfiler, lookup_bytes, copy_functions
from tinytorch.core.row_kernels import TokenIdError, as_token_ids, gather_rows, lookup_rows
from tinytorch.core.nn import SGD
from tinytorch.core.tensor import Tensor, no_grad

torch = F = None    # PyTorch is a reference peer, never a dependency: load_torch() imports it if present


def load_torch(wait_policy=None, huge_pages=False):
    """Import torch after setting OMP_WAIT_POLICY (its OpenMP runtime reads it once, at load) and, with
    `huge_pages`, THP_MEM_ALLOC_ENABLE=1 (its allocator reads it at load too). False if absent."""
    global torch, F
    if wait_policy:
        os.environ["OMP_WAIT_POLICY"] = wait_policy
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if huge_pages:
        os.environ["THP_MEM_ALLOC_ENABLE"] = "1"
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return False
    return True

CONFIGS = {"10k": (10_000, 256, (32, 256)), "50k": (50_000, 512, (64, 512)), "100k": (100_000, 1024, (8, 2048))}
POOL = 4            # distinct id batches per configuration, used in turn
PAD_ID, PAD_TAIL = 0, 5     # in the target races, the last 5 ids of every sequence are the padding id 0
ID_FORMS = ("array", "Tensor", "list")


def padded_ids(rng, vocab, shape):
    "Random ids in [1, vocab) whose last PAD_TAIL positions in every sequence are PAD_ID."
    ids = rng.integers(1, vocab, shape)
    ids[..., -PAD_TAIL:] = PAD_ID
    return ids


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


ORDER = np.random.default_rng(12345)      # the order of the contenders within each round


def minor_faults():
    "Minor page faults of this process so far (all threads): each is a page of fresh memory mapped on first touch."
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def interleaved_samples(fns, repeats, warmup=2, setup=None, faults=None):
    """ms of every timed call of each function in `fns` (a dict), in rounds that run each function
    once, in a new random order. `setup(name)` runs untimed before each call. With a dict `faults`,
    `faults[name]` gets the minor page faults of every timed call (counted outside the timed span)."""
    samples, names = {name: [] for name in fns}, list(fns)
    for i in range(warmup + repeats):
        ORDER.shuffle(names)
        for name in names:
            if setup:
                setup(name)
            before = minor_faults() if faults is not None else 0
            t = timed(fns[name])
            if i >= warmup:
                samples[name].append(t * 1e3)
                if faults is not None:
                    faults.setdefault(name, []).append(minor_faults() - before)
    return samples


def interleaved(fns, repeats, warmup=2, setup=None):
    "Median ms of each function in `fns`, timed as `interleaved_samples` says."
    return {name: float(np.median(s)) for name, s in interleaved_samples(fns, repeats, warmup, setup).items()}


def cycle(items):
    state = {"i": 0}
    def next_item():
        state["i"] = (state["i"] + 1) % len(items)
        return items[state["i"]]
    return next_item


COPY = {}                                 # 256 MiB source and destination for the side-by-side copy


def copy_contenders():
    "Two functions to time next to a lookup: np.copyto of 256 MiB on one thread and on all threads."
    if not COPY:
        COPY["src"], COPY["dst"] = np.ones(2**26, np.float32), np.zeros(2**26, np.float32)   # written: no page faults
    return {"copy, " + who: fn for who, fn in copy_functions(COPY["src"], COPY["dst"]).items()}


def side_by_side_bandwidth(t):
    "GB/s of the better copy timed in the same rounds (`t` holds their median ms)."
    return 2 * COPY["src"].nbytes / (min(t["copy, one thread"], t["copy, all threads"]) / 1e3) / 1e9


TARGETS = {"forward": 1.0, "fwd + dense bwd": 1.0, "fwd + sparse bwd": 1.0}   # ours / torch at most


def flush_caches():
    "A 256 MiB copy (untimed): whatever the next call reads comes from memory again."
    copy_contenders()
    np.copyto(COPY["dst"], COPY["src"])


class Race(dict):
    """Median ms of each contender (the dict), plus `.samples` (ms of every call, by round), `.faults`
    (median minor page faults per call) and `.paired` (ours / torch within each round, when both ran)."""


def race(fns, rounds, setup=None, cold=False):
    "A `Race` of `fns`: one call each per round in a random order; `setup(name)` and, cold, a flush before every call."
    def before(name):
        if setup:
            setup(name)
        if cold:
            flush_caches()
    faults = {}
    samples = interleaved_samples(fns, rounds, setup=before, faults=faults)
    result = Race({name: float(np.median(s)) for name, s in samples.items()})
    result.samples, result.faults = samples, {name: float(np.median(f)) for name, f in faults.items()}
    result.paired = np.divide(samples["ours"], samples["torch"]) if "torch" in samples else None
    return result


def same_bits(a, b):
    "True if two float32 arrays hold the same bit patterns (tells -0.0 from +0.0)."
    return a.shape == b.shape and np.array_equal(np.ascontiguousarray(a).view(np.uint32), np.ascontiguousarray(b).view(np.uint32))


def step_contenders(layer, ids, grad, use_torch, form="array"):
    """{operation: {"ours": fn, "torch": fn}} for the forward (no graph), forward + dense backward and
    forward + sparse backward of `layer` on `ids` given as `form` (torch on a copy of the same table,
    with the same padding_idx), and a set-up function that forgets both gradients."""
    ours_ids = {"array": ids, "Tensor": Tensor(ids), "list": ids.tolist()}[form]

    def ours_forward():
        with no_grad():
            layer.forward(ours_ids)

    def ours_step():
        layer.forward(ours_ids).backward(grad)

    fns = {"forward": {"ours": ours_forward}, "fwd + dense bwd": {"ours": ours_step}, "fwd + sparse bwd": {"ours": ours_step}}
    if use_torch:
        t_table, t_grad, pad = torch.from_numpy(layer.weight.data), torch.from_numpy(grad), layer.padding_idx
        tw = t_table.clone().requires_grad_(True)
        listed = ours_ids if form == "list" else None
        t_ids = torch.from_numpy(ids)
        torch_ids = (lambda: torch.tensor(listed)) if listed is not None else (lambda: t_ids)

        def torch_forward():
            with torch.no_grad():
                F.embedding(torch_ids(), t_table, padding_idx=pad)
        fns["forward"]["torch"] = torch_forward
        fns["fwd + dense bwd"]["torch"] = lambda: F.embedding(torch_ids(), tw, padding_idx=pad).backward(t_grad)
        fns["fwd + sparse bwd"]["torch"] = lambda: F.embedding(torch_ids(), tw, padding_idx=pad, sparse=True).backward(t_grad)

    def forget_grads(who=None):
        layer.weight.zero_grad()       # as an optimizer's zero_grad: the dense array is reused
        if use_torch:
            tw.grad = None
    forget_grads.torch_grad = lambda: tw.grad.numpy()
    return fns, forget_grads


def bench_targets(name, vocab, dim, shape, hot_rounds, cold_rounds, use_torch, pad=None, form="array", regimes=("hot", "cold")):
    """The three target operations (see the module docstring) on padded batches, with `padding_idx=pad`,
    ids given as `form`; the same ids and output gradient every call. Asserts that the dense and the
    densified sparse gradients are bit-equal to torch's."""
    rng = np.random.default_rng(0)
    layer = Embedding(vocab, dim, seed=0, padding_idx=pad)
    ids = padded_ids(rng, vocab, shape)
    grad = rng.standard_normal(shape + (dim,), dtype=np.float32)
    fns, forget_grads = step_contenders(layer, ids, grad, use_torch, form)
    rows = []
    for op, contenders in fns.items():
        layer.sparse = op == "fwd + sparse bwd"
        for regime in regimes:
            rounds = hot_rounds if regime == "hot" else cold_rounds
            t = race(contenders, rounds, None if op == "forward" else forget_grads, cold=regime == "cold")
            ratio = t["ours"] / t["torch"] if use_torch else None
            paired = None if t.paired is None else [float(q) for q in np.percentile(t.paired, [25, 75])]
            rows.append({"config": name, "vocab": vocab, "dim": dim, "ids": list(shape), "padding_idx": pad,
                         "ids_as": form, "regime": regime, "op": op,
                         "rounds": rounds, "ours_ms": t["ours"], "torch_ms": t.get("torch"), "ratio": ratio,
                         "target": TARGETS[op], "met": None if ratio is None else ratio <= TARGETS[op],
                         "paired_ratio_iqr": paired, "ours_faults": t.faults["ours"],
                         "torch_faults": t.faults.get("torch"), "load": os.getloadavg()[0]})
    dense = {}
    for sparse in (False, True):
        layer.sparse = sparse
        forget_grads()
        for contender in fns["fwd + dense bwd"].values():
            contender()
        dense[sparse] = layer.weight.grad if not sparse else layer.weight.grad.to_dense()
    assert same_bits(dense[False], dense[True]), f"{name}, padding_idx={pad}: the sparse gradient differs from the dense one"
    if use_torch:
        assert same_bits(dense[False], forget_grads.torch_grad()), f"{name}, padding_idx={pad}, ids as {form}: dense gradients differ from PyTorch's"
    layer.sparse = False
    forget_grads()
    return rows


def bench_fixed_cost(rounds, use_torch):
    """What one call costs when it has almost nothing to do (1 id), hot: forward on a 10k x 256 table,
    forward + dense backward on a 64 x 256 table (a big table's zero-fill would hide the fixed cost)."""
    one, g1 = np.array([[7]]), np.ones((1, 1, 256), np.float32)
    big, _ = step_contenders(Embedding(10_000, 256, seed=0), one, g1, use_torch)
    small, forget_grads = step_contenders(Embedding(64, 256, seed=0), one, g1, use_torch)
    rows = []
    for op, fns in (("1 id: forward", big["forward"]), ("1 id: fwd + dense bwd", small["fwd + dense bwd"])):
        t = race(fns, rounds, forget_grads)
        rows.append({"op": op, "rounds": rounds, "ours_us": 1e3 * t["ours"],
                     "torch_us": 1e3 * t["torch"] if use_torch else None, "load": os.getloadavg()[0]})
    return rows


def print_targets(rows, fixed):
    """The target table: medians and their ratio (what PASS / MISS judges), the middle half of the
    per-round ratios (a MISS whose range reaches below the target is a coin toss at this many rounds)
    and the median page faults of one call of each (fresh memory mapped on first touch)."""
    print(f"| {'config':<6} | {'pad':<4} | {'ids as':<6} | {'regime':<6} | {'target operation':<17} | {'ours ms':>8} | {'torch ms':>8} | {'ratio':>6} | target | result | "
          f"{'per round':<11} | {'faults':<11} | load")
    print("|--------|------|--------|--------|-------------------|----------|----------|--------|--------|--------|-------------|-------------|-----")
    for r in rows:
        torch_ms = f"{r['torch_ms']:8.3f}" if r["torch_ms"] is not None else f"{'-':>8}"
        ratio = f"{r['ratio']:5.2f}x" if r["ratio"] is not None else f"{'-':>6}"
        result = "-" if r["met"] is None else "PASS" if r["met"] else "MISS"
        pad = "-" if r["padding_idx"] is None else str(r["padding_idx"])
        iqr = f"{r['paired_ratio_iqr'][0]:.2f}-{r['paired_ratio_iqr'][1]:.2f}" if r.get("paired_ratio_iqr") else "-"
        faults = f"{r['ours_faults']:.0f}" + (f" / {r['torch_faults']:.0f}" if r.get("torch_faults") is not None else "")
        print(f"| {r['config']:<6} | {pad:<4} | {r['ids_as']:<6} | {r['regime']:<6} | {r['op']:<17} | {r['ours_ms']:8.3f} | {torch_ms} | {ratio} | "
              f"<= {r['target']:.1f} | {result:<6} | {iqr:<11} | {faults:<11} | {r['load']:.2f}")
    for r in fixed:
        theirs = f"torch {r['torch_us']:.1f} us, ratio {r['ours_us'] / r['torch_us']:.2f}x" if r["torch_us"] else "torch -"
        print(f"fixed cost, {r['op']}: ours {r['ours_us']:.1f} us, {theirs} (hot, median of {r['rounds']}, load {r['load']:.2f})")
    missed = [f"{r['config']} pad {r['padding_idx']} {r['ids_as']} {r['regime']} {r['op']} ({r['ratio']:.2f}x)"
              for r in rows if r["met"] is False]
    if any(r["met"] is not None for r in rows):
        print("all targets met" if not missed else f"MISSED {len(missed)} of {len(rows)}: " + "; ".join(missed))
    if rows and rows[0]["torch_ms"] is not None:
        print("dense gradients bit-equal to PyTorch's in every configuration, with and without padding_idx")


def bench_config(name, vocab, dim, shape, repeats, bandwidth, use_torch):
    rng = np.random.default_rng(0)
    layer = Embedding(vocab, dim, seed=0)
    table = layer.weight.data
    n = int(np.prod(shape))
    pool = [rng.integers(0, vocab, shape) for _ in range(POOL)]
    grad = rng.standard_normal(shape + (dim,), dtype=np.float32)
    rows = []

    def row(op, ours, theirs=None, moved=None, note="", copy_gb_s=None):
        r = {"config": name, "vocab": vocab, "dim": dim, "ids": list(shape), "op": op, "ours_ms": ours,
             "torch_ms": theirs, "ratio": None if theirs is None else ours / theirs, "note": note}
        if moved is not None:
            r["gb_per_s"] = moved / (ours / 1e3) / 1e9
            r["copy_gb_per_s"] = copy_gb_s or bandwidth
            r["roofline_fraction"] = r["gb_per_s"] / r["copy_gb_per_s"]
        rows.append(r)

    if use_torch:
        t_table = torch.from_numpy(table)             # the same memory: both read the same table
        t_pool = [torch.from_numpy(ids) for ids in pool]
        t_grad = torch.from_numpy(grad)

    # ---- forward (incl. validation); a separate validation pass for comparison
    ours_ids, torch_ids = cycle(pool), cycle(t_pool) if use_torch else None
    fns = {"ours": lambda: layer.forward(ours_ids()), "validate": lambda: as_token_ids(ours_ids(), vocab),
           **copy_contenders()}
    if use_torch:
        fns["torch"] = lambda: F.embedding(torch_ids(), t_table)
    with no_grad():
        if use_torch:
            with torch.no_grad():
                t = interleaved(fns, repeats)
        else:
            t = interleaved(fns, repeats)
    moved = lookup_bytes(n, dim, table.itemsize, pool[0].itemsize)
    copy_gb_s = side_by_side_bandwidth(t)
    row("forward", t["ours"], t.get("torch"), moved, copy_gb_s=copy_gb_s,
        note=f"new output each call; copy {copy_gb_s:.1f} GB/s in the same rounds")

    # ---- what the check adds: the same lookup with and without it, paired per round
    def unchecked():
        ids = ours_ids()
        return gather_rows(table, ids, np.empty(ids.shape + (dim,), table.dtype), checked=True)
    # the difference is small next to the noise: as many rounds as fit in about 3 s (200 to 2000)
    rounds = int(min(2000, max(200, 8 * repeats, 3000 / (2 * t["ours"]))))
    s = interleaved_samples({"checked": lambda: lookup_rows(table, ours_ids()), "unchecked": unchecked}, rounds)
    added = float(np.median(np.subtract(s["checked"], s["unchecked"])))
    row("validation", added, None, note=f"{100 * added / t['ours']:.1f}% of our forward (median of {rounds} "
        f"paired differences); timed alone {t['validate']:.3f} ms = {100 * t['validate'] / t['ours']:.1f}%")
    rows[-1]["timed_alone_ms"] = t["validate"]

    # ---- the gather alone, into a reused output (what the roofline bounds)
    out_buf = np.zeros(shape + (dim,), table.dtype)
    fns = {"ours": lambda: gather_rows(table, ours_ids(), out_buf), **copy_contenders()}   # validates the ids first
    if use_torch:
        t_buf = torch.zeros(n, dim)
        fns["torch"] = lambda: torch.index_select(t_table, 0, torch_ids().reshape(-1), out=t_buf)
    t = interleaved(fns, repeats)
    copy_gb_s = side_by_side_bandwidth(t)
    row("gather (reused out)", t["ours"], t.get("torch"), moved, copy_gb_s=copy_gb_s,
        note=f"incl. validation; copy {copy_gb_s:.1f} GB/s in the same rounds")

    # ---- dense backward
    ids0 = pool[0]
    out = layer(ids0)
    fns = {"ours": lambda: out.backward(grad)}
    if use_torch:
        tw = t_table.clone().requires_grad_(True)
        t_out = F.embedding(t_pool[0], tw)
        fns["torch"] = lambda: t_out.backward(t_grad, retain_graph=True)
    def reset(who):
        if who == "ours":
            layer.weight.zero_grad()
        else:
            tw.grad = None
        gc.collect()
    t = interleaved(fns, repeats, setup=reset)
    row("bwd dense", t["ours"], t.get("torch"), note="same ids every call: plan remembered")
    ours_dense = layer.weight.grad
    if use_torch:
        tw.grad = None
        t_out.backward(t_grad, retain_graph=True)
        assert np.array_equal(ours_dense, tw.grad.numpy()), "dense gradients differ from PyTorch's"
    step_ids = cycle(pool)
    fns = {"ours": lambda: layer(step_ids()).backward(grad)}
    if use_torch:
        t_step_ids = cycle(t_pool)
        fns["torch"] = lambda: F.embedding(t_step_ids(), tw).backward(t_grad)
    t = interleaved(fns, repeats, setup=reset)
    row("step, new ids", t["ours"], t.get("torch"), note="fwd + dense bwd, a new batch each call: planned every call")

    # ---- row-sparse backward: lazy, and coalesced
    layer.sparse = True
    out = layer(ids0)
    fns = {"ours": lambda: out.backward(grad)}
    fns_c = {"ours": lambda: (out.backward(grad), layer.weight.grad.coalesce())}
    if use_torch:
        tws = t_table.clone().requires_grad_(True)
        t_out_s = F.embedding(t_pool[0], tws, sparse=True)
        fns["torch"] = lambda: t_out_s.backward(t_grad, retain_graph=True)
        fns_c["torch"] = lambda: (t_out_s.backward(t_grad, retain_graph=True), tws.grad.coalesce())
    def reset_sparse(who):
        if who == "ours":
            layer.weight.grad = None
        else:
            tws.grad = None
    t = interleaved(fns, repeats, setup=reset_sparse)
    row("bwd sparse", t["ours"], t.get("torch"), note="lazy: duplicates summed on first use")
    t = interleaved(fns_c, repeats, setup=reset_sparse)
    row("bwd sparse+coalesce", t["ours"], t.get("torch"))
    assert np.array_equal(layer.weight.grad.to_dense(), ours_dense), "sparse and dense gradients differ"
    layer.sparse = False
    layer.weight.grad = None

    # ---- sinusoidal positions: ours in place into a fresh embedding output vs torch x + pe[:S]
    seq = shape[-1]
    pe = PositionalEncoding(dim, seq)
    x = layer.forward(ids0)
    x.requires_grad = False
    fns = {"ours": lambda: pe.forward(x, inplace=True), "ours_copy": lambda: pe.forward(x)}
    if use_torch:
        t_x, t_pe = torch.from_numpy(x.data.copy()), torch.from_numpy(sinusoidal_table(seq, dim))
        fns["torch"] = lambda: t_x + t_pe[:seq]
    with no_grad():
        t = interleaved(fns, repeats)
    row("sin. add (in place)", t["ours"], t.get("torch"), moved=3 * x.data.nbytes)
    row("sin. add (new array)", t["ours_copy"], t.get("torch"), moved=3 * x.data.nbytes)
    del x

    # ---- training step of the token+position layer: time and peak extra memory
    for sparse in (False, True):
        tpe = TokenPositionEmbedding(vocab, dim, max_seq_length=seq, seed=0, sparse=sparse)
        opt = SGD(tpe.parameters, lr=0.1)
        def step():
            opt.zero_grad()
            tpe(ids0).backward(grad)
            opt.step()
        step_t = interleaved({"ours": step}, max(5, repeats // 4))["ours"]
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        step()
        peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
        table_mb, act_mb = tpe.tokens.weight.data.nbytes / 2**20, grad.nbytes / 2**20
        row(f"train step ({'sparse' if sparse else 'dense'})", step_t, None,
            note=f"peak +{peak / 2**20:.0f} MiB (table {table_mb:.0f} MiB, one activation {act_mb:.0f} MiB)")
        rows[-1].update(peak_extra_mb=peak / 2**20, table_mb=table_mb, activation_mb=act_mb)
        del tpe, opt
        gc.collect()
    return rows


# ---------------------------------------------------------------- the grid: idle and busy, NumPy and one thread as peers

GRID = [("10k x 64, 8x16", 10_000, 64, (8, 16)), ("10k x 256, 4x256", 10_000, 256, (4, 256)),
        ("50k x 256, 32x128", 50_000, 256, (32, 128)), ("10k x 256, 32x256", 10_000, 256, (32, 256)),
        ("100k x 512, 32x128", 100_000, 512, (32, 128)), ("100k x 1024, 8x2048", 100_000, 1024, (8, 2048)),
        ("50k x 512, 64x512", 50_000, 512, (64, 512))]
BURNER = ("import os, time\nparent, t = os.getppid(), time.monotonic()\n"
          "while os.getppid() == parent and time.monotonic() - t < {limit}:\n    sum(range(10000))\n")


class BackgroundLoad:
    """`n` CPU-bound processes for the busy rounds, stopped on exit, on Ctrl-C and on SIGTERM; each also
    stops by itself when this process is gone or after `limit` seconds, so none outlives the benchmark."""

    def __init__(self, n, limit=3600):
        self.n, self.limit, self.procs = n, limit, []

    def __enter__(self):
        import signal, subprocess, sys
        self.previous = signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
        self.procs = [subprocess.Popen([sys.executable, "-c", BURNER.format(limit=self.limit)]) for _ in range(self.n)]
        time.sleep(0.5)                                       # let the scheduler spread them over the cores
        return self

    def __exit__(self, *exc):
        import signal
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()
        signal.signal(signal.SIGTERM, self.previous)
        return False


def load_other_checkout(path):
    "The `tinytorch` package of another checkout at `path`, imported as `tinytorch_before` (the code before a change)."
    import importlib.util, sys
    root = Path(path) / "tinytorch"
    spec = importlib.util.spec_from_file_location("tinytorch_before", root / "__init__.py",
                                                  submodule_search_locations=[str(root)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["tinytorch_before"] = module
    spec.loader.exec_module(module)
    return importlib.import_module("tinytorch_before.core.embeddings")


def one_thread(fn):
    """`fn` run with TINYTORCH_NUM_THREADS=1: the same code on the calling thread alone. The paired
    races set and restore the variable outside the timed call (`.enter`, `.exit`, `.inner`): on a
    128-id lookup, setting it inside cost ~2 us, a quarter of the call."""
    saved = []
    def enter():
        saved.append(os.environ.get("TINYTORCH_NUM_THREADS"))
        os.environ["TINYTORCH_NUM_THREADS"] = "1"
    def exit_():
        value = saved.pop()
        if value is None:
            del os.environ["TINYTORCH_NUM_THREADS"]
        else:
            os.environ["TINYTORCH_NUM_THREADS"] = value
    return around(fn, enter, exit_)


def around(fn, enter, exit_):
    """`fn` with `enter()` before and `exit_()` after it; a paired race runs the two outside the
    timed call (`.enter`, `.exit`, `.inner`)."""
    def run():
        enter()
        try:
            fn()
        finally:
            exit_()
    run.enter, run.exit, run.inner = enter, exit_, fn
    return run


POOL_BATCHES = 32        # --fresh-ids: every call takes the next of this many batches


def grid_contenders(vocab, dim, shape, use_torch, before=None, fresh=False):
    """{operation: {contender: fn}} for one size of the grid, and a set-up that forgets every
    gradient. `fresh`: every call gathers a new batch of ids (the next of a pool of its own: a batch
    another contender read in the same round would find its rows in cache), as the profiler, the
    lesson and a training loop do; else the same ids."""
    rng = np.random.default_rng(0)
    layer = Embedding(vocab, dim, seed=0)
    table = layer.weight.data
    same = rng.integers(0, vocab, (1,) + shape)
    grad = rng.standard_normal(shape + (dim,), dtype=np.float32)
    def pool():
        "A contender's own batches: none read by another, whose rows would then still be in cache."
        return list(rng.integers(0, vocab, (POOL_BATCHES,) + shape) if fresh else same)
    layers = {"ours": layer}
    if before is not None:
        layers["before"] = before.Embedding.from_pretrained(table, freeze=False)

    def turns(batches=None):
        "A function returning the next of `batches` (default: a new pool), round and round."
        return itertools.cycle(pool() if batches is None else batches).__next__

    def numpy_forward(next_ids=turns()):  # as NumPy users write it: the check, then table[ids]
        ids = next_ids()
        if ids.size and (ids.min() < 0 or ids.max() >= vocab):
            raise TokenIdError(f"token id out of range: ids must be in [0, {vocab})")
        return table[ids]
    fwd, step = {"NumPy": numpy_forward}, {}
    for name, lay in layers.items():
        for suffix, wrap in (("", lambda f: f), (", 1 thread", one_thread)):
            # each tree's own no_grad (a checkout's Tensor reads its own module's switch)
            def forward(lay=lay, next_ids=turns(), off=sys.modules[type(lay.weight).__module__].no_grad):
                with off():
                    lay.forward(next_ids())
            def fwd_bwd(lay=lay, next_ids=turns()):
                lay.forward(next_ids()).backward(grad)
            fwd[name + suffix], step[name + suffix] = wrap(forward), wrap(fwd_bwd)
    if use_torch:
        t_pool = lambda: [torch.from_numpy(i) for i in pool()]
        t_table, t_grad = torch.from_numpy(table), torch.from_numpy(grad)
        tw = t_table.clone().requires_grad_(True)
        def torch_forward(next_ids=turns(t_pool())):
            with torch.no_grad():
                F.embedding(next_ids(), t_table)
        def torch_step(next_ids=turns(t_pool())):
            F.embedding(next_ids(), tw).backward(t_grad)
        fwd["torch"], step["torch"] = torch_forward, torch_step

    def forget(_=None):
        # each side as its optimizer's zero_grad does: ours keeps the dense array for the next
        # backward to write into (unless something else holds it), torch's (set_to_none=True)
        # drops it
        for lay in layers.values():
            lay.weight.zero_grad()
        if use_torch:
            tw.grad = None
    return {"forward": fwd, "fwd + dense bwd": step}, forget


def grid_rounds(n_ids, rounds):
    "Fewer rounds for the big calls (tens of ms each), at least 15."
    return max(15, rounds if n_ids <= 8192 else rounds // 2)


PAIRS_PER_ROUND = 4       # a paired race's round: A, B, A, B, ... (B first every other round)


def paired_samples(a, b, pairs, setup=None, warmup=2):
    """ms of `pairs` calls of `a` and of `b`, taken in pairs: within a round the two alternate
    call by call (A, B, A, B, ...), and every other round starts with B, so that each pair sees
    the same moments of the machine and neither always runs right after the other. `setup()`
    runs untimed before each call. Returns (a's times, b's times); pair i is (a[i], b[i])."""
    ta, tb, done = [], [], 0
    rounds = -(-pairs // PAIRS_PER_ROUND) + warmup
    for r in range(rounds):
        order = ((a, ta), (b, tb)) if r % 2 == 0 else ((b, tb), (a, ta))
        for _ in range(PAIRS_PER_ROUND):
            if r >= warmup and done >= pairs:
                break
            for fn, out in order:
                if setup:
                    setup()
                if hasattr(fn, "inner"):           # set-up and clean-up of its own, untimed
                    fn.enter()
                    try:
                        t = timed(fn.inner) * 1e3
                    finally:
                        fn.exit()
                else:
                    t = timed(fn) * 1e3
                if r >= warmup:
                    out.append(t)
            done += r >= warmup
    return ta, tb


def pair_ratio(ta, tb):
    "[median, 25th, 75th percentile] of the per-pair ratios a / b."
    q = np.percentile(np.divide(ta, tb), [50, 25, 75])
    return [float(x) for x in q]


def grid_comparisons(fns, op, control=True):
    """The paired races of one grid cell: (A, B) names. `ours` against NumPy (forward only), torch,
    its own one-thread path, and itself (the A/A control: the same function as both contenders,
    which must come out at 1.00 within its spread); `before` likewise when present, and `ours`
    against `before` (the change itself, in one race)."""
    out = []
    for who in ("ours", "before"):
        if who not in fns:
            continue
        if control and who == "ours":
            out.append((who, who))
        out += [(who, peer) for peer in ("NumPy", "torch", who + ", 1 thread") if peer in fns]
    return out + ([("ours", "before")] if "before" in fns else [])


def bench_grid(rounds, use_torch, loads, busy_processes, before=None,
               ops=("forward", "fwd + dense bwd"), sizes=None, fresh=False):
    """Forward and forward + dense backward on GRID (`sizes`: the indices to run, default all), idle
    and with `busy_processes` CPU-bound processes, the two conditions interleaved: for each size and
    operation, the idle races, then the busy ones. Each comparison is a paired race of its own
    (`paired_samples`: the two contenders alternate call by call, the order swapped every round):
    the ratio is the median of the per-pair ratios, with their middle half (25-75%), and each
    contender's median time; the A/A control races `ours` against itself. The load average at the
    start and the end of each cell."""
    rows = []
    for index, (label, vocab, dim, shape) in enumerate(GRID):
        if sizes is not None and index not in sizes:
            continue
        n_pairs = grid_rounds(int(np.prod(shape)), rounds)
        contenders, forget = grid_contenders(vocab, dim, shape, use_torch, before, fresh)
        for op in ops:
            fns = contenders[op]
            setup = None if op == "forward" else forget
            for load in loads:
                busy = load == "busy"
                with BackgroundLoad(busy_processes) if busy else contextlib.nullcontext():
                    load_at_start = os.getloadavg()[0]
                    for a, b in grid_comparisons(fns, op):
                        ta, tb = paired_samples(fns[a], fns[b], n_pairs, setup)
                        row = {"load": load, "size": label, "vocab": vocab, "dim": dim,
                               "ids": list(shape), "op": op, "pairs": n_pairs, "fresh_ids": fresh,
                               "a": a, "b": "A/A control" if a == b else b,
                               "a_ms": float(np.median(ta)), "b_ms": float(np.median(tb)),
                               "ratio": pair_ratio(ta, tb), "loadavg_start": load_at_start,
                               "loadavg": os.getloadavg()[0]}
                        rows.append(row)
                        print_grid_row(row)
    return rows


DEMO_SIZES = [("100k x 256, 8x128", 100_000, 256, (8, 128)),
              ("100k x 256, 32x128", 100_000, 256, (32, 128))]


def profiler_check(rounds, times=3):
    """The numbers `tinytorch demo` and the lesson print (the profiler's
    measure_lookup_performance: the forward on a fresh batch every call, NumPy's checked table[ids]
    in the same rounds) next to this script's fresh-ids paired race (ours and NumPy alternating
    call by call) of the same sizes, the two taking
    turns `times` times: they should agree within the spread of either."""
    rows = []
    for label, vocab, dim, shape in DEMO_SIZES:
        contenders, _ = grid_contenders(vocab, dim, shape, False, fresh=True)
        fns = {k: v for k, v in contenders["forward"].items() if k in ("ours", "NumPy")}
        layer = Embedding(vocab, dim, seed=0)
        for turn in range(times):
            prof = EmbeddingProfiler(repeats=10, warmup=2, seed=turn)      # as the demo sets it up
            prof.bandwidth_gb_s = 1.0                                       # not measured here
            r = prof.measure_lookup_performance(layer, [shape[0]], [shape[1]])
            r = r[f"batch_{shape[0]}_seq_{shape[1]}"]
            ta, tb = paired_samples(fns["ours"], fns["NumPy"], rounds)
            ours, numpy_ms = float(np.median(ta)), float(np.median(tb))
            row = {"size": label, "turn": turn + 1, "profiler_ms": r["lookup_time_ms"],
                   "profiler_numpy_ms": r["numpy_time_ms"],
                   "profiler_ratio": r["lookup_over_numpy"],
                   "bench_ms": ours, "bench_numpy_ms": numpy_ms,
                   "bench_ratio": pair_ratio(ta, tb)[0],
                   "loadavg": os.getloadavg()[0]}
            rows.append(row)
            print(f"| {label:<19} | {turn + 1} | {row['profiler_ms']:8.3f} | "
                  f"{row['profiler_numpy_ms']:8.3f} | {row['profiler_ratio']:5.2f} | {ours:8.3f} | "
                  f"{numpy_ms:8.3f} | {row['bench_ratio']:5.2f} | {row['loadavg']:.1f}", flush=True)
    return rows


def _ratio(r):
    return "-" if r is None else f"{r[0]:.2f} ({r[1]:.2f}-{r[2]:.2f})"


def print_grid_row(row):
    r = row["ratio"]
    b = row["a"] if row["b"] == "A/A control" else row["b"]
    print(f"| {row['load']:<4} | {row['size']:<19} | {row['op']:<15} | {row['a']:<6} | "
          f"{row['b']:<16} | {row['a_ms']:8.3f} | {row['b_ms']:8.3f} | "
          f"{r[0]:.2f} ({r[1]:.2f}-{r[2]:.2f}) | {row['pairs']:5d} | "
          f"{row['loadavg_start']:.1f}-{row['loadavg']:.1f} |", flush=True)


GRID_HEADER = ("| load | size (table, ids)   | operation       | A      | B                "
               "|     A ms |     B ms | A/B per pair     | pairs | load    |")

def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, no details: for development")
    parser.add_argument("--hot-rounds", type=int, default=None, help="rounds per hot target race (default 40; 15 with --quick)")
    parser.add_argument("--cold-rounds", type=int, default=None, help="rounds per cold target race (default 25; 8 with --quick)")
    parser.add_argument("--repeats", type=int, default=25, help="timed repeats per detail measurement (>= 20 for the README)")
    parser.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated subset of {list(CONFIGS)}")
    parser.add_argument("--no-torch", action="store_true", help="time ours only, even if PyTorch is installed")
    parser.add_argument("--no-details", action="store_true", help="only the targets and the fixed cost")
    parser.add_argument("--torch-huge-pages", action="store_true",
                        help="THP_MEM_ALLOC_ENABLE=1 for torch's allocator (the stretch comparison)")
    parser.add_argument("--omp-wait-policy", metavar="POLICY", default=None,
                        help="OMP_WAIT_POLICY for torch's threads (default PASSIVE; see the module docstring)")
    parser.add_argument("--grid", action="store_true",
                        help="also race the grid of sizes (128 ids to the largest table) idle and busy, with NumPy's "
                             "table[ids] and our own one-thread path as peers")
    parser.add_argument("--grid-only", action="store_true", help="the grid alone (no targets, no details)")
    parser.add_argument("--grid-rounds", type=int, default=40,
                        help="pairs per paired race of the grid (half for the big sizes)")
    parser.add_argument("--grid-ops", default="forward,fwd + dense bwd", help="the grid's operations (comma-separated)")
    parser.add_argument("--load", default="idle,busy", help="the grid's conditions: idle, busy or both (idle,busy)")
    parser.add_argument("--grid-sizes", default=None,
                        help="the grid's sizes to race, by number from 1: "
                             + "; ".join(f"{i + 1} = {g[0]}" for i, g in enumerate(GRID))
                             + " (default: all)")
    parser.add_argument("--fresh-ids", action="store_true",
                        help="the grid gathers a new batch of ids on every call (as the profiler "
                             "and the lesson do), not the same ids")
    parser.add_argument("--profiler-check", action="store_true",
                        help="only this: the lookups `tinytorch demo` prints (the profiler's "
                             "numbers) next to this script's race of the same sizes, fresh ids")
    parser.add_argument("--busy-processes", type=int, default=os.cpu_count(),
                        help="CPU-bound processes started for the busy rounds (default: one per core)")
    parser.add_argument("--before", metavar="CHECKOUT", default=None,
                        help="another checkout (its tinytorch package) raced in the grid as 'before'")
    parser.add_argument("--out", default=None, help="JSON path (default benchmarks/results/embeddings-<time>.json)")
    args = parser.parse_args()
    hot_rounds = args.hot_rounds or (15 if args.quick else 40)
    cold_rounds = args.cold_rounds or (8 if args.quick else 25)
    names = [c.strip() for c in args.configs.split(",") if c.strip()]
    unknown = [c for c in names if c not in CONFIGS]
    if unknown or min(args.repeats, hot_rounds, cold_rounds) < 1:
        parser.error(f"unknown configs {unknown}" if unknown else "rounds and repeats must be >= 1")
    use_torch = not args.no_torch and load_torch(args.omp_wait_policy, args.torch_huge_pages)
    if not use_torch:
        print("PyTorch not available (or --no-torch): printing our numbers only.\n")
    load_start, started = os.getloadavg(), time.perf_counter()

    loads = [x.strip() for x in args.load.split(",") if x.strip()]
    if set(loads) - {"idle", "busy"} or not loads or args.busy_processes < 1 or args.grid_rounds < 1:
        parser.error("--load takes idle, busy or idle,busy; --busy-processes and --grid-rounds must be >= 1")
    sizes = None
    if args.grid_sizes:
        try:
            sizes = {int(x) - 1 for x in args.grid_sizes.split(",") if x.strip()}
        except ValueError:
            sizes = {-1}
        if not sizes or not sizes <= set(range(len(GRID))):
            parser.error(f"--grid-sizes takes numbers from 1 to {len(GRID)} (comma-separated), "
                         f"got {args.grid_sizes!r}")
    before = load_other_checkout(args.before) if args.before else None
    profiler = EmbeddingProfiler(repeats=20)
    bandwidth = profiler.measure_memory_bandwidth(size_mb=256)
    targets, fixed, grid = [], [], []
    if args.profiler_check:
        print("The profiler (10 repeats, as `tinytorch demo` runs it) and this script's race "
              f"(paired, {args.grid_rounds} pairs), taking turns; fresh ids every call; ms")
        print("| size                | turn | profiler | its NumPy | ratio | bench ms | its NumPy "
              "| ratio | load")
        grid = profiler_check(args.grid_rounds)
        args.grid, args.grid_only = False, True          # nothing else
    if (args.grid or args.grid_only) and not grid:
        ids = "a new batch every call" if args.fresh_ids else "the same every call"
        print(f"Grid: paired races (A and B alternate call by call, B first in every other "
              f"round of {PAIRS_PER_ROUND} pairs); A/B = median of the per-pair ratios (middle "
              f"half); A ms, B ms = medians; busy = {args.busy_processes} CPU-bound processes, "
              f"idle and busy alternating cell by cell; ids: {ids}; load average at the start "
              f"and the end of each race")
        print(GRID_HEADER)
        grid = bench_grid(args.grid_rounds, use_torch, loads, args.busy_processes, before,
                          [o.strip() for o in args.grid_ops.split(",")], sizes, args.fresh_ids)
    for name in (names if not args.grid_only else []):
        for pad in (None, PAD_ID):
            targets += bench_targets(name, *CONFIGS[name], hot_rounds, cold_rounds, use_torch, pad)
    for name in (names if not args.grid_only else []):
        for form in ID_FORMS[1:]:                # the other ways users pass ids: padded batches, hot
            targets += bench_targets(name, *CONFIGS[name], hot_rounds, cold_rounds, use_torch, PAD_ID, form, ("hot",))
    if not args.grid_only:
        fixed = bench_fixed_cost(10 * hot_rounds, use_torch)
    rows = []
    if not (args.quick or args.no_details or args.grid_only):
        for name in names:
            rows += bench_config(name, *CONFIGS[name], args.repeats, bandwidth, use_torch)
    load_end = os.getloadavg()

    env = {"python": platform.python_version(), "numpy": np.__version__,
           "torch": torch.__version__ if use_torch else None,
           "torch_threads": torch.get_num_threads() if use_torch else None, "cpus": os.cpu_count(),
           "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
           "THP_MEM_ALLOC_ENABLE": os.environ.get("THP_MEM_ALLOC_ENABLE"),
           "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY"),
           "copy_bandwidth_gb_s": bandwidth, **profiler.bandwidth_detail, "repeats": args.repeats,
           "hot_rounds": hot_rounds, "cold_rounds": cold_rounds, "load_start": load_start, "load_end": load_end,
           "wall_s": time.perf_counter() - started}
    detail = profiler.bandwidth_detail
    torch_note = (f", torch {torch.__version__} ({torch.get_num_threads()} threads, OMP_WAIT_POLICY="
                  f"{os.environ.get('OMP_WAIT_POLICY')}, THP_MEM_ALLOC_ENABLE={os.environ.get('THP_MEM_ALLOC_ENABLE', 'unset')})"
                  if use_torch else "")
    print(f"numpy {np.__version__}{torch_note}; load average {load_start[0]:.2f} at the start, {load_end[0]:.2f} at the end")
    if targets:
        print(f"\nTargets: medians of {hot_rounds} hot and {cold_rounds} cold rounds, ratio = ours / torch (lower is better)")
        print_targets(targets, fixed)
    if rows:
        print(f"\nDetails (cold-ish: copy contenders in the same rounds). Copy bandwidth (np.copyto, 256 MiB, read+write): "
              f"{bandwidth:.1f} GB/s (one thread {detail['one_thread_gb_s']:.1f}, {detail['threads']} threads "
              f"{detail['all_threads_gb_s']:.1f}); medians of {args.repeats} interleaved repeats")
        header = f"| {'config':<6} | {'operation':<20} | {'ours ms':>8} | {'torch ms':>8} | {'ratio':>6} | {'GB/s':>5} | {'% roof':>6} | note"
        print(header)
        print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|---")
        for r in rows:
            torch_ms = f"{r['torch_ms']:8.3f}" if r["torch_ms"] is not None else f"{'-':>8}"
            ratio = f"{r['ratio']:5.2f}x" if r["ratio"] is not None else f"{'-':>6}"
            gbs = f"{r['gb_per_s']:5.1f}" if "gb_per_s" in r else f"{'':>5}"
            roof = f"{100 * r['roofline_fraction']:5.0f}%" if "roofline_fraction" in r else f"{'':>6}"
            print(f"| {r['config']:<6} | {r['op']:<20} | {r['ours_ms']:8.3f} | {torch_ms} | {ratio} | {gbs} | {roof} | {r['note']}")

    out = Path(args.out) if args.out else (Path(__file__).parent / "results" /
                                          f"embeddings-{time.strftime('%Y%m%d-%H%M%S')}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"environment": env, "targets": targets, "fixed_cost": fixed, "rows": rows, "grid": grid}, indent=1))
    print(f"\nwrote {out} ({env['wall_s']:.0f} s)")


if __name__ == "__main__":
    main()
