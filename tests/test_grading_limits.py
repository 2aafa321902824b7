"""`tinytorch grade --jobs 2` in its sandbox, run as an instructor would, on one class graded from a private (mode 700)
folder as root and as a user who is not root. The class holds a runaway of each kind (memory, processes, disk, /tmp;
as the user who is not root, all but memory: see NOT_ROOT_CLASS): honest submissions keep full marks (as root the
reference hands in the whole lesson, whose demonstrations grading leaves out), each runaway is stopped at its limit and named in
its row, the graders' memory stays under jobs x limit + the grader's own, and nothing is left on disk. It also holds a
vandal and a snoop: nothing outside the vandal's own work folder changes, and the snoop reads no course file and
reaches no network.
(tests/test_grading_sandbox.py: the refusal when no sandbox can be had, and `--no-sandbox`.)"""
import csv
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest
from requirements import require

require("nbgrader")

from course_scenarios import runaway_report, vandal_report  # noqa: E402
from test_grading_sandbox import (  # noqa: E402,F401  (`released` is a fixture)
    INSTRUCTOR_UID, SOURCE, STUDENTS, TESTS, digest, grade_command, make_class, released, venv_copy,
)
from tinytorch.course.authoring.leaks import find_leaks, notebook_text, secret_lines  # noqa: E402
from tinytorch.course.isolation.limits import tree_memory  # noqa: E402

HONEST = ["reference", "honest-tmp"]
WHOLE_LESSON = ["reference"]          # the lesson's demonstrations too (handed in, left out of grading's run)
RUNAWAYS = ["runaway-memory", "runaway-processes", "runaway-disk", "runaway-tmp"]
CLASS = list(dict.fromkeys(HONEST + RUNAWAYS + STUDENTS))      # STUDENTS: the vandal, the snoop and their classmates
# Graded as the instructor who is not root, the sandbox stands alone (no unprivileged uid) and the process limit counts
# the instructor's own user: the class is graded again, all but its two costliest gradings. The memory limit is the
# same `prlimit --data` either way, which no process that isn't root can raise, so the memory runaway and the whole
# lesson's peak are graded as root only; as the user who is not root, the reference hands in its graded cells.
NOT_ROOT_CLASS = [s for s in CLASS if s != "runaway-memory"]
JOBS, MEMORY, PROCESSES, DISK = 2, 1536 << 20, 128, 64 << 20
LIMITS = ["--memory", f"{MEMORY >> 20}M", "--processes", str(PROCESSES), "--disk", f"{DISK >> 20}M",
          "--cell-timeout", "120", "--wall-seconds", "900"]      # hang guards only: a busy machine is slow
SLACK = 384 << 20     # per job: what a submission's processes hold beyond the data limit (libraries, the nbgrader process)


