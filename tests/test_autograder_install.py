"""The graders installed as their platforms install them — Gradescope's `setup.sh`, the steps of PrairieLearn's
Dockerfile — into a fresh venv from the grader's own files only (no `PYTHONPATH`, nothing of the course's venv in the
root file system), then run by the platform's own entry point in its layout on a solved, a blank, a broken and a
non-notebook submission: the scores equal `tinytorch grade`'s grades CSV, and the results file is the platform's
format. A grader whose install forgets a package it imports fails here.

The two platforms install the same requirements: pip resolves them once, into a folder of wheels that both installs
read in place of the index (their own steps, unchanged)."""
import json
import os
import shutil
import subprocess
import sys
import tomllib
from contextlib import contextmanager
from pathlib import Path

import pytest
from requirements import require

require("nbgrader")

from course_scenarios import build, demo_cells, without_demos  # noqa: E402
from tinytorch.course.authoring.assignments import graded_parts  # noqa: E402
from tinytorch.course.platforms.autograder_try import GRADER_VENV, installed_image, platform_root, run_on_platform, unpack_zip  # noqa: E402
from tinytorch.course.grading.grade_table import grades_by_student  # noqa: E402
from test_autograder import TESTS, check_results  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "nbs" / "11_embeddings.ipynb"
NAME = SOURCE.name
TOTAL = sum(pts for _, kind, pts in graded_parts(SOURCE) if kind == "test")
CLI = [sys.executable, "-c", "import sys; from tinytorch.cli import main; sys.exit(main(sys.argv[1:]))"]
TARGETS = ("gradescope", "prairielearn")
GRADED = ("reference", "untouched", "broken-sinusoid")      # solved, blank, one part wrong
NOT_A_NOTEBOOK = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3 a PDF, not a notebook"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"     # PATH inside the platform roots

pytestmark = pytest.mark.requires("bwrap")      # bubblewrap lays out the platforms' folders


@pytest.fixture(scope="module")
def submissions(release_11, tmp_path_factory) -> dict:
    "student -> the file they hand in, named as the assignment asks (without the lesson's demonstration cells)."
    released = json.loads(release_11.read_text())
    subs = build(released, json.loads(SOURCE.read_text()), {"course": "/nonexistent", "submissions": "/nonexistent"})
    demos = demo_cells(released)
    found = {}
    for student in GRADED:
        found[student] = tmp_path_factory.mktemp(student) / NAME
        found[student].write_text(json.dumps(without_demos(subs[student], demos), indent=1))
    found["not-a-notebook"] = tmp_path_factory.mktemp("pdf") / NAME
    found["not-a-notebook"].write_bytes(NOT_A_NOTEBOOK)
    return found


@pytest.fixture(scope="module")
def grades(graded_pair, graded_more) -> dict:
    "student -> {part: grades CSV row} from `tinytorch grade`: each graded once per run (tests/conftest.py)."
    return {**grades_by_student(graded_pair / "single" / "grades_11_embeddings.csv"),
            **grades_by_student(graded_more / "course" / "grades_11_embeddings.csv")}


def install_files(target: str, grader: Path) -> Path:
    "The folder holding the requirements.txt and package/ that `target`'s install steps read."
    return grader / "grader" if target == "gradescope" else grader / "image"


