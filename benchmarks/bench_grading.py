"""Grading cost: seconds per submission for stock nbgrader (one shared batch) vs `tinytorch grade`
(isolated, checked, graded twice) with --jobs 1 and --jobs 2.

    .venv/bin/python benchmarks/bench_grading.py [--n 20] [--rounds 1]
    .venv/bin/python benchmarks/bench_grading.py --phases [--n 4]
    .venv/bin/python benchmarks/bench_grading.py --limits [--n 8] [--rounds 2]
    .venv/bin/python benchmarks/bench_grading.py --compare OTHER_CHECKOUT [--n 4] [--rounds 2]

The three runs take turns (the order rotated each round, `--rounds`); each is also timed in CPU seconds of
everything it started (a cgroup this process moves into, when one can be made: the sandboxed kernels that run
as other users included), so the ratio to stock can be read on a shared machine too.

`--phases` grades the class with `tinytorch grade --jobs 1` and splits each submission's CPU seconds (the same
cgroup) into nbgrader's sandboxed run, the judge, the feedback page and the rest, then lists the kernel's
slowest cells (the wall time nbclient recorded in the graded notebooks).

`--limits` instead compares `tinytorch grade --jobs 2` with the default per-submission limits (memory,
processes, disk) against the same run with every limit off, side by side (the order swapped each round),
and reports seconds per submission and the peak memory of the grader and everything it started (sampled).

`--compare DIR` grades the same class with `tinytorch grade --jobs 1` from this checkout and from another one
(DIR, with its own `.venv`, e.g. the main branch), side by side (the order swapped each round), each also once
with nobody to grade (its fixed cost per run), and reports the CPU seconds of everything each run started
(counted in a cgroup, as bench_shards.py does) and its wall time: per submission after the fixed cost, and the
ratio this / other; then the same class graded again in the same course folder (what an instructor's re-run costs).

Submissions are generated from the real release (full-marks solutions, untouched releases and a
broken function, in rotation). Prints a table; writes benchmarks/results/grading.json.
"""
import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from course_scenarios import build  # noqa: E402
from tinytorch.course.authoring.assignments import release, run_nbgrader, write_course  # noqa: E402
from tinytorch.course.grading.grading import grade  # noqa: E402
from tinytorch.course.isolation.sandbox import isolation_level  # noqa: E402
from tinytorch.course.isolation.limits import Limits, format_size, tree_memory  # noqa: E402


def make_submissions(folder: Path, n: int) -> list:
    source = json.loads((ROOT / "nbs" / "11_embeddings.ipynb").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        released = json.loads(release(11, ROOT / "nbs", tmp).read_text())
    kinds = build(released, source, {"course": "/nonexistent", "submissions": "/nonexistent"})
    rotation = ["reference", "untouched", "broken-sinusoid", "broken-backward"]
    students = []
    for i in range(n):
        student = f"s{i:02d}-{rotation[i % len(rotation)]}"
        dest = folder / student / "11_embeddings.ipynb"
        dest.parent.mkdir(parents=True)
        dest.write_text(json.dumps(kinds[rotation[i % len(rotation)]]))
        students.append(student)
    return students


class OwnCpu:
    """CPU seconds of this process and of everything it starts, whatever user or PID namespace they end up
    in: a cgroup (v1 `cpuacct` or v2) this process moves into, when root can make one; else None."""
    ROOTS = ((Path("/sys/fs/cgroup/cpuacct"), "cpuacct.usage", 1e-9), (Path("/sys/fs/cgroup"), "cpu.stat", 1e-6))

    def __init__(self):
        import os
        self.group = None
        for root, counter, unit in self.ROOTS:
            if (root / counter).exists() and os.access(root, os.W_OK):
                group = root / f"bench-grading-{os.getpid()}"
                try:
                    group.mkdir()
                    (group / "cgroup.procs").write_text(str(os.getpid()))
                except OSError:
                    continue
                self.group, self.counter, self.unit = group, counter, unit
                break

    def seconds(self):
        if self.group is None:
            return None
        text = (self.group / self.counter).read_text()
        return int(text if self.counter == "cpuacct.usage" else text.split()[1]) * self.unit


def stock_batch(submissions: Path, students: list, work: Path, cpu=None):
    """Stock nbgrader: one course folder, one `nbgrader autograde` for the whole class. (wall s, CPU s
    or None) of the autograde alone, with `cpu` an `OwnCpu`."""
    course = write_course(work / "stock", [ROOT / "nbs" / "11_embeddings.ipynb"])
    assert run_nbgrader(course, "generate_assignment", "11_embeddings", "--force").returncode == 0
    for s in students:
        dest = course / "submitted" / s / "11_embeddings"
        dest.mkdir(parents=True)
        shutil.copy(submissions / s / "11_embeddings.ipynb", dest)
    c0, start = cpu.seconds() if cpu else None, time.perf_counter()
    run = run_nbgrader(course, "autograde", "11_embeddings")
    elapsed, used = time.perf_counter() - start, cpu.seconds() if cpu else None
    assert run.returncode == 0, run.stderr[-2000:]
    return elapsed, None if c0 is None else used - c0


def sampled(fn):
    "(seconds, peak memory of this process and everything it started) of fn(), sampled every 0.1 s."
    import os
    import threading
    peak, done = [0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], tree_memory(os.getpid()))
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    try:
        fn()
    finally:
        seconds = time.perf_counter() - start
        done.set()
        sampler.join()
    return seconds, peak[0]


