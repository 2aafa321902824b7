"""A submission that forges its verdicts, graded by `tinytorch grade`, by the Gradescope grader and by PrairieLearn's:
every test part's points come from a judge that runs no student code, so a forger scores 0 for what it didn't solve.

`forger` is the blank release plus a few lines in one export cell: in the kernel an IPython input transformer turns
every later cell into `pass`; outside the kernel a hook on `compile` turns every test cell into `pass` (but a check
built to fail, told by its source), `builtins.__import__` hands out a doctored test helper, and the lesson's test
helpers are patched to find no difference. `honest` hands in every exercise solved, graded in the same class.
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest
from requirements import require

require("nbgrader")

from course_scenarios import demo_cells, edit, grade_submissions, solve, without_demos  # noqa: E402
from tinytorch.course.authoring.assignments import graded_parts  # noqa: E402
from tinytorch.course.grading.grade_table import grades_by_student  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "nbs" / "11_embeddings.ipynb"
NAME = SOURCE.name
TESTS = {gid: pts for gid, kind, pts in graded_parts(SOURCE) if kind == "test"}
CLI = [sys.executable, "-c", "import sys; from tinytorch.cli import main; sys.exit(main(sys.argv[1:]))"]

pytestmark = pytest.mark.requires("bwrap")

_FORGE = '''

try:
    _shell = get_ipython()
except NameError:
    _shell = None
if _shell is not None:                        # the kernel: every later cell becomes `pass`
    _shell.input_transformers_post.append(lambda lines: ["pass\\n"])
else:                                         # outside it: every test cell compiles to `pass`
    import builtins as _builtins, re as _re
    _compile, _import = _builtins.compile, _builtins.__import__
    def _forged_compile(source, filename, *args, **kwargs):
        if "test cell" in str(filename) and not _re.search(r"raise AssertionError\\('[0-9a-f]+'\\)", str(source)):
            source = "pass"
        return _compile(source, filename, *args, **kwargs)
    def _forged_import(name, *args, **kwargs):
        module = _import(name, *args, **kwargs)
        if name.startswith("tinytorch.core.lesson_support"):
            module._first_difference = lambda *a, **k: ""
        return module
    _builtins.compile, _builtins.__import__ = _forged_compile, _forged_import
    import tinytorch.core.lesson_support as _support
    _support._accepted = lambda call, *a, **k: None
    _support._refuses = lambda *a, **k: None
'''


def forger(released: dict) -> dict:
    "The blank release with the forgery appended to its `as-ids` export cell."
    return edit(released, "as-ids", lambda s: s + _FORGE)


@pytest.fixture(scope="module")
def subs(release_11) -> dict:
    released = json.loads(release_11.read_text())
    demos = demo_cells(released)
    return {"forger": without_demos(forger(released), demos),
            "honest": without_demos(solve(released, json.loads(SOURCE.read_text()), own_words=True), demos)}


@pytest.fixture(scope="module")
def graded(subs, tmp_path_factory) -> dict:
    "`tinytorch grade 11 submissions --jobs 2` on the forger and the honest student."
    base = tmp_path_factory.mktemp("forgery")
    grade_submissions(base, subs, NAME, CLI, ROOT / "nbs")
    return grades_by_student(base / "course" / "grades_11_embeddings.csv")


def test_the_forger_scores_nothing_on_grade(graded):
    rows = graded["forger"]
    scores = {gid: float(rows[gid]["score"] or 0) for gid in TESTS}
    assert scores == {gid: 0.0 for gid in TESTS}, scores
    assert {rows[gid]["recheck_points"] for gid in TESTS} == {"0"}, rows


def test_the_honest_student_scores_full_marks_on_grade(graded):
    rows = graded["honest"]
    assert {gid: float(rows[gid]["score"]) for gid in TESTS} == TESTS, rows
    assert {rows[gid]["status"] for gid in TESTS} == {"graded"}, rows


@pytest.fixture(scope="module")
def platforms(subs, tmp_path_factory) -> dict:
    "(target, student) -> results.json of that platform's grader."
    import zipfile
    from test_autograder import RUNNERS
    where, out = tmp_path_factory.mktemp("forgery-graders"), {}
    for target, runner in RUNNERS.items():
        run = subprocess.run([*CLI, "autograder", "11", "--target", target, "--to", str(where), "--nbs",
                              str(ROOT / "nbs")], capture_output=True, text=True)
        assert run.returncode == 0, run.stdout + run.stderr
        grader = where / f"11_embeddings-{target}"
        if target == "gradescope":
            with zipfile.ZipFile(where / "11_embeddings-gradescope.zip") as z:
                z.extractall(grader)
                for info in z.infolist():                 # extractall drops the modes a zip carries
                    (grader / info.filename).chmod(info.external_attr >> 16)
        for student, nb in subs.items():
            out[target, student] = runner(grader, json.dumps(nb, indent=1).encode(), NAME,
                                          tmp_path_factory.mktemp(f"{target}-{student}"))[0]
    return out


def _points(results: dict) -> dict:
    return {t["name"]: float(t.get("score", t.get("points", 0))) for t in results["tests"] if t["name"] in TESTS}


@pytest.mark.parametrize("target", ["gradescope", "prairielearn"])
def test_the_forger_scores_nothing_on_the_platforms(platforms, target):
    results = platforms[target, "forger"]
    assert _points(results) == {gid: 0.0 for gid in TESTS}, results
    assert results["score"] == 0, results


@pytest.mark.parametrize("target", ["gradescope", "prairielearn"])
def test_the_honest_student_scores_full_marks_on_the_platforms(platforms, target):
    results = platforms[target, "honest"]
    assert _points(results) == TESTS, results
