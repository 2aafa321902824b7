"""`tinytorch autograder`: the generated Gradescope and PrairieLearn graders, run the way each platform runs them —
in a root file system laid out as the platform's (bubblewrap, the platform's folders bound) — their results.json
checked against the platform's published format, and their scores against `tinytorch grade`'s grades CSV.
The solved, blank and one-part-wrong notebooks (INSTALLED) are graded once, by the graders installed as their
platforms install them (tests/test_autograder_install.py, which makes the same checks of them)."""
import json
import os
import shutil
import subprocess
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from requirements import require

require("nbgrader")
jsonschema = require("jsonschema")

from course_scenarios import MORE, MY_END, build, demo_cells, odd_dim_cosines, replace, without_demos  # noqa: E402
from tinytorch.course.authoring.assignments import find_leaks, graded_parts, secret_lines  # noqa: E402
from tinytorch.course.grading.grade_table import grades_by_student  # noqa: E402
from tinytorch.course.isolation.sandbox import _python_folders  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "nbs" / "11_embeddings.ipynb"
NAME = SOURCE.name
PACKAGE = Path(__import__("tinytorch").__file__).parent
TESTS = {gid: pts for gid, kind, pts in graded_parts(SOURCE) if kind == "test"}
SECRETS = secret_lines(SOURCE)
CLI = [sys.executable, "-c", "import sys; from tinytorch.cli import main; sys.exit(main(sys.argv[1:]))"]
# graded by the installed graders in tests/test_autograder_install.py, with this file's checks of their results
INSTALLED = ("reference", "untouched", "broken-sinusoid")
# graded here, and by `tinytorch grade` in tests/conftest.py's `graded_more` (--cell-timeout 30)
GRADED_HERE = tuple(s for s in MORE if s not in INSTALLED)

pytestmark = pytest.mark.requires("bwrap")

# Gradescope's results.json, from its autograder specification, "Output format" and "Controlling Test Case
# Visibility": https://gradescope-autograders.readthedocs.io/en/latest/specs/
_VISIBILITY = {"enum": ["hidden", "after_due_date", "after_published", "visible"]}
GRADESCOPE_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "score": {"type": "number"}, "execution_time": {"type": "number"}, "output": {"type": "string"},
        "visibility": _VISIBILITY, "stdout_visibility": _VISIBILITY, "extra_data": {"type": "object"},
        "leaderboard": {"type": "array"},
        "tests": {"type": "array", "items": {
            "type": "object", "additionalProperties": False,
            "properties": {"score": {"type": "number"}, "max_score": {"type": "number"}, "name": {"type": "string"},
                           "number": {"type": "string"}, "output": {"type": "string"},
                           "tags": {"type": "array", "items": {"type": "string"}}, "visibility": _VISIBILITY,
                           "extra_data": {"type": "object"}}}},
    },
    # "score": optional, but required if not on each test case
    "anyOf": [{"required": ["score"]},
              {"required": ["tests"], "properties": {"tests": {"items": {"required": ["score"]}}}}],
}

# PrairieLearn's results.json, from "External Grading", section "Grading results":
# https://prairielearn.readthedocs.io/en/latest/externalGrading/ — `score` in [0, 1] is required when the submission
# is gradable; `gradable: false` may carry `format_errors` (a string or a list of strings); the tests that
# <pl-external-grader-results> renders have a name, points, max_points, message and output. At most 1 MB.
_PL_TEST = {"type": "object", "required": ["name"],
            "properties": {"name": {"type": "string"}, "description": {"type": "string"}, "points": {"type": "number"},
                           "max_points": {"type": "number"}, "message": {"type": "string"}, "output": {"type": "string"},
                           "images": {"type": "array"}}}
PRAIRIELEARN_SCHEMA = {
    "type": "object",
    "properties": {
        "gradable": {"type": "boolean"}, "score": {"type": "number", "minimum": 0, "maximum": 1},
        "message": {"type": "string"}, "output": {"type": "string"}, "images": {"type": "array"},
        "format_errors": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
        "tests": {"type": "array", "items": _PL_TEST},
    },
    "if": {"required": ["gradable"], "properties": {"gradable": {"const": False}}},
    "then": {"required": ["format_errors"]},
    "else": {"required": ["score"]},
}