def _own_memory(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return next(int(line.split()[1]) << 10 for line in f if line.startswith("Pss:"))
    except (OSError, StopIteration):
        return 0


PAGE = os.sysconf("SC_PAGE_SIZE")
LAG = 64 << 20        # how far the kernel's quick resident counts (statm) may trail the page walk behind smaps_rollup


def _resident(pid: int) -> int:
    "Resident bytes of `pid`, from its quick counters (no page walk): never below its proportional share (Pss)."
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return 0


def _tree_resident(pid: int) -> int:
    "Resident bytes of `pid` and its descendants, summed without a page walk: never below `tree_memory(pid)`."
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += _resident(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += map(int, f.read().split())
        except (OSError, ValueError):
            pass
    return total


def grade_sampled(python, c: dict, user=None, env=None) -> dict:
    "Grade the class `c` with the test's limits, sampling the memory of the grader and everything it started."
    proc = subprocess.Popen(**grade_command(python, c, *LIMITS, env=env, user=user), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    peaks = {"all": 0, "grader": 0}
    done = threading.Event()

    def sample():
        # ten times a second; the proportional counts walk every page of the tree (milliseconds of CPU each), so they
        # are read only when the quick resident counts, never below them, say a sample could beat the peak so far
        while not done.is_set():
            if _tree_resident(proc.pid) + LAG > peaks["all"]:
                peaks["all"] = max(peaks["all"], tree_memory(proc.pid))
            if _resident(proc.pid) + LAG > peaks["grader"]:
                peaks["grader"] = max(peaks["grader"], _own_memory(proc.pid))
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        out, err = proc.communicate(timeout=1500)
    finally:
        done.set()
        sampler.join()
    rows = list(csv.DictReader(open(c["course"] / "grades_11_embeddings.csv")))
    log = (c["course"] / "grades_11_embeddings.log").read_text()
    return {"returncode": proc.returncode, "stdout": out, "stderr": err, "rows": rows, "log": log, **peaks}


def graded_class(base: Path, released: dict, user=None) -> dict:
    students, whole_lesson = (CLASS, WHOLE_LESSON) if user is None else (NOT_ROOT_CLASS, ())
    c = make_class(base, released, students, whole_lesson=whole_lesson)
    python = venv_copy(base / "venv")            # a venv the unprivileged grading ids can't even reach
    if user is not None:                         # the instructor's own private folder
        for path in [base, *base.rglob("*")]:
            if "venv" not in path.relative_to(base).parts:
                os.chown(path, user, user, follow_symlinks=False)
    before = {"subs": digest(c["subs"]), "repo": digest(c["repo"])}
    run = grade_sampled(python, c, user=user, env={"HOME": str(base)} if user else None)
    run.update(user=user, before=before, c=c, students=students)
    run["left_in_work"] = sorted(str(p) for p in (base / "work").iterdir())
    run["processes_left"] = processes_in(base)
    run["course"] = c["course"]
    return run


@pytest.fixture(scope="module", params=["root", "not root"])
def graded(request, released):
    if os.geteuid() != 0:
        pytest.skip("sets up files for other users (needs root)")
    require("bwrap")
    base = Path(tempfile.mkdtemp())
    try:
        yield graded_class(base, released, None if request.param == "root" else INSTRUCTOR_UID)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def rows_of(run: dict, student: str) -> list:
    return [r for r in run["rows"] if r["student"] == student]


def test_the_run_says_what_each_submission_may_use(graded):
    assert graded["returncode"] == 3, (graded["returncode"], graded["stdout"][-3000:], graded["stderr"][-3000:])
    assert "limits per submission: memory 1.5 GiB per process, 128 processes and threads, disk 64 MiB" in \
        graded["stdout"], graded["stdout"]
    assert "NOT enforced" not in graded["stdout"], graded["stdout"]


def test_honest_submissions_keep_full_marks(graded):
    for student in HONEST:
        rows = [r for r in rows_of(graded, student) if r["kind"] == "test"]
        assert {r["part"]: float(r["points"]) for r in rows} == TESTS, (student, rows, graded["log"])
        assert {r["status"] for r in rows} == {"graded"}, (student, rows)


def test_a_runaway_whose_kernel_lives_keeps_its_points_and_is_flagged(graded):
    runaways = [(student, option, bound) for student, option, bound in (
        ("runaway-memory", "--memory", MEMORY >> 20), ("runaway-processes", "--processes", PROCESSES))
        if student in graded["students"]]
    assert runaways, graded["students"]
    for student, option, bound in runaways:
        rows = [r for r in rows_of(graded, student) if r["kind"] == "test"]
        assert {r["part"]: float(r["points"]) for r in rows} == TESTS, (student, rows, graded["log"])
        assert {r["status"] for r in rows} == {"flagged"} and all(option in r["reason"] for r in rows), rows
        assert all(float(r["score"]) == float(r["points"]) for r in rows), rows     # the re-check agrees
        kind = student.split("-")[1]
        notebook = graded["course"] / "autograded" / student / "11_embeddings" / "11_embeddings.ipynb"
        reached = runaway_report(json.loads(notebook.read_text()))[kind]
        assert 0 < reached < bound, (student, reached)                               # stopped below its own bound


def test_a_disk_runaway_is_stopped_and_fails_naming_the_limit(graded):
    for student in ("runaway-disk", "runaway-tmp"):
        rows = rows_of(graded, student)
        assert rows and all("--disk" in r["reason"] for r in rows), rows
        assert {r["status"] for r in rows} <= {"failed", "flagged"}, rows
    used = [int(float(n) * (1024 if unit == "GiB" else 1)) for n, unit in
            re.findall(r"runaway-disk: failed\n  - used more than 64 MiB on disk.*?disk ([\d.]+) (MiB|GiB)", graded["log"])]
    assert used and used[0] < 1024, graded["log"]                                   # stopped well before 1.5 GiB


def test_memory_stays_under_jobs_times_the_limit_and_nothing_is_left(graded):
    bound = JOBS * (MEMORY + SLACK) + graded["grader"]
    assert 0 < graded["all"] < bound, (graded["all"] >> 20, bound >> 20)
    assert graded["left_in_work"] == [], graded["left_in_work"]
    assert graded["processes_left"] == [], graded["processes_left"]                  # no grading process lives on


def test_the_sandbox_is_said_and_as_root_each_submission_runs_as_an_unprivileged_user(graded):
    assert "bubblewrap sandbox" in graded["stdout"], graded["stdout"]
    if graded["user"] is None:
        assert "unprivileged user id" in graded["stdout"], graded["stdout"]     # root: the uid layer as well
    else:
        assert "unprivileged user id" not in graded["stdout"], graded["stdout"]  # not root: the sandbox alone


def test_a_vandal_changes_nothing_outside_its_own_work_folder(graded):
    c, before, rows = graded["c"], graded["before"], graded["rows"]
    got = {s: {r["part"]: float(r["points"]) for r in rows if r["student"] == s and r["kind"] == "test"}
           for s in STUDENTS}
    assert got["reference"] == TESTS == got["snoop"], got
    vandal = {r["status"] for r in rows if r["student"] == "vandal"}
    assert vandal <= {"failed", "flagged"}, vandal             # it overwrote its own gradebook copy: loudly
    assert got["broken-sinusoid"] == {**TESTS, "test_sinusoidal_table": 0.0}, got["broken-sinusoid"]
    assert {r["status"] for r in rows if r["student"] in ("reference", "snoop") and r["kind"] == "test"} == {"graded"}
    assert digest(c["subs"]) == before["subs"], "the submissions changed"
    assert digest(c["repo"]) == before["repo"], "the repository (source notebook, package) changed"
    frozen = c["course"] / "source" / "11_embeddings" / "11_embeddings.ipynb"   # the grader's copy of the source
    assert hashlib.sha256(frozen.read_bytes()).hexdigest() == before["repo"]["nbs/11_embeddings.ipynb"], \
        "the course's source notebook changed"
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{c['course'] / 'gradebook.db'}", "tinytorch") as gb:
        assert {s.id for s in gb.students} == set(graded["students"])
        assert gb.find_submission("11_embeddings", "reference").score == sum(TESTS.values())


def test_a_snoop_reads_no_course_file_reaches_no_network_and_prints_no_secret(graded):
    snoop = json.loads((graded["course"] / "autograded" / "snoop" / "11_embeddings" / "11_embeddings.ipynb").read_text())
    report = vandal_report(snoop)
    assert report is not None, "the snoop's code never ran"
    for item in report:
        if item.startswith(("read ", "could not read ")) and not item.endswith("embeddings.py"):
            assert item.startswith("could not read "), report
    assert [i for i in report if i.startswith("network: ")] and "network: reached pypi.org" not in report, report
    printed = "\n".join("".join(o.get("text", "")) for cell in snoop["cells"] for o in cell.get("outputs", []))
    # the package's embeddings.py it read is its own export (mounted over the stub for the lesson's demonstrations):
    # no hidden test, and no line of the solution that it didn't write itself
    own = notebook_text(graded["c"]["subs"] / "snoop" / "11_embeddings.ipynb")
    assert find_leaks({s for s in secret_lines(SOURCE) if s not in own}, printed) == []


def processes_in(folder: Path) -> list:
    "Command lines of the processes whose working folder lies in `folder`."
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and Path(os.readlink(proc / "cwd")).is_relative_to(folder):
                found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            pass
    return found


@pytest.mark.parametrize("option, value, expected", [
    ("--memory", "lots", "expected a size such as 512M, 2G or 1.5G"),
    ("--disk", "0", "expected at least 1 MiB"),
    ("--processes", "many", "expected a whole number of processes and threads"),
])
def test_a_bad_limit_is_refused_before_any_work(tmp_path, capsys, option, value, expected):
    from tinytorch.cli import main
    code = main(["grade", "11", str(tmp_path / "submissions"), "--course", str(tmp_path / "course"), option, value])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1, (code, lines)
    assert lines[0].startswith(f"tinytorch grade: {option} {value!r}: {expected}"), lines
    assert not (tmp_path / "course").exists()
