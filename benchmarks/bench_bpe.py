"""Benchmark BPE training and encoding on Python's own help text (`pydoc_data.topics`, about 450 KB).

Usage: python benchmarks/bench_bpe.py [--vocab-size 1000] [--repeats 3]
"""
import argparse
import platform
import statistics
import time

from pydoc_data.topics import topics

from tinytorch.core.tokenization import BPETokenizer


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab-size", type=int, default=1000, help="target vocabulary size (>= 260)")
    parser.add_argument("--repeats", type=int, default=3, help="training runs; the median time is reported")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")

    text = "\n".join(topics.values())
    n_bytes = len(text.encode("utf-8"))

    train_times, merges = [], None
    for _ in range(args.repeats):
        seconds, tok = timed(lambda: BPETokenizer(args.vocab_size).train(text))
        train_times.append(seconds)
        if merges is not None and tok.merges != merges:
            raise SystemExit("training is not deterministic: two runs learned different merges")
        merges = tok.merges

    cold_s, ids = timed(lambda: tok.encode(text))      # first call after training: empty chunk cache
    warm_runs = [timed(lambda: tok.encode(text))[0] for _ in range(3)]
    warm_s = statistics.median(warm_runs)
    if tok.decode(ids) != text:
        raise SystemExit("round trip failed: decode(encode(text)) != text")
    n_tokens = len(ids)
    mb = n_bytes / 1e6

    train_label = f"median of {args.repeats}" if args.repeats > 1 else "1 run"
    rows = [
        ("python", platform.python_version()),
        ("corpus (pydoc_data.topics)", f"{len(text):,} chars, {n_bytes:,} bytes"),
        ("target vocab size", f"{args.vocab_size:,}"),
        (f"training time ({train_label})", f"{statistics.median(train_times):.2f} s  "
                                           f"(runs: {', '.join(f'{t:.2f}' for t in train_times)})"),
        ("merges learned", f"{len(tok.merges):,}  (vocab_size {tok.vocab_size:,})"),
        ("tokens in corpus", f"{n_tokens:,}"),
        ("encode, cold cache (1 run)", f"{cold_s:.3f} s = {n_tokens / cold_s:,.0f} tokens/s, {mb / cold_s:.2f} MB/s"),
        ("encode, warm (median of 3)", f"{warm_s:.3f} s = {n_tokens / warm_s:,.0f} tokens/s, {mb / warm_s:.2f} MB/s"),
        ("compression", f"{n_bytes / n_tokens:.2f} bytes/token"),
    ]
    width = max(len(k) for k, _ in rows)
    print(f"{'BPE benchmark':<{width}} | result")
    print(f"{'-' * width}-+-{'-' * 60}")
    for key, value in rows:
        print(f"{key:<{width}} | {value}")


if __name__ == "__main__":
    main()
