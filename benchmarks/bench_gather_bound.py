"""How far is the mid-size forward from what the memory allows? Paired races at 4-8 MiB.

Usage: python benchmarks/bench_gather_bound.py [--pairs 150] [--sizes 3,4,5]

At these sizes both frameworks copy the same rows with the same number of threads, so a ratio
ours / torch near 1 may be the machine's limit rather than either code's. Three questions, each a
paired race (`bench_embeddings.paired_samples`: the two alternate call by call, the order swapped
every round; the median of the per-pair ratios with their middle half):
  kernels        NumPy's `take` against torch's `index_select`, one thread each, into an array they
                 both reuse: the copy loops alone, no allocation, no threads
  forward        `Embedding.forward` against `F.embedding` (no graph), each on its threads
  in order       each forward against the same job with the ids in order (rows 0, 1, 2, ...,
                 repeated): the same bytes read and written, in the order memory serves best
Needs PyTorch (a reference peer: `pip install torch==2.13.0`); OMP_WAIT_POLICY=PASSIVE as in the
main benchmark.
"""
import argparse

import numpy as np

import bench_embeddings as bench
from tinytorch.core.embeddings import Embedding
from tinytorch.core.tensor import no_grad


def contenders(vocab, dim, shape):
    "The functions raced at one size, on one table that torch shares."
    rng = np.random.default_rng(0)
    layer = Embedding(vocab, dim, seed=0)
    table = layer.weight.data                                              # (vocab, dim)
    ids = rng.integers(0, vocab, shape)                                    # (batch, seq)
    in_order = np.resize(np.arange(vocab), shape)                          # (batch, seq)
    out = np.empty((ids.size, dim), np.float32)                            # (n, dim)
    t_table, t_ids, t_in_order = (bench.torch.from_numpy(a) for a in (table, ids, in_order))
    t_out, t_flat = bench.torch.from_numpy(out), t_ids.reshape(-1)

    def ours(which=ids):
        with no_grad():
            layer.forward(which)

    def torch_forward(which=t_ids):
        with bench.torch.no_grad():
            bench.F.embedding(which, t_table)

    def numpy_kernel():
        table.take(ids.reshape(-1), axis=0, out=out, mode='clip')

    def torch_kernel():
        bench.torch.index_select(t_table, 0, t_flat, out=t_out)

    torch_alone = bench.around(torch_kernel, lambda: bench.torch.set_num_threads(1),
                               lambda: bench.torch.set_num_threads(2))
    return {
        "kernels": (bench.one_thread(numpy_kernel), torch_alone,
                    "NumPy take, 1 thread", "torch index_select, 1 thread"),
        "forward": (ours, torch_forward, "ours", "torch"),
        "ours in order": (ours, lambda: ours(in_order), "ours", "ours, ids in order"),
        "torch in order": (torch_forward, lambda: torch_forward(t_in_order),
                           "torch", "torch, ids in order"),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=150, help="timed pairs per race")
    parser.add_argument("--sizes", default="3,4,5",
                        help="sizes of the grid, numbered from 1 as bench_embeddings.py's "
                             "--grid-sizes (default: its 4-8 MiB lookups)")
    args = parser.parse_args()
    try:
        sizes = [int(x) - 1 for x in args.sizes.split(",") if x.strip()]
        if not sizes or not all(0 <= i < len(bench.GRID) for i in sizes):
            raise ValueError
    except ValueError:
        parser.error(f"--sizes takes numbers from 1 to {len(bench.GRID)} (comma-separated), "
                     f"got {args.sizes!r}")
    if args.pairs < 1:
        parser.error(f"--pairs must be >= 1, got {args.pairs}")
    if not bench.load_torch():
        raise SystemExit("bench_gather_bound.py needs PyTorch as the peer: "
                         "pip install torch==2.13.0")
    bench.torch.set_num_threads(2)
    print("| size (table, ids) | race | A | B | A ms | B ms | A/B per pair | load |")
    print("|---|---|---|---|---|---|---|---|")
    for index in sizes:
        label, vocab, dim, shape = bench.GRID[index]
        for race, (a, b, a_name, b_name) in contenders(vocab, dim, shape).items():
            ta, tb = bench.paired_samples(a, b, args.pairs)
            mid, low, high = bench.pair_ratio(ta, tb)
            print(f"| {label} | {race} | {a_name} | {b_name} | {np.median(ta):.3f} "
                  f"| {np.median(tb):.3f} | {mid:.2f} ({low:.2f}-{high:.2f}) "
                  f"| {bench.os.getloadavg()[0]:.1f} |", flush=True)


if __name__ == "__main__":
    main()