def download_wheels(files: Path, wheels: Path) -> Path:
    """The wheels pip picks, from the index this machine's pip is configured with, for the grader's requirements.txt and
    for building its package (`[build-system] requires`), downloaded into `wheels` for the same Python as the install's."""
    build = tomllib.loads((files / "package" / "pyproject.toml").read_text())["build-system"]["requires"]
    python3 = shutil.which("python3", path=SYSTEM_PATH) or "python3"         # the python3 the install steps run
    version = subprocess.run([python3, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    run = subprocess.run(["nice", "-n", "10", sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(wheels),
                          "--only-binary", ":all:", "--python-version", version,
                          "--requirement", str(files / "requirements.txt"), *build], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return wheels


@contextmanager
def pip_reads(wheels: Path):
    "pip (here, and inside the platform roots, which are handed this machine's PIP_* settings) installs from `wheels` only."
    saved = {k: os.environ.get(k) for k in ("PIP_NO_INDEX", "PIP_FIND_LINKS")}
    os.environ.update(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(wheels))
    try:
        yield
    finally:
        for name, value in saved.items():
            os.environ.pop(name) if value is None else os.environ.__setitem__(name, value)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """target -> (the grader as the platform receives it, its image folder): `tinytorch autograder 11 --target T`, then
    installed as the platform installs it, into a fresh venv in an empty cache; each platform once, when first asked.
    pip resolves the requirements once (both graders ship the same ones), for the first install."""
    out, cache, found = tmp_path_factory.mktemp("graders"), tmp_path_factory.mktemp("install-cache"), {}
    wheels = {}

    def get(target: str) -> tuple:
        if target not in found:
            run = subprocess.run([*CLI, "autograder", "11", "--target", target, "--to", str(out), "--nbs",
                                  str(ROOT / "nbs")], capture_output=True, text=True)
            assert run.returncode == 0, run.stdout + run.stderr
            grader = out / f"11_embeddings-{target}"
            if target == "gradescope":
                grader = unpack_zip(grader.with_suffix(".zip"), out / "gradescope-unzipped")
            files = install_files(target, grader)
            key = (files / "requirements.txt").read_text() + (files / "package" / "pyproject.toml").read_text()
            said = []
            try:
                if key not in wheels:
                    wheels[key] = download_wheels(files, tmp_path_factory.mktemp("wheels"))
                with pip_reads(wheels[key]):
                    found[target] = grader, installed_image(target, grader, cache, log=said.append)
            except Exception as e:                        # one failed install fails each of its tests, once
                found[target] = e
            print(f"{target}: " + "\n".join(said[-2:]))
        if isinstance(found[target], Exception):
            raise found[target]
        return found[target]
    return get


@pytest.fixture(scope="module")
def graded(installed, submissions, tmp_path_factory):
    "(target, student) -> (TryRun, results.json's bytes) of the installed grader on that student's file, each once."
    done = {}

    def get(target: str, student: str) -> tuple:
        if (target, student) not in done:
            grader, image = installed(target)
            work = tmp_path_factory.mktemp(f"{target}-{student}")
            run = run_on_platform(target, grader, image, submissions[student], work)
            written = work / ("autograder" if target == "gradescope" else "grade") / "results" / "results.json"
            done[target, student] = run, (written.read_bytes() if written.exists() else b"")
        return done[target, student]
    return get


@pytest.mark.parametrize("target", TARGETS)
def test_the_grader_venv_holds_nothing_of_the_course_venv(target, installed):
    "The platform's Python sees only the system and the venv its install made: the course's venv and clone are absent."
    image = installed(target)[1]
    probe = "import sys, tinytorch; print(tinytorch.__file__); print('\\n'.join(p for p in sys.path if p))"
    cmd = platform_root([(image / "opt", "/opt", False)], "/") + [f"{GRADER_VENV}/bin/python", "-c", probe]
    run = subprocess.run(cmd, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    where, *path = run.stdout.split()
    assert where.startswith(f"{GRADER_VENV}/lib/"), where
    assert all(p.startswith(("/usr/", GRADER_VENV)) for p in path), path
    assert not any(str(ROOT) in p or p.startswith(sys.prefix) for p in path), path


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("student", GRADED)
def test_installed_grader_scores_equal_tinytorch_grade(target, student, graded, grades):
    run, raw = graded(target, student)
    assert run.results is not None and not run.failed, f"{target} {student}: the grader failed\n{run.output[-3000:]}"
    check_results(target, run.results, raw)
    rows = grades[student]
    tests = [t for t in run.results["tests"] if t.get("visibility", "visible") == "visible"]
    scored = {t["name"]: t["score"] if target == "gradescope" else t["points"] for t in tests}
    assert scored == {p: float(r["score"]) if r["kind"] == "test" else 0.0 for p, r in rows.items()}, run.output[-3000:]
    if target == "gradescope":
        top = {t["name"]: t["max_score"] for t in tests}
        assert top == {p: float(r["max_points"]) if r["kind"] == "test" else 0.0 for p, r in rows.items()}, top
    else:
        assert run.results["gradable"] is True, run.results
    total = sum(float(r["score"]) for r in rows.values() if r["kind"] == "test")
    score = run.results["score"]
    assert (score == total) if target == "gradescope" else (score * TOTAL == pytest.approx(total)), \
        f"{student}: {score}, grades CSV {total}"
    # the equality above is only worth something if the scenarios differ: full, zero, one part
    expected = {"reference": TOTAL, "untouched": 0, "broken-sinusoid": TOTAL - TESTS["test_sinusoidal_table"]}[student]
    assert total == expected, f"{student}: {total} in the grades CSV, expected {expected}"


def test_installed_grader_messages_visible(graded):
    "What a student reads of a part that failed and one that passed; PrairieLearn says the same as Gradescope."
    results = graded("gradescope", "broken-sinusoid")[0].results
    part = next(t for t in results["tests"] if t["name"] == "test_sinusoidal_table")
    assert part["score"] == 0 and part["visibility"] == "visible", part
    assert part["output"].startswith("failed: AssertionError: position 0 is sin 0 = 0, cos 0 = 1"), part["output"]
    passed = next(t for t in results["tests"] if t["name"] == "test_lookup_rows")
    assert passed["output"] == "passed" and passed["score"] == passed["max_score"] == TESTS["test_lookup_rows"], passed
    pl = graded("prairielearn", "broken-sinusoid")[0].results
    assert next(t for t in pl["tests"] if t["name"] == "test_sinusoidal_table")["message"] == part["output"]


@pytest.mark.parametrize("target", TARGETS)
def test_installed_grader_refuses_a_file_that_is_not_a_notebook(target, graded):
    run, raw = graded(target, "not-a-notebook")
    assert run.results is not None and not run.failed, run.output[-3000:]
    check_results(target, run.results, raw)
    said = run.results["output"] if target == "gradescope" else run.results["format_errors"][0]
    assert f"{NAME} is not a Jupyter notebook" in said, said
    assert (run.results["score"], run.results["tests"]) == (0, []) if target == "gradescope" else run.results["gradable"] is False
