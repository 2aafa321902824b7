"""Where the time of one hot forward + dense backward goes (module 11's Embedding, default 10k x 256, ids 32 x 256).

Usage: python benchmarks/profile_embeddings.py [--config 10k] [--calls 200] [--pause-ms 0.5] [--cold] [--padding]
                                              [--no-keep-off] [--cpu-time]

Each piece is timed on its own on the same ids and gradient (hot caches), in rounds that run every
piece once in a new random order (so that a busy spell of the machine hits all pieces alike), with a
short pause before every call (as in a training loop, where other work runs between two lookups: the
pause lets the helper threads go to sleep, so every call pays for waking them). Medians, in µs.
Runs on our code only (no PyTorch); run it under another checkout's package to compare two versions:
    PYTHONPATH=/path/to/other/checkout python benchmarks/profile_embeddings.py
Pieces (indented ones are parts of the line above them):
  forward, no graph        Embedding.forward under no_grad
    validation             as_token_ids(ids, vocab): the range check alone
    thread hand-off        run_parallel of two empty tasks: waking a helper and waiting for it
    gather                 gather_rows(checked=True) into a reused array, all threads
  forward, graph recorded  the same with autograd on: the difference is the forward's bookkeeping
  backward, dense          out.backward(g) after zero_grad (the dense array written again)
    autograd bookkeeping   the same backward with the scatter-add replaced by a no-op
    scatter-add            scatter_add_rows(ids, g, vocab) alone
      scatter plan         sorting the ids and planning where each row goes (new ids: nothing remembered)
      writes               what is left: staging, summing and writing the rows
      plan, remembered     finding the plan of ids seen before (what a hot loop pays instead of the plan)
Every piece also reports the minor page faults of one call (median, from resource.getrusage): a fresh
array above glibc's mmap threshold is new memory every time, mapped page by page (4 KiB, or 2 MiB where
NumPy asks for huge pages) as it is first written.
--padding uses padded batches (the last 5 ids of every sequence are 0) and padding_idx=0.
--cold replaces the pause by a 256 MiB copy (untimed) before every call, as the benchmark's cold regime
does: caches flushed, so every piece also pays for bringing its data and Python's and NumPy's own code
back from memory.
--no-keep-off lets helper threads run on the caller's CPU (the behaviour before they kept off it).
--cpu-time times the CPU time of the calling thread on one thread (TINYTORCH_NUM_THREADS=1) instead of
wall time: the work itself, which a busy machine moves much less than wall time (no hand-off then).
"""
import argparse
import os
import resource
import time

import numpy as np

import tinytorch.core.parallel as parallel
import tinytorch.core.row_kernels as kernels
from tinytorch.core.embeddings import Embedding
from tinytorch.core.tensor import no_grad

CONFIGS = {"10k": (10_000, 256, (32, 256)), "50k": (50_000, 512, (64, 512)), "100k": (100_000, 1024, (8, 2048))}


CLOCK = time.perf_counter


def minor_faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def medians_us(pieces, rounds, pause_s, cold=False):
    """Median µs and minor page faults of each piece, `pieces` = {name: (fn, setup or None)}: every
    round calls each once, in a new random order, after its `setup()` and a pause, or with `cold` a
    cache flush (all untimed); 5 warm-up rounds."""
    flush = np.ones(2**26, np.float32), np.zeros(2**26, np.float32)     # 256 MiB each, written: no page faults
    order, times, faults = np.random.default_rng(0), {name: [] for name in pieces}, {name: [] for name in pieces}
    names = list(pieces)
    for i in range(rounds + 5):
        order.shuffle(names)
        for name in names:
            fn, setup = pieces[name]
            if setup:
                setup()
            if cold:
                np.copyto(flush[1], flush[0])
            elif pause_s:
                time.sleep(pause_s)
            before = minor_faults()
            start = CLOCK()
            fn()
            if i >= 5:
                times[name].append(CLOCK() - start)
                faults[name].append(minor_faults() - before)
    return ({name: 1e6 * float(np.median(ts)) for name, ts in times.items()},
            {name: int(np.median(f)) for name, f in faults.items()})