def check_results(target: str, results: dict, raw: bytes):
    "results.json valid by the platform's published format, under its size limit, and free of secret lines."
    jsonschema.validate(results, GRADESCOPE_SCHEMA if target == "gradescope" else PRAIRIELEARN_SCHEMA)
    assert len(raw) < 1 << 20, f"{len(raw)} bytes: PrairieLearn's limit is 1 MB"
    shown = [t for t in results.get("tests", []) if t.get("visibility", "visible") == "visible"]
    texts = [results.get("output", ""), results.get("message", ""), *map(str, results.get("format_errors", [])),
             *(t.get("output", "") + t.get("message", "") for t in shown)]
    leaks = find_leaks(SECRETS, "\n".join(texts))
    assert not leaks, f"{target}: a student-visible message shows hidden tests or solutions: {leaks[:2]}"


# ---------------------------------------------------------------- the platforms' root file systems

def fake_root_command(mounts: list, entry: str, cwd: str, python: str = sys.executable) -> list:
    """bwrap command running `entry` in a root file system with the system folders, this Python (its venv and
    the package) and `mounts` [(host folder, path inside)] writable ([(host, inside, "ro")] read-only): the
    platform's container, as root."""
    args = ["bwrap", "--die-with-parent", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"]
    for d in ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/run"]
    for folder in _python_folders():
        args += ["--ro-bind", folder, folder]
    for host, inside, *read_only in mounts:
        args += ["--ro-bind" if read_only else "--bind", str(host), inside]
    return args + ["--setenv", "TINYTORCH_GRADER_PYTHON", python, "--setenv", "HOME", "/tmp",
                   "--chdir", cwd, "--", entry]


def installed_package_mount(package: Path) -> tuple:
    "The grader's copy of the package (graded module a stub) where this Python imports tinytorch from: as installed."
    return (package, str(PACKAGE))


def run_gradescope(built: Path, notebook_bytes: bytes | None, name: str, base: Path, python=sys.executable) -> tuple:
    """(results, raw bytes, stdout) of the Gradescope autograder in `built` (unzipped) on one submission. The grader's
    files are bound read-only at /autograder/source (no run can change them for the next) and its package where this
    Python imports tinytorch from (as PrairieLearn's below: one copy, compiled once, for every run)."""
    root = base / "autograder"
    (root / "source").mkdir(parents=True)
    shutil.copy(built / "run_autograder", root / "run_autograder")
    (root / "submission").mkdir()
    (root / "results").mkdir()
    if notebook_bytes is not None:
        (root / "submission" / name).write_bytes(notebook_bytes)
    cmd = fake_root_command([(root, "/autograder"), (built, "/autograder/source", "ro"),
                             installed_package_mount(built / "grader" / "package" / "tinytorch")],
                            "/autograder/run_autograder", "/autograder", python)
    run = subprocess.run(["nice", "-n", "10", *cmd], capture_output=True, text=True, timeout=900)
    raw = (root / "results" / "results.json").read_bytes()
    return json.loads(raw), raw, run.stdout + run.stderr


def run_prairielearn(built: Path, notebook_bytes: bytes | None, name: str, base: Path, python=sys.executable) -> tuple:
    "(results, raw bytes, stdout) of the PrairieLearn grader in `built` on one submission, in /grade."
    grade = base / "grade"
    shutil.copytree(built / "questions" / "11_embeddings" / "tests", grade / "tests")
    (grade / "student").mkdir()
    (grade / "data").mkdir()
    (grade / "data" / "data.json").write_text("{}")
    if notebook_bytes is not None:
        (grade / "student" / name).write_bytes(notebook_bytes)
    cmd = fake_root_command([(grade, "/grade"), installed_package_mount(built / "image" / "package" / "tinytorch")],
                            "/grade/tests/run_grader", "/grade", python)
    run = subprocess.run(["nice", "-n", "10", *cmd], capture_output=True, text=True, timeout=900)
    raw = (grade / "results" / "results.json").read_bytes()
    return json.loads(raw), raw, run.stdout + run.stderr


RUNNERS = {"gradescope": run_gradescope, "prairielearn": run_prairielearn}

# ---------------------------------------------------------------- fixtures

# A student whose code tries to read the graded source and to write the results file, then shows what happened in
# every message: the tests that call as_token_ids fail with the report as their visible message.
_SNOOP = '''
_ATTEMPTS = []
for _path in ("/autograder/source/grader/nbs/11_embeddings.ipynb", "/grade/tests/grader/nbs/11_embeddings.ipynb"):
    try:
        with open(_path) as _f:
            _ATTEMPTS.append("read " + _f.read(40))
    except OSError as _e:
        _ATTEMPTS.append(type(_e).__name__)
for _path in ("/autograder/results/results.json", "/grade/results/results.json"):
    try:
        with open(_path, "w") as _f:
            _f.write('{"score": 1000}')
        _ATTEMPTS.append("wrote " + _path)
    except OSError as _e:
        _ATTEMPTS.append(type(_e).__name__)
def as_token_ids(ids, vocab_size=None):
    raise RuntimeError("SNOOP " + " | ".join(_ATTEMPTS))
'''


@pytest.fixture(scope="module")
def submissions(release_11) -> dict:
    "student -> notebook bytes, as graded_pair's students hand them in (without the lesson's demonstration cells)."
    released = json.loads(release_11.read_text())
    source = json.loads(SOURCE.read_text())
    subs = build(released, source, {"course": "/nonexistent", "submissions": "/nonexistent"})
    solved = subs["reference"]                       # the instructor's code in a student's words (a copy is held at 0)
    subs["snoop-platform"] = replace(solved, "as-ids", "    " + MY_END, "    " + MY_END + "\n" + _SNOOP)
    subs["odd-dim-cosines"] = odd_dim_cosines(solved)
    demos = demo_cells(released)
    return {s: json.dumps(without_demos(nb, demos), indent=1).encode() for s, nb in subs.items()}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    "target -> the grader `tinytorch autograder 11 --target T` wrote (Gradescope's zip unzipped as Gradescope does)."
    out = tmp_path_factory.mktemp("autograders")
    found = {}
    for target in RUNNERS:
        run = subprocess.run([*CLI, "autograder", "11", "--target", target, "--to", str(out), "--nbs", str(ROOT / "nbs")],
                             capture_output=True, text=True)
        assert run.returncode == 0, run.stdout + run.stderr
        found[target] = out / (f"11_embeddings-{target}" + (".zip" if target == "gradescope" else ""))
    unzipped = out / "gradescope-unzipped"
    with zipfile.ZipFile(found["gradescope"]) as z:
        z.extractall(unzipped)
    for info in zipfile.ZipFile(found["gradescope"]).infolist():      # extractall drops the modes a zip carries
        (unzipped / info.filename).chmod(info.external_attr >> 16)
    return {"gradescope": unzipped, "prairielearn": found["prairielearn"], "zip": found["gradescope"]}


@pytest.fixture(scope="module")
def grades(graded_more) -> dict:
    "student -> {part: grades CSV row} from `tinytorch grade`: MORE, graded once per run (tests/conftest.py)."
    return grades_by_student(graded_more / "course" / "grades_11_embeddings.csv")


@pytest.fixture(scope="module")
def platform_result(built, submissions, tmp_path_factory):
    """(target, student) -> (results, raw, log) of that platform's grader on that student, each graded once, when asked.
    The runaway, which waits out its time limits (its kernel sleeps), starts at once in the background: the runs that
    work meanwhile use the time it waits."""
    def run(target: str, student: str, base: Path) -> tuple:
        return RUNNERS[target](built[target], submissions[student], NAME, base)

    background = ThreadPoolExecutor(max_workers=1)
    waiting = {("gradescope", "infinite-loop"): background.submit(
        run, "gradescope", "infinite-loop", tmp_path_factory.mktemp("gradescope-infinite-loop"))}
    cache = {}

    def get(target: str, student: str) -> tuple:
        if (target, student) not in cache:
            future = waiting.pop((target, student), None)
            cache[target, student] = future.result() if future else run(
                target, student, tmp_path_factory.mktemp(f"{target}-{student}"))
        return cache[target, student]
    yield get
    background.shutdown(wait=True)


# ---------------------------------------------------------------- the built files

def test_gradescope_zip_has_its_files_at_the_root(built):
    with zipfile.ZipFile(built["zip"]) as z:
        names = set(z.namelist())
        setup = z.read("setup.sh").decode()
    assert {"setup.sh", "run_autograder", "grader/config.json", "grader/requirements.txt", f"grader/nbs/{NAME}",
            "grader/package/pyproject.toml"} <= names, sorted(names)[:20]
    assert "bubblewrap" in setup and "chmod -R go= /autograder/source" in setup, setup
    stub = (built["gradescope"] / "grader" / "package" / "tinytorch" / "core" / "embeddings.py").read_text()
    assert "def " not in stub and not find_leaks(SECRETS, stub), "the package in the zip must not hold the exported solution"
    requirements = (built["gradescope"] / "grader" / "requirements.txt").read_text().split()
    # what `pip install 'tinytorch[course]'` installs, each at the version installed here
    assert {r.split("==")[0] for r in requirements} >= {"numpy", "matplotlib", "nbgrader", "nh3", "nbformat", "fastcore",
                                                      "jsonschema", "ipykernel"}, requirements
    assert all(r.count("==") == 1 for r in requirements), requirements


def test_prairielearn_question_enables_external_grading(built):
    question = built["prairielearn"] / "questions" / "11_embeddings"
    options = json.loads((question / "info.json").read_text())["externalGradingOptions"]
    assert options["enabled"] and options["entrypoint"] == "/grade/tests/run_grader", options
    assert 30 <= options["timeout"] <= 600, options           # PrairieLearn's limit is 600 s
    assert f'file-names="{NAME}"' in (question / "question.html").read_text()
    assert not find_leaks(SECRETS, (built["prairielearn"] / "image" / "package" / "tinytorch" / "core" / "embeddings.py").read_text())


@pytest.mark.parametrize("target", list(RUNNERS))
def test_the_grader_ships_its_course_with_both_gradebooks_generated(target, built, tmp_path, monkeypatch):
    """Each grader ships the course its runs grade in, both gradebooks generated when it was built: a run's copy of it
    generates nothing; the template holds no hidden test and no solution line."""
    from tinytorch.course.authoring import assignments
    from tinytorch.course.basics import generation_cache
    from tinytorch.course.basics.course import Course
    from tinytorch.course.grading import gradebook
    grader = built[target] / ("grader" if target == "gradescope" else "questions/11_embeddings/tests/grader")
    config = json.loads((grader / "config.json").read_text())
    shutil.copytree(grader / "course", tmp_path / "course")
    generated = []
    monkeypatch.setattr(assignments, "run_nbgrader", lambda folder, *args, **kwargs: generated.append(folder))
    monkeypatch.setattr(generation_cache, "gradebook_cache", lambda: None)     # nothing copied from this machine's cache
    template = gradebook.create_gradebooks(grader / "nbs" / NAME, Course(tmp_path / "course"), config["cell_timeout"]).root
    assert generated == [], f"a platform run would generate {generated}"
    text = "\n".join(p.read_bytes().decode("utf-8", "replace") for p in template.rglob("*") if p.is_file())
    assert "gradebook.db" in os.listdir(template) and not find_leaks(secret_lines(SOURCE), text)


# ---------------------------------------------------------------- the scores, against tinytorch grade

@pytest.mark.parametrize("student", GRADED_HERE)
def test_gradescope_scores_equal_tinytorch_grade(student, platform_result, grades):
    results, raw, log = platform_result("gradescope", student)
    check_results("gradescope", results, raw)
    rows = grades[student]
    scored = {t["name"]: t for t in results["tests"] if t["visibility"] == "visible"}
    for part, row in rows.items():
        expected = float(row["score"]) if row["kind"] == "test" else 0.0
        assert scored[part]["score"] == expected, f"{student} {part}: Gradescope {scored[part]['score']}, grades CSV {row['score']!r} ({row['status']})"
        assert scored[part]["max_score"] == (float(row["max_points"]) if row["kind"] == "test" else 0.0)
    total = sum(float(r["score"]) for r in rows.values() if r["kind"] == "test")
    assert results["score"] == total, f"{student}: Gradescope {results['score']}, grades CSV {total}\n{log[-3000:]}"


@pytest.mark.parametrize("student", ["odd-dim-cosines"])
def test_prairielearn_scores_equal_tinytorch_grade(student, platform_result, grades):
    results, raw, log = platform_result("prairielearn", student)
    check_results("prairielearn", results, raw)
    rows = grades[student]
    points = {t["name"]: t["points"] for t in results["tests"]}
    assert points == {p: float(r["score"]) if r["kind"] == "test" else 0.0 for p, r in rows.items()}, log[-3000:]
    got = sum(float(r["score"]) for r in rows.values() if r["kind"] == "test")
    assert results["gradable"] is True and results["score"] == pytest.approx(got / sum(TESTS.values()))


def test_the_scenarios_score_what_they_should(platform_result):
    """The equality above is only worth something if the scenarios differ: flagged, restored, timed out, a hidden failure
    (full, zero and one part wrong: tests/test_autograder_install.py)."""
    score = {s: platform_result("gradescope", s)[0]["score"] for s in GRADED_HERE}
    full = sum(TESTS.values())
    assert score["test-edited-to-pass"] == score["infinite-loop"] == full - TESTS["test_sinusoidal_table"], score
    assert score["syntax-error"] == 0, score      # flagged: the re-check can't import it, the score is the lower one
    assert score["odd-dim-cosines"] == full - TESTS["test_sinusoidal_table"], score


def test_a_flagged_part_says_it_is_held(platform_result):
    "(A failed and a passed part's messages: tests/test_autograder_install.py, on the one-part-wrong notebook.)"
    flagged = platform_result("gradescope", "syntax-error")[0]
    assert "held for your instructor to review" in flagged["tests"][0]["output"], flagged["tests"][0]


@pytest.mark.parametrize("target", ["gradescope", "prairielearn"])
def test_the_result_says_why_an_export_that_does_not_import_is_held(target, platform_result):
    "A stray `import torch` in export cell 'rope': every code part is held at 0, and the message says why, once."
    results, raw, log = platform_result(target, "stray-import")
    check_results(target, results, raw)
    said = results["output" if target == "gradescope" else "message"]
    assert said.startswith("Autograded: 0 / 24 points. Your exported code does not import outside the notebook "
                           "(ModuleNotFoundError: No module named 'torch', in export cell 'rope')"), said
    assert "tinytorch test" in said and results["score"] == 0, results


def test_a_hidden_tests_message_reaches_only_the_instructor(platform_result):
    results = platform_result("gradescope", "odd-dim-cosines")[0]
    entries = [t for t in results["tests"] if t["name"].startswith("test_sinusoidal_table")]
    expected = [(0, TESTS["test_sinusoidal_table"], "visible"), (0, 0, "after_published")]
    assert [(t["score"], t["max_score"], t["visibility"]) for t in entries] == expected, entries
    assert entries[0]["output"] == "passed the visible tests; a hidden test failed", entries[0]
    assert entries[1]["output"] == "a hidden test failed; what it said is shown to your instructor only", entries[1]
    results_text, log = json.dumps(results), platform_result("gradescope", "odd-dim-cosines")[2]
    assert "odd dim" not in results_text, "a hidden test's own message reached the results"
    assert "for the instructor only" in log and "odd dim, [3, 5]" in log, log[-3000:]   # Gradescope's stdout
    pl = platform_result("prairielearn", "odd-dim-cosines")[0]
    assert "4999" not in json.dumps(pl), "PrairieLearn has no later visibility: a hidden test's message never goes there"
    assert next(t for t in pl["tests"] if t["name"] == "test_sinusoidal_table")["message"] == entries[0]["output"]


def test_student_code_cannot_read_the_source_or_write_the_results(platform_result):
    results, _, log = platform_result("gradescope", "snoop-platform")
    said = next(t for t in results["tests"] if t["name"] == "test_as_token_ids")["output"]
    assert said.startswith("failed: ") and "RuntimeError" in said and "SNOOP " in said, said   # the test may wrap it
    attempts = said.split("SNOOP ", 1)[1].split("): ", 1)[0].split(" | ")
    assert len(attempts) == 4 and not any(a.startswith(("read", "wrote")) for a in attempts), attempts
    assert results["score"] < sum(TESTS.values()), results["score"]


# ---------------------------------------------------------------- submissions that can't be graded

BAD = {"not a notebook": (NAME, b"%PDF-1.4\n%\xe2\xe3\xcf\xd3 a PDF, not a notebook"),
       "wrong name": ("my_embeddings.ipynb", None), "empty": (NAME, b""), "nothing": (None, None)}


@pytest.mark.parametrize("target", list(RUNNERS))
@pytest.mark.parametrize("case", list(BAD))
def test_an_ungradable_submission_gets_a_clear_result(target, case, built, submissions, tmp_path):
    name, content = BAD[case]
    if case == "wrong name":
        content = submissions["reference"]
    results, raw, log = RUNNERS[target](built[target], content, name or NAME, tmp_path)
    check_results(target, results, raw)
    why = results["format_errors"][0] if target == "prairielearn" else results["output"]
    expect = {"not a notebook": "is not a Jupyter notebook", "wrong name": "(found: my_embeddings.ipynb); rename your notebook to 11_embeddings.ipynb",
              "empty": "11_embeddings.ipynb is empty (0 bytes)", "nothing": "no file named 11_embeddings.ipynb was submitted;"}[case]
    assert expect in why, f"{case}: {why!r}\n{log[-2000:]}"
    if target == "prairielearn":
        assert results["gradable"] is False, results
    else:
        assert results["score"] == 0 and results["tests"] == [], results


@pytest.mark.parametrize("target", list(RUNNERS))
def test_results_json_even_when_the_grader_cannot_start(target, built, submissions, tmp_path):
    "A grader Python that isn't there: run_autograder / run_grader still leave a results.json that says so."
    results, raw, log = RUNNERS[target](built[target], submissions["reference"], NAME, tmp_path, python="/nonexistent/python")
    check_results(target, results, raw)
    if target == "gradescope":
        assert results["score"] == 0 and "stopped before it could grade" in results["output"], results
    else:
        assert results["gradable"] is False and "stopped before it could grade" in results["format_errors"][0], results
