"""Grading throughput per core, and what sharding buys: one `tinytorch grade --jobs 1` process over n
submissions against the same class cut into 2 shards graded at once by two `--jobs 1` processes
(two one-core runners) and merged, plus the fixed cost of one run that grades nobody (an empty shard).
Each run's CPU time (its processes and everything they started: nbgrader, kernels) is measured
beside its wall time: on a machine shared with other work the wall time says how busy the machine
was, the CPU time what grading costs a core of its own.

    .venv/bin/python benchmarks/bench_shards.py [--n 6]

Submissions are generated from the real release, as in bench_grading.py (reference, untouched and
broken functions in rotation). The machine's load average is sampled during every run and printed
with it: on a shared machine the figures are only as good as the load they were measured under.
Prints a table; writes benchmarks/results/shards.json.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))

from bench_grading import make_submissions  # noqa: E402
from tinytorch.course.grading.shards import shard_of  # noqa: E402

TINYTORCH = Path(sys.executable).parent / "tinytorch"


class LoadSampler:
    "1-minute load average, sampled every 2 s while a run lasts."
    def __init__(self):
        self.samples, self._stop = [], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.samples.append(os.getloadavg()[0])
            self._stop.wait(2)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def summary(self) -> str:
        return f"load {min(self.samples):.1f}-{max(self.samples):.1f} (mean {sum(self.samples) / len(self.samples):.1f})"


class CpuMeter:
    """CPU seconds of the commands started through `wrap`, and of everything they start, whatever user or PID
    namespace they end up in (the sandboxed kernels run as other users): the usage of a cgroup of their own, which
    root can make (cgroup v1 `cpuacct` or v2). Elsewhere `RUSAGE_CHILDREN`, which misses those kernels (`exact`)."""
    ROOTS = ((Path("/sys/fs/cgroup/cpuacct"), "cpuacct.usage", 1e-9), (Path("/sys/fs/cgroup"), "cpu.stat", 1e-6))

    def __enter__(self):
        self.group = None
        for root, counter, unit in self.ROOTS:
            if (root / counter).exists() and os.access(root, os.W_OK):
                self.group, self.counter, self.unit = root / f"bench-shards-{os.getpid()}", counter, unit
                self.group.mkdir()
                break
        self.exact = self.group is not None
        self.before = resource.getrusage(resource.RUSAGE_CHILDREN)
        return self

    def wrap(self, command: list) -> list:
        "`command`, started by a shell that first moves itself into the cgroup (no Python runs between fork and exec)."
        if self.group is None:
            return command
        return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.group / "cgroup.procs"), *map(str, command)]

    def seconds(self) -> float:
        if self.group is not None:
            text = (self.group / self.counter).read_text()
            return int(text if self.counter == "cpuacct.usage" else text.split()[1]) * self.unit   # usage_usec N
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (after.ru_utime - self.before.ru_utime) + (after.ru_stime - self.before.ru_stime)

    def __exit__(self, *exc):
        if self.group is not None:
            for _ in range(50):               # the last sandbox processes may take a moment to leave
                try:
                    self.group.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)


def timed(name: str, commands: list, cwd: Path, rows: dict):
    "Run `commands` at once (separate processes); record their wall and CPU time and the load meanwhile."
    with CpuMeter() as meter, LoadSampler() as load:
        start = time.perf_counter()
        procs = [subprocess.Popen(meter.wrap(c), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for c in commands]
        outs = [p.communicate() for p in procs]
        seconds = time.perf_counter() - start
        cpu = meter.seconds()
    if not meter.exact:
        print(f"{name}: CPU from RUSAGE_CHILDREN (no cgroup could be made): kernels run as other users are missed")
    for p, (out, err) in zip(procs, outs):
        assert p.returncode in (0, 3), f"{name}: exit {p.returncode}\n{out[-1500:]}\n{err[-1500:]}"
    rows[name] = {"seconds": seconds, "cpu_seconds": cpu, "load": load.summary()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=4)
    args = parser.parse_args()
    n, rows = args.n, {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "nbs").symlink_to(ROOT / "nbs")
        students = make_submissions(work / "submissions", n)
        split = [sum(shard_of(s, 2) == k for s in students) for k in (1, 2)]
        empty = next(k for k in range(1, 100) if all(shard_of(s, 99) != k for s in students))
        grade = [str(TINYTORCH), "grade", "11", "submissions"]
        timed("fixed cost: a run that grades nobody", [grade + ["--shard", f"{empty}/99", "--course", "c0"]], work, rows)
        timed(f"one process, --jobs 1, {n} submissions", [grade + ["--course", "c1", "--jobs", "1"]], work, rows)
        timed(f"2 shards at once ({split[0]} + {split[1]}), --jobs 1 each",
              [grade + ["--shard", f"{k}/2", "--course", f"s{k}", "--jobs", "1"] for k in (1, 2)], work, rows)
        timed("merge of the 2 shards", [[str(TINYTORCH), "grade-merge", "merged.csv", "s1/grades_11_embeddings.csv",
                                         "s2/grades_11_embeddings.csv"]], work, rows)
        assert (work / "merged.csv").read_bytes() == (work / "c1" / "grades_11_embeddings.csv").read_bytes()
    names = list(rows)
    fixed, one, two = (rows[k] for k in names[:3])
    cpu_per_sub = (one["cpu_seconds"] - fixed["cpu_seconds"]) / n
    wall_per_sub = (one["seconds"] - fixed["seconds"]) / n
    print(f"grading {n} submissions of 11_embeddings on {os.cpu_count()} cores")
    print(f"{'run':<44} {'wall s':>7} {'CPU s':>7}   load average during the run")
    for name, r in rows.items():
        print(f"{name:<44} {r['seconds']:>7.1f} {r['cpu_seconds']:>7.1f}   {r['load']}")
    print(f"per submission: {cpu_per_sub:.1f} CPU s ({wall_per_sub:.1f} s wall at this load) after a fixed "
          f"{fixed['cpu_seconds']:.1f} CPU s ({fixed['seconds']:.1f} s wall) per run; "
          f"= {3600 / cpu_per_sub:.0f} submissions per hour of a core of its own")
    print(f"2 shards vs one process: CPU {two['cpu_seconds'] / one['cpu_seconds']:.2f}x, wall {two['seconds'] / one['seconds']:.2f}x "
          "(merged CSV identical to the single run's)")
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "shards.json").write_text(json.dumps({"n": n, "rows": rows, "cpu_seconds_per_submission": cpu_per_sub,
                                                 "fixed_cpu_seconds_per_run": fixed["cpu_seconds"]}, indent=1))


if __name__ == "__main__":
    main()