def plan_fn(ids, vocab, dim, pad=None):
    "The scatter-add's planning step of whichever engine is installed (None if it has no separate one), nothing remembered."
    flat = ids.reshape(-1)
    if hasattr(kernels, "_new_plan"):
        parts = parallel.parts_for(flat.size, flat.size * dim * 4)
        return lambda: kernels._new_plan(flat, vocab, dim * 4, True, pad, parts)
    if hasattr(kernels, "_fill_plan"):           # row-order fill: sort once, then lay out the staged rows
        num_parts = max(parallel.parts_for(flat.size, flat.size * dim * 4), -(-flat.size * dim * 4 // kernels._FILL_CHUNK_BYTES))
        if hasattr(kernels, "_head_start_cuts"):  # parts as row ranges, the first one longer
            parts = kernels._head_start_cuts(vocab, dim * 4, num_parts)
        else:
            parts = -(-vocab // num_parts)
        return lambda: kernels._fill_plan(flat, kernels.id_runs(flat, vocab), vocab, parts)
    if hasattr(kernels, "_scatter_plan"):
        return lambda: kernels._scatter_plan(flat, vocab)
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="10k", choices=list(CONFIGS))
    parser.add_argument("--calls", type=int, default=200, help="rounds (timed calls per piece)")
    parser.add_argument("--pause-ms", type=float, default=0.5, help="pause before every call (0: back to back)")
    parser.add_argument("--cold", action="store_true", help="a 256 MiB copy before every call instead of the pause")
    parser.add_argument("--padding", action="store_true", help="padded batches (last 5 ids of each sequence 0), padding_idx=0")
    parser.add_argument("--no-keep-off", action="store_true", help="helpers may run on the caller's CPU")
    parser.add_argument("--cpu-time", action="store_true", help="the calling thread's CPU time, on one thread")
    args = parser.parse_args()
    if args.cpu_time:
        global CLOCK
        os.environ["TINYTORCH_NUM_THREADS"], CLOCK = "1", time.thread_time
    keep_off = hasattr(parallel, "_cpu_now") and not args.no_keep_off
    if not keep_off:
        parallel._pool["getcpu"] = None
    vocab, dim, shape = CONFIGS[args.config]
    rng = np.random.default_rng(0)
    pad = 0 if args.padding else None
    layer = Embedding(vocab, dim, seed=0, padding_idx=pad)
    table = layer.weight.data
    ids = rng.integers(0, vocab, shape)
    if args.padding:
        ids[..., -5:] = 0
    grad = rng.standard_normal(shape + (dim,), dtype=np.float32)
    reused = np.empty(shape + (dim,), np.float32)
    calls, pause = args.calls, args.pause_ms / 1e3

    def forward_no_graph():
        with no_grad():
            layer.forward(ids)

    def forget_grad():
        layer.weight.zero_grad()        # as a training loop does: the dense array is reused

    held = {}
    def new_output():
        forget_grad()
        held["out"] = layer.forward(ids)

    def without_scatter():
        "The backward with the scatter-add replaced by a no-op: what is left is autograd's bookkeeping."
        real, kernels.add_rows_at = kernels.add_rows_at, lambda out, ids, rows, fresh=False, skip=None: out
        try:
            held["out"].backward(grad)
        finally:
            kernels.add_rows_at = real

    flat, flat_grad = ids.reshape(-1), grad.reshape(-1, dim)
    pieces = {"forward, no graph": (forward_no_graph, None),
              "validation": (lambda: kernels.as_token_ids(ids, vocab), None),
              "thread hand-off": (lambda: parallel.run_parallel(lambda: None, [(), ()]), None),
              "gather": (lambda: kernels.gather_rows(table, ids, reused, checked=True), None),
              "forward, graph recorded": (lambda: layer.forward(ids), forget_grad),
              "backward, dense": (lambda: held["out"].backward(grad), new_output),
              "autograd bookkeeping": (without_scatter, new_output),
              "scatter-add": (lambda: kernels.scatter_add_rows(flat, flat_grad, vocab, **skip), None)}
    skip = {"skip": pad} if pad is not None else {}
    plan = plan_fn(ids, vocab, dim, pad)
    if plan:
        pieces["scatter plan"] = (plan, None)
    if hasattr(kernels, "_plan_for"):
        pieces["plan, remembered"] = (lambda: kernels._plan_for(flat, vocab, dim * 4, True, pad), None)
    t, faults = medians_us(pieces, calls, pause, args.cold)
    if plan:
        t["writes"] = t["scatter-add"] - t["scatter plan"]
    t["forward bookkeeping"] = t["forward, graph recorded"] - t["forward, no graph"]

    clock = "CPU time of one thread" if args.cpu_time else "wall time"
    before = "a 256 MiB copy (cold)" if args.cold else f"{args.pause_ms} ms pause (hot)"
    print(f"{args.config}: vocab {vocab}, dim {dim}, ids {shape}, padding_idx {pad}; {clock}, medians of {calls} interleaved calls, {before} "
          f"before each; {parallel.worker_count()} threads, helpers keep off the caller's CPU: {'yes' if keep_off else 'no'}; "
          f"engine {kernels.__file__}; load average {os.getloadavg()[0]:.2f}")
    layout = [("forward, no graph", 0), ("validation", 1), ("thread hand-off", 1), ("gather", 1),
              ("forward, graph recorded", 0), ("forward bookkeeping", 1), ("backward, dense", 0),
              ("autograd bookkeeping", 1), ("scatter-add", 1), ("scatter plan", 2), ("writes", 2),
              ("plan, remembered", 2)]
    for name, depth in layout:
        if name in t:
            fault_note = f"  {faults[name]:6d} page faults" if name in faults else ""
            print(f"{'  ' * depth}{name:<{28 - 2 * depth}} {t[name]:9.1f} µs{fault_note}")
    print(f"one step (forward with graph + backward): {t['forward, graph recorded'] + t['backward, dense']:.1f} µs")


if __name__ == "__main__":
    main()
