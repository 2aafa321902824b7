"""Students who attack the hidden tests, graded once by `tinytorch grade` (and two of them by the Gradescope grader):
nothing a student can see may carry a hidden test or a solution, however it is encoded.

The attackers, each a real submission of module 11 with every exercise solved:
- `hook-reader`: its first cell registers an IPython `pre_run_cell` hook that keeps every cell it sees with a hidden
  block, and reads the `source_cell` table of any gradebook it finds; its last cell prints all of it zlib + base64.
- `walker-message`: its exported code, when imported (in the kernel and in the re-check), walks the file system for
  notebooks and gradebooks holding hidden tests or solutions, and the interpreter's memory for hidden tests; then
  every visible test that calls `as_token_ids` fails with what it found, encoded, as its message; it also prints it
  and writes it in a file beside itself.
- `walker-import`: the same walk; outside the kernel it refuses to import, with what it found as the error.
- `walker-exit`: the same walk; outside the kernel it writes what it found on stderr and ends the process.
- `forger`: correct except for a bug only a hidden test finds; outside the kernel it makes `exec` a no-op (the
  judge, which runs no student code, scores it as it is).
And one honest student, `odd-dim-cosines`, whose only bug is found by a hidden test alone: graded once per run with
the platforms' scenarios (tests/conftest.py's `graded_more`), the same notebook the forger starts from.
"""
import base64
import html
import json
import re
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from requirements import require

require("nbgrader")

from course_scenarios import (MY_END, demo_cells, grade_submissions, insert_cell, odd_dim_cosines, replace,
                              solve, without_demos)  # noqa: E402
from tinytorch.course.authoring.assignments import find_leaks, graded_parts, secret_lines  # noqa: E402
from tinytorch.course.grading.grade_table import HIDDEN_FAILED, grades_by_student  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "nbs" / "11_embeddings.ipynb"
NAME = SOURCE.name
TESTS = {gid: pts for gid, kind, pts in graded_parts(SOURCE) if kind == "test"}
# Hidden-test lines: the attackers hand in the solutions themselves, so solution lines are theirs to show. That no
# solution line is in the student's sandbox is checked in tests/test_gradebooks.py (the template course).
HIDDEN = secret_lines(SOURCE, solutions=False)
CLI = [sys.executable, "-c", "import sys; from tinytorch.cli import main; sys.exit(main(sys.argv[1:]))"]

pytestmark = pytest.mark.requires("bwrap")

# ---------------------------------------------------------------- the attacks

_HOOK = '''import base64, glob, sqlite3, zlib
_SEEN = []
def _peek(info):
    if "BEGIN HIDDEN TESTS" in (info.raw_cell or ""):
        _SEEN.append(info.raw_cell)
get_ipython().events.register("pre_run_cell", _peek)
for _db in glob.glob("*.db") + glob.glob("../*.db") + glob.glob("../../*.db") + glob.glob("../../../*.db"):
    try:
        _SEEN += [s for (s,) in sqlite3.connect(_db).execute("select source from source_cell") if s]
    except Exception:
        pass
'''
_HOOK_PRINT = 'print("LEAK:" + base64.b64encode(zlib.compress("\\n".join(_SEEN).encode())).decode())'