def compare_limits(n: int, rounds: int):
    "`grade --jobs 2` with the default limits vs none, side by side."
    runs = {"default limits": Limits(), "no limits": Limits(None, None, None)}
    times = {name: [] for name in runs}
    peaks = {name: 0 for name in runs}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        make_submissions(work / "submissions", n)
        for r in range(rounds):
            for name in (list(runs) if r % 2 == 0 else list(reversed(runs))):
                def run():
                    results, _ = grade(11, work / "submissions", ROOT / "nbs", work / f"course-{r}-{name[:2]}",
                                       jobs=2, limits=runs[name], log=lambda *a: None)
                    assert not any(x.failure or x.flags for x in results), [x.failure or x.flags for x in results]
                seconds, peak = sampled(run)
                times[name].append(seconds / n)
                peaks[name] = max(peaks[name], peak)
    print(f"grading {n} submissions of 11_embeddings, --jobs 2, {rounds} round(s); isolation level: {isolation_level()}")
    print(f"{'run':<16} {'s/submission (each round)':<28} {'median':>7} {'peak memory':>12}")
    for name in runs:
        med = sorted(times[name])[len(times[name]) // 2]
        print(f"{name:<16} {' '.join(f'{t:.2f}' for t in times[name]):<28} {med:>7.2f} {format_size(peaks[name]):>12}")
    a, b = (sorted(times[k])[len(times[k]) // 2] for k in runs)
    print(f"with limits / without: {a / b:.3f}x per submission")
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "grading_limits.json").write_text(json.dumps({"n": n, "seconds_per_submission": times, "peak_bytes": peaks}, indent=1))


def compare_trees(other: Path, n: int, rounds: int):
    "CPU and wall seconds per submission of `tinytorch grade --jobs 1` from this checkout and from `other`, side by side."
    from bench_shards import CpuMeter, LoadSampler
    from tinytorch.course.grading.shards import shard_of
    trees = {"this": ROOT, "other": Path(other).resolve()}
    runs = {name: {"fixed": [], "class": [], "again": []} for name in trees}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        students = make_submissions(work / "submissions", n)
        empty = next(k for k in range(1, 100) if all(shard_of(s, 99) != k for s in students))
        for r in range(rounds):
            for name in (list(trees) if r % 2 == 0 else list(reversed(trees))):
                tree = trees[name]
                base = [str(tree / ".venv" / "bin" / "tinytorch"), "grade", "11", "submissions", "--nbs",
                        str(tree / "nbs"), "--jobs", "1"]
                for kind, extra in (("fixed", ["--shard", f"{empty}/99"]), ("class", []), ("again", [])):
                    course = f"c-{name}-{'class' if kind == 'again' else kind}-{r}"    # again: the class's course, re-run
                    with CpuMeter() as meter, LoadSampler() as load:
                        start = time.perf_counter()
                        run = subprocess.run(meter.wrap(base + ["--course", course, *extra]), cwd=work,
                                             capture_output=True, text=True)
                        seconds, cpu = time.perf_counter() - start, meter.seconds()
                    assert run.returncode == 0, f"{name} {kind}: exit {run.returncode}\n{run.stdout[-1500:]}\n{run.stderr[-1500:]}"
                    runs[name][kind].append({"cpu": cpu, "wall": seconds, "load": load.summary()})
    print(f"tinytorch grade --jobs 1, {n} submissions of 11_embeddings, {rounds} round(s); isolation: {isolation_level()}")
    print(f"this = {ROOT}, other = {trees['other']}")
    print(f"{'tree':<6} {'round':>5} {'fixed CPU s':>11} {'class CPU s':>11} {'again CPU s':>11} {'CPU s/sub':>9} "
          f"{'wall s/sub':>10}   load")
    per_sub = {name: [] for name in trees}
    for name in trees:
        for r, (f, c, a) in enumerate(zip(runs[name]["fixed"], runs[name]["class"], runs[name]["again"])):
            cpu_sub, wall_sub = (c["cpu"] - f["cpu"]) / n, (c["wall"] - f["wall"]) / n
            per_sub[name].append(cpu_sub)
            print(f"{name:<6} {r:>5} {f['cpu']:>11.1f} {c['cpu']:>11.1f} {a['cpu']:>11.1f} {cpu_sub:>9.2f} {wall_sub:>10.2f}"
                  f"   {c['load']}")
    med = {name: sorted(v)[len(v) // 2] for name, v in per_sub.items()}
    fixed = {name: sorted(x["cpu"] for x in runs[name]["fixed"])[rounds // 2] for name in trees}
    again = {name: sorted(x["cpu"] for x in runs[name]["again"])[rounds // 2] for name in trees}
    print(f"CPU s per submission (median): this {med['this']:.2f}, other {med['other']:.2f}, "
          f"this / other {med['this'] / med['other']:.2f}x; fixed CPU s per run: this {fixed['this']:.1f}, "
          f"other {fixed['other']:.1f} ({fixed['this'] / fixed['other']:.2f}x); the class graded again in its course: "
          f"this {again['this']:.1f}, other {again['other']:.1f} CPU s ({again['this'] / again['other']:.2f}x)")
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "grading_compare.json").write_text(json.dumps({"n": n, "trees": {k: str(v) for k, v in trees.items()},
                                                         "runs": runs}, indent=1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--limits", action="store_true", help="compare the default limits with none (--jobs 2)")
    parser.add_argument("--rounds", type=int, help="default: 1, and 2 with --limits or --compare")
    parser.add_argument("--phases", action="store_true", help="each submission's CPU seconds, by phase")
    parser.add_argument("--compare", metavar="DIR", help="another checkout (with its .venv) to compare with, side by side")
    args = parser.parse_args()
    if args.rounds is None:
        args.rounds = 1 if not (args.compare or args.limits) else 2
    if args.compare:
        return compare_trees(Path(args.compare), args.n, args.rounds)
    if args.limits:
        return compare_limits(args.n, args.rounds)
    if args.phases:
        return phases(args.n)
    import os
    cpu = OwnCpu()
    names = ["stock nbgrader, shared batch", "tinytorch grade --jobs 1", "tinytorch grade --jobs 2"]
    rows = {name: [] for name in names}
    n = args.n
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        students = make_submissions(work / "submissions", n)
        for r in range(args.rounds):
            for name in names[r % 3:] + names[:r % 3]:
                load, c0, start = os.getloadavg()[0], cpu.seconds(), time.perf_counter()
                if name.startswith("stock"):      # the autograde alone, as before
                    wall, used = stock_batch(work / "submissions", students, work / f"stock-{r}", cpu)
                    rows[name].append({"wall": wall, "cpu": used, "load": load})
                    continue
                else:
                    jobs = int(name[-1])
                    results, _ = grade(11, work / "submissions", ROOT / "nbs", work / f"course-j{jobs}-{r}",
                                       jobs=jobs, log=lambda *a: None)
                    assert not any(x.failure for x in results), [x.failure for x in results if x.failure]
                wall, used = time.perf_counter() - start, cpu.seconds()
                rows[name].append({"wall": wall, "cpu": None if c0 is None else used - c0, "load": load})
    print(f"grading {n} submissions of 11_embeddings, {args.rounds} round(s); isolation level: {isolation_level()}"
          + ("" if cpu.group else "; no cgroup could be made: no CPU seconds"))
    print(f"{'run':<32} {'round':>5} {'total s':>8} {'s/submission':>13} {'CPU s/submission':>17} {'load':>5}")
    for name in names:
        for r, x in enumerate(rows[name]):
            used = f"{x['cpu'] / n:.2f}" if x["cpu"] is not None else "-"
            print(f"{name:<32} {r:>5} {x['wall']:>8.1f} {x['wall'] / n:>13.2f} {used:>17} {x['load']:>5.2f}")
    med = lambda name, key: sorted(x[key] for x in rows[name])[len(rows[name]) // 2]
    stock, j1, j2 = (med(name, "wall") for name in names)
    print(f"wall, medians: --jobs 1 {j1 / stock:.2f}x stock, --jobs 2 {j2 / stock:.2f}x stock; "
          f"--jobs 2 speed-up over --jobs 1: {j1 / j2:.2f}x")
    if cpu.group:
        stock_cpu, j1_cpu = med(names[0], "cpu"), med(names[1], "cpu")
        print(f"CPU, medians: --jobs 1 {j1_cpu / stock_cpu:.2f}x stock ({j1_cpu / n:.2f} against "
              f"{stock_cpu / n:.2f} CPU s per submission)")
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "grading.json").write_text(json.dumps({"n": n, "runs": rows, "isolation": isolation_level()}, indent=1))


def phases(n: int):
    "Each submission's CPU seconds in `tinytorch grade --jobs 1`, split by phase; the kernel's slowest cells."
    from datetime import datetime
    import tinytorch.course.grading.grade_one as one
    import tinytorch.course.grading.grading as grading
    cpu = OwnCpu()
    assert cpu.group is not None, "--phases needs a cgroup of its own (root, cgroup v1 cpuacct or v2)"
    totals = {}

    def counted(module, name, label):
        fn, totals[label] = getattr(module, name), [0.0, 0.0]

        def wrapper(*args, **kwargs):
            c0, t0 = cpu.seconds(), time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                d = totals.setdefault(label, [0.0, 0.0])
                d[0], d[1] = d[0] + cpu.seconds() - c0, d[1] + time.perf_counter() - t0
        setattr(module, name, wrapper)

    counted(grading, "set_up_grading", "setting up the run (once)")
    counted(grading, "grade_one", "grade_one, in all")
    counted(one, "_run_autograde", "  nbgrader's sandboxed run")
    counted(one, "recheck_submission", "  the judge (server and judge)")
    counted(grading, "_publish", "publishing, in all")
    counted(grading, "write_feedback", "  the feedback page")
    cells = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        make_submissions(work / "submissions", n)
        c0, t0 = cpu.seconds(), time.perf_counter()
        results, _ = grading.grade(11, work / "submissions", ROOT / "nbs", work / "course", jobs=1,
                                   log=lambda *a: None)
        used, wall = cpu.seconds() - c0, time.perf_counter() - t0
        when = lambda text: datetime.fromisoformat(text.replace("Z", "+00:00"))
        for r in results:
            for cell in json.loads(Path(r.autograded).read_text())["cells"]:
                ran = cell.get("metadata", {}).get("execution", {})
                if "iopub.execute_input" in ran and "shell.execute_reply" in ran:
                    took = (when(ran["shell.execute_reply"]) - when(ran["iopub.execute_input"])).total_seconds()
                    cells[cell.get("id")] = cells.get(cell.get("id"), 0.0) + took
    print(f"tinytorch grade --jobs 1, {n} submissions of 11_embeddings: {used:.1f} CPU s, {wall:.1f} wall s "
          f"({used / n:.2f} and {wall / n:.2f} per submission, the run's set-up included)")
    print(f"{'phase':<36} {'CPU s/submission':>17} {'wall s/submission':>18}")
    for label, (c, w) in totals.items():
        print(f"{label:<36} {c / n:>17.2f} {w / n:>18.2f}")
    print(f"the kernel's cells: {sum(cells.values()) / n:.2f} wall s per submission; the slowest:")
    for cid, took in sorted(cells.items(), key=lambda kv: -kv[1])[:8]:
        print(f"  {cid:<32} {took / n:6.2f}")


if __name__ == "__main__":
    main()