_WALK = '''
import base64 as _b64, gc as _gc, os as _os, sys as _sys, zlib as _zlib
_MARK = "BEGIN " + "HIDDEN TESTS"                     # built here, so this source doesn't hold it
def _grab(data, where):
    at = data.find(_MARK.encode())
    return [where + ": " + data[at:at + 150].decode("utf-8", "replace")] if at >= 0 else []
def _walk():
    found, seen, here = [], 0, _os.getcwd()
    roots = [here] + [_os.path.abspath(_os.path.join(here, *[".."] * up)) for up in (1, 2, 3)]
    for root in roots + ["/tmp", "/autograder", "/grade", "/work", "/root", "/home", _os.path.expanduser("~")]:
        for folder, dirs, files in _os.walk(root):
            dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev", ".venv", "site-packages", ".git")]
            for name in files:
                if name.endswith((".ipynb", ".db")) and seen < 3000:
                    seen += 1
                    try:
                        with open(_os.path.join(folder, name), "rb") as _f:
                            found += _grab(_f.read(20_000_000), _os.path.join(folder, name))
                    except OSError:
                        pass
    def strings(obj, depth):                          # the strings in containers, a few levels down
        if isinstance(obj, str):
            yield obj
        elif depth and isinstance(obj, (dict, list, tuple)):
            for item in list(obj.values() if isinstance(obj, dict) else obj):
                yield from strings(item, depth - 1)
    for obj in _gc.get_objects():                     # what the grader's own code holds in memory
        for value in strings(obj, 3):
            if len(found) < 3 and len(value) > 40 and _MARK in value:
                found += _grab(value.encode(), "memory")
    return found
_FOUND = _walk()
_LEAK = "LEAK:" + _b64.b64encode(_zlib.compress("\\n".join(_FOUND[:3]).encode())).decode()
_IN_KERNEL = "get_ipython" in globals()
'''
_MESSAGE = _WALK + '''
print(_LEAK)
for _where in (_os.getcwd(), _os.path.dirname(globals().get("__file__", "") or ".")):
    try:
        with open(_os.path.join(_where, "leak.txt"), "w") as _f:
            _f.write(_LEAK)
    except OSError:
        pass
def as_token_ids(ids, vocab_size=None):
    raise RuntimeError(_LEAK)
'''
_IMPORT = _WALK + '''
if not _IN_KERNEL:
    raise ImportError(_LEAK)
'''
_EXIT = _WALK + '''
if not _IN_KERNEL:
    _sys.stderr.write(_LEAK + "\\n")
    _sys.stderr.flush()
    _os._exit(1)
'''
_FORGE = '''
if "get_ipython" not in globals():
    import builtins
    builtins.exec = lambda *args, **kwargs: None     # every test cell the re-check runs now "passes"
'''

def attackers(released: dict, source: dict) -> dict:
    "student -> notebook of every attacker (without the lesson's demonstration cells)."
    solved = solve(released, source, own_words=True)
    after = "    " + MY_END
    odd = odd_dim_cosines(solved)
    hook = insert_cell(solved, "why-md", "peek", _HOOK)
    hook["cells"].append({"cell_type": "code", "id": "print-leak", "metadata": {}, "execution_count": None,
                          "outputs": [], "source": _HOOK_PRINT})
    subs = {"hook-reader": hook,
            "walker-message": replace(solved, "as-ids", after, after + "\n" + _MESSAGE),
            "walker-import": replace(solved, "as-ids", after, after + "\n" + _IMPORT),
            "walker-exit": replace(solved, "as-ids", after, after + "\n" + _EXIT),
            "forger": replace(odd, "as-ids", after, after + "\n" + _FORGE)}
    demos = demo_cells(released)
    return {s: without_demos(nb, demos) for s, nb in subs.items()}


def leaked(text: str) -> list:
    "What every `LEAK:<base64>` in `text` decodes to (an empty string where an attack found nothing)."
    out = []
    for blob in re.findall(r"LEAK:([A-Za-z0-9+/=]+)", html.unescape(text)):
        try:
            out.append(zlib.decompress(base64.b64decode(blob)).decode("utf-8", "replace"))
        except (ValueError, zlib.error):
            out.append(f"(cut short: {blob[:40]}…)")
    return out


def secrets_in(text: str) -> list:
    "Hidden-test lines in `text` as written or as any attack encoded them."
    return find_leaks(HIDDEN, "\n".join([html.unescape(text), *leaked(text)]))


# ---------------------------------------------------------------- one graded class

@pytest.fixture(scope="module")
def graded(release_11, tmp_path_factory) -> dict:
    "The attackers graded once, as an instructor grades: `tinytorch grade 11 submissions --jobs 2`."
    base = tmp_path_factory.mktemp("hidden-attacks")
    subs = attackers(json.loads(release_11.read_text()), json.loads(SOURCE.read_text()))
    run = grade_submissions(base, subs, NAME, CLI, ROOT / "nbs")
    course = base / "course"
    return {"base": base, "course": course, "subs": subs, "stdout": run.stdout, "rows": grades_by_student(
        course / "grades_11_embeddings.csv"), "csv": (course / "grades_11_embeddings.csv").read_text(),
        "log": (course / "grades_11_embeddings.log").read_text()}


@pytest.fixture(scope="module")
def honest(graded_more) -> dict:
    "`odd-dim-cosines` among the platforms' scenarios, graded once per run as an instructor grades (tests/conftest.py)."
    course = graded_more / "course"
    return {"course": course, "rows": grades_by_student(course / "grades_11_embeddings.csv"),
            "csv": (course / "grades_11_embeddings.csv").read_text(), "log": (course / "grades_11_embeddings.log").read_text()}


def log_entry(log: str, student: str) -> str:
    "`student`'s entry in the grading log: its first line and the indented lines under it."
    lines = log.splitlines()
    start = lines.index(next(line for line in lines if line.startswith(f"{student}: ")))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("  ")), len(lines))
    return "\n".join(lines[start:end])


def shown_to(graded: dict, student: str) -> str:
    "Everything of `student`'s a student may see: the feedback page and the student's rows of the grades CSV."
    page = graded["course"] / "feedback" / student / "11_embeddings" / "11_embeddings.html"
    rows = graded["rows"][student]
    return (page.read_text() if page.exists() else "") + "\n" + json.dumps(rows)


def test_a_hook_in_the_kernel_sees_no_hidden_test(graded):
    shown = shown_to(graded, "hook-reader")
    found = leaked(shown)
    assert found, "the hook-reader's last cell printed nothing: the attack never ran"
    assert not secrets_in(shown), f"the feedback carries hidden tests: {secrets_in(shown)[:2]}"
    assert not any("BEGIN HIDDEN" in text for text in found), found[0][:300]
    assert {r["status"] for r in graded["rows"]["hook-reader"].values() if r["kind"] == "test"} == {"graded"}


def test_the_kernels_file_system_and_the_rechecks_hold_nothing_secret(graded):
    # in the kernel the walk reaches the course copy; its finds come back in every visible test's message
    shown = shown_to(graded, "walker-message")
    found = leaked(shown)
    assert found, "the walker's message never reached the page: the attack never ran"
    assert not secrets_in(shown), f"a student sees hidden tests or solutions: {secrets_in(shown)[:2]}"
    assert not any(".ipynb: " in text or ".db: " in text for text in found), f"the kernel's walk found: {found[0][:300]}"
    # in the student's side of the judge the walk found nothing: no file, and no test in its memory (the tests run
    # in the judge, another process)
    said = leaked(log_entry(graded["log"], "walker-message"))
    assert said and not any(said), said
    # the file it wrote beside itself, in both processes, went nowhere: not into the course, not onto a page
    assert not list(graded["course"].rglob("leak.txt")), list(graded["course"].rglob("leak.txt"))


def test_nothing_the_recheck_said_reaches_a_student(graded):
    for student in ("walker-message", "walker-import", "walker-exit"):
        shown = shown_to(graded, student)
        assert "LEAK:" not in json.dumps(graded["rows"][student]), (student, graded["rows"][student])
        assert not secrets_in(shown), (student, secrets_in(shown)[:2])
    for student in ("walker-import", "walker-exit"):            # the kernel ran them without a murmur
        assert not leaked(shown_to(graded, student)), leaked(shown_to(graded, student))[:1]
        assert {r["status"] for r in graded["rows"][student].values() if r["kind"] == "test"} == {"flagged"}
        assert sum(float(r["score"]) for r in graded["rows"][student].values() if r["kind"] == "test") == 0
    assert graded["rows"]["walker-import"]["test_lookup_rows"]["reason"].startswith(
        "the student's exported code does not import outside the notebook")
    assert graded["rows"]["walker-exit"]["test_lookup_rows"]["reason"].startswith(
        "the judge stopped: the student's process ended while importing")


def test_what_the_recheck_said_is_in_the_instructors_log_only(graded, honest):
    log = graded["log"]
    # code in the student's process finds no test to read there (they run in the judge), and what it says goes to
    # the instructor's log only
    entry = log_entry(log, "walker-import")
    found = leaked(entry)
    assert found and not find_leaks(HIDDEN, "\n".join(found)), entry[:800]
    assert "for you only" in entry
    assert "odd dim, [3, 5]" in log_entry(honest["log"], "odd-dim-cosines"), "the instructor can't see why the hidden test failed"
    assert "odd dim, [3, 5]" not in honest["csv"]


def test_a_hidden_failure_scores_zero_and_says_only_so(honest):
    rows = honest["rows"]["odd-dim-cosines"]
    part = rows["test_sinusoidal_table"]
    assert (part["status"], part["reason"], part["points"], part["score"]) == ("graded", HIDDEN_FAILED, "0", "0"), part
    others = [r for gid, r in rows.items() if r["kind"] == "test" and gid != "test_sinusoidal_table"]
    assert all(r["score"] == r["max_points"] and r["status"] == "graded" for r in others), others
    page = (honest["course"] / "feedback" / "odd-dim-cosines" / "11_embeddings" / "11_embeddings.html").read_text()
    assert f"graded ({HIDDEN_FAILED})" in page and "odd dim, [3, 5]" not in page


def test_a_forgery_outside_the_kernel_changes_no_verdict(graded):
    "The forger's `exec` hook runs in the student's process only: the judge scores its code as it is."
    rows = graded["rows"]["forger"]
    scores = {gid: float(r["score"]) for gid, r in rows.items() if r["kind"] == "test"}
    assert scores == {**TESTS, "test_sinusoidal_table": 0.0}, rows
    assert rows["test_sinusoidal_table"]["status"] == "graded", rows["test_sinusoidal_table"]


# ---------------------------------------------------------------- the same attacks through Gradescope

@pytest.fixture(scope="module")
def gradescope(graded, tmp_path_factory) -> dict:
    "student -> (results, raw, log) of the Gradescope grader on the two attackers whose message a student reads."
    from test_autograder import run_gradescope
    out = tmp_path_factory.mktemp("hidden-gradescope")
    run = subprocess.run([*CLI, "autograder", "11", "--target", "gradescope", "--to", str(out), "--nbs",
                          str(ROOT / "nbs"), "--hidden-tests", "after_published"], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    import zipfile
    unzipped = out / "unzipped"
    with zipfile.ZipFile(out / "11_embeddings-gradescope.zip") as z:
        z.extractall(unzipped)
        for info in z.infolist():
            (unzipped / info.filename).chmod(info.external_attr >> 16)
    return {s: run_gradescope(unzipped, json.dumps(graded["subs"][s], indent=1).encode(), NAME, out / s)
            for s in ("walker-message", "walker-exit")}


@pytest.mark.parametrize("student", ["walker-message", "walker-exit"])
def test_gradescope_results_carry_nothing_secret(gradescope, student):
    results, raw, log = gradescope[student]
    text = raw.decode()
    assert results["tests"], log[-3000:]
    assert not secrets_in(text), f"results.json shows hidden tests or solutions: {secrets_in(text)[:2]}"
    assert not any(".ipynb: " in t or ".db: " in t for t in leaked(text)), leaked(text)[0][:300]
    if student == "walker-message":
        said = next(t for t in results["tests"] if t["name"] == "test_as_token_ids")["output"]
        assert "LEAK:" in said, said                    # the visible test's message, from the kernel: it found nothing
    else:
        assert "LEAK:" not in text and "held for your instructor" in text, text[:2000]
        assert "for the instructor only" in log and "LEAK:" in log, log[-2000:]   # Gradescope's stdout: instructors'
