"""Shared pytest setup.

`--nb-package-root DIR` runs the notebooks' test cells (tests/test_notebook_cells.py) against the
`tinytorch` package found in DIR (a student workspace or another build) instead of the installed one.
"""
import fcntl
import json
import os
import re
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")

try:    # property tests never time anything: no per-example deadline, no "generation too slow" failure
    from hypothesis import HealthCheck, settings
    settings.register_profile("tinytorch", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("tinytorch")
except ImportError:
    pass
sys.path.insert(0, str(Path(__file__).parent))


def pytest_addoption(parser):
    parser.addoption("--nb-package-root", default=None,
                     help="folder holding the tinytorch package to test the notebooks against")
    parser.addoption("--nbs-dir", default=None, help="folder of notebooks whose test cells to run (default: nbs/)")
    parser.addoption("--store-durations", action="store_true",
                     help="write each test file's seconds (setup, call and teardown summed) into tests/durations.json")


def pytest_configure(config):
    if not hasattr(config, "workerinput"):                # the main process (with pytest-xdist: not a worker)
        config.pluginmanager.register(DurationRecorder(config.getoption("--store-durations")), "tinytorch-durations")
        _own_cache(config)
    root = config.getoption("--nb-package-root")
    if root:
        sys.path.insert(0, str(Path(root).resolve()))
        for name in [m for m in sys.modules if m == "tinytorch" or m.startswith("tinytorch.")]:
            del sys.modules[name]


def _own_cache(config):
    """tinytorch's cache (generated gradebooks, tried graders) in a folder of this test run, unless the run was given
    one (scripts/test.sh shares one between the notebooks and pytest): never the user's own. Set before the workers
    start, so they, and every command the tests run, use it; removed at the end when it was made here."""
    if os.environ.get("TINYTORCH_CACHE"):
        return
    import shutil
    import tempfile
    os.environ["TINYTORCH_CACHE"] = folder = tempfile.mkdtemp(prefix="tinytorch-test-cache-")
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))


import pytest  # noqa: E402
from requirements import require  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

# Seconds per test file from the last `--store-durations` run (setup, call and teardown of its tests, summed). The files
# run longest first (scripts/test.sh: two workers, a file at a time each, in this order with --no-loadscope-reorder), so
# the long files start at once and the short ones fill in at the end; a file missing from it runs last.
DURATIONS = ROOT / "tests" / "durations.json"


def file_seconds() -> dict:
    "test file name -> seconds, from tests/durations.json ({} if there is none)."
    return json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}


# The lesson and its engine (`pytest -m core`, seconds); every other test is `course` (the course tooling, grading).
CORE_FILES = {"test_tensor.py", "test_nn.py", "test_tokenization.py", "test_embeddings.py", "test_use_and_rope.py",
              "test_fast_paths.py", "test_cell_sizes.py"}


def is_core(item) -> bool:
    """A core test: in a CORE_FILES file, or a notebook-cell item of a lesson notebook (one at the top of the
    notebooks' folder; the tooling's notebooks are in its folders, nbs/course/<stage>/ and nbs/commands/)."""
    if item.path.name == "test_notebook_cells.py" and hasattr(item, "callspec"):
        params = item.callspec.params
        notebook = params["notebook_cell"][0].path if "notebook_cell" in params else params["notebook"]
        folder = Path(item.config.getoption("--nbs-dir") or ROOT / "nbs")
        return Path(notebook).resolve().parent == folder.resolve()
    return item.path.name in CORE_FILES


def pytest_collection_modifyitems(session, config, items):
    for item in items:
        item.add_marker("core" if is_core(item) else "course")
    seconds = file_seconds()
    items.sort(key=lambda item: (item.path.name not in seconds, -seconds.get(item.path.name, 0)))    # stable sort


class DurationRecorder:
    """Each test's setup, call and teardown seconds, added to its file's and to its worker's. It runs in the main
    process: with pytest-xdist that one receives every worker's reports. At the end it says how busy each worker was
    (a worker idle long before the other: the order or the split of the files is off), and with `--store-durations`
    writes the files' seconds into tests/durations.json (the files that ran get their new seconds; the others keep
    theirs)."""

    def __init__(self, store: bool):
        self.store, self.files, self.workers = store, {}, {}

    def pytest_runtest_logreport(self, report):
        name = report.nodeid.split("::")[0].rsplit("/", 1)[-1]
        worker = getattr(getattr(report, "node", None), "gateway", None)
        worker = worker.id if worker else "main"
        self.files[name] = self.files.get(name, 0.0) + report.duration
        self.workers[worker] = self.workers.get(worker, 0.0) + report.duration

    def pytest_terminal_summary(self, terminalreporter):
        if len(self.workers) > 1:
            busy = ", ".join(f"{w} {s:.0f} s" for w, s in sorted(self.workers.items()))
            terminalreporter.write_line(f"seconds of tests per worker: {busy}")

    def pytest_sessionfinish(self, session):
        if not self.store:
            return
        kept = {name: s for name, s in file_seconds().items() if (ROOT / "tests" / name).exists()}
        merged = {**kept, **{name: round(s, 1) for name, s in self.files.items()}}
        DURATIONS.write_text(json.dumps(dict(sorted(merged.items(), key=lambda kv: -kv[1])), indent=1) + "\n")


@pytest.hookimpl(tryfirst=True)                 # before the test's fixtures are built
def pytest_runtest_setup(item):
    "`@pytest.mark.requires(tool)`: the tool, or a skip (a failure with CI=true; tests/requirements.py)."
    for mark in item.iter_markers("requires"):
        require(*mark.args)


def built_once(tmp_path_factory, name: str, build) -> Path:
    """`build(folder)` (it returns a path) run once per test run, in a new folder `name`: with pytest-xdist the first
    worker to ask builds it while the others wait for it, then all of them get the same path. A failed build fails
    every worker that asks, at once, with its error (no worker builds it twice)."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return build(tmp_path_factory.mktemp(name))
    shared = tmp_path_factory.getbasetemp().parent                # one folder for every worker of this run
    record = shared / f"{name}.json"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not record.exists():
            try:
                (shared / name).mkdir()
                record.write_text(json.dumps({"path": str(build(shared / name))}))
            except BaseException as e:
                record.write_text(json.dumps({"error": f"{type(e).__name__}: {e}"}))
                raise
        built = json.loads(record.read_text())
    if "error" in built:
        pytest.fail(f"{name}: the build another worker ran failed: {built['error']}")
    return Path(built["path"])


@pytest.fixture(scope="session")
def release_11(tmp_path_factory) -> Path:
    """The student release of module 11 from nbs/, built once per test run (nbgrader runs once, not once per
    test file or worker): the path of the released notebook. Tests read it and write their own copies; none changes it."""
    require("nbgrader")
    from tinytorch.course.authoring.assignments import release
    return built_once(tmp_path_factory, "release-11", lambda folder: release(11, ROOT / "nbs", folder, cell_timeout=30))


@pytest.fixture(scope="session")
def graded_pair(release_11, tmp_path_factory) -> Path:
    """Two students (PAIR) graded once per test run the way an instructor grades them,
    `tinytorch grade 11 submissions --course single --jobs 2 --cell-timeout 30`: the folder holding `submissions/`
    and the graded course `single/`. Tests that change a course (scores, comments, final grades) copy it first.
    The two hand in their notebooks without the lesson's demonstration cells (`course_scenarios.without_demos`):
    the tests that use the pair check the machinery around grading, not the lesson."""
    return built_once(tmp_path_factory, "graded-pair", lambda base: _grade_pair(release_11, base))


def _grade_pair(release_11: Path, base: Path) -> Path:
    from course_scenarios import PAIR, write_submissions
    source = json.loads((ROOT / "nbs" / "11_embeddings.ipynb").read_text())
    write_submissions(base / "submissions", json.loads(release_11.read_text()), source, PAIR, whole_lesson=())
    cli = Path(sys.executable).parent / "tinytorch"           # the console script from pyproject.toml
    out = subprocess.run([cli, "grade", "11", "submissions", "--course", "single", "--nbs", ROOT / "nbs",
                          "--jobs", "2", "--cell-timeout", "30"], cwd=base, capture_output=True, text=True)
    assert out.returncode == 0, f"{out.stdout[-2000:]}{out.stderr[-2000:]}"
    return base


@pytest.fixture(scope="session")
def graded_more(release_11, tmp_path_factory) -> Path:
    """The scenarios of `course_scenarios.MORE` graded once per test run, `tinytorch grade 11 submissions --course course
    --jobs 2 --cell-timeout 30`, without the lesson's demonstration cells: the folder holding the graded `course/`.
    The platforms' graders (tests/test_autograder.py, tests/test_autograder_install.py) are compared with its CSV, and
    tests/test_hidden_tests.py reads its odd-dim-cosines student (a hidden test that fails) from its course."""
    return built_once(tmp_path_factory, "graded-more", lambda base: _grade_more(release_11, base))


def _grade_more(release_11: Path, base: Path) -> Path:
    from course_scenarios import MORE, build, demo_cells, odd_dim_cosines, without_demos
    released = json.loads(release_11.read_text())
    subs = build(released, json.loads((ROOT / "nbs" / "11_embeddings.ipynb").read_text()),
                 {"course": "/nonexistent", "submissions": "/nonexistent"})
    subs["odd-dim-cosines"] = odd_dim_cosines(subs["reference"])
    demos = demo_cells(released)
    for student in MORE:
        (base / "submissions" / student).mkdir(parents=True)
        (base / "submissions" / student / "11_embeddings.ipynb").write_text(
            json.dumps(without_demos(subs[student], demos), indent=1))
    cli = Path(sys.executable).parent / "tinytorch"
    out = subprocess.run(["nice", "-n", "10", cli, "grade", "11", "submissions", "--course", "course", "--nbs",
                          ROOT / "nbs", "--jobs", "2", "--cell-timeout", "30"], cwd=base, capture_output=True, text=True)
    assert out.returncode in (0, 3), f"{out.stdout[-2000:]}{out.stderr[-2000:]}"
    return base


@pytest.fixture(scope="session")
def graded_report_class(release_11, tmp_path_factory) -> Path:
    """`solution_variants.report_class` graded once per test run as an instructor grades it,
    `tinytorch grade 11 submissions --course course --jobs 2 --due ...` (nbgrader's collected layout,
    each with its timestamp.txt; bea handed in a day late), without the lesson's demonstration cells:
    the folder holding the graded `course/`. tests/test_class_report.py reports on it."""
    return built_once(tmp_path_factory, "graded-report-class",
                      lambda base: _grade_report_class(release_11, base))


def _grade_report_class(release_11: Path, base: Path) -> Path:
    from course_scenarios import demo_cells, without_demos
    from payloads import MARK
    from solution_variants import report_class
    released = json.loads(release_11.read_text())
    demos = demo_cells(released)
    source = json.loads((ROOT / "nbs" / "11_embeddings.ipynb").read_text())
    klass = report_class(released, source, MARK)
    for student, nb in klass.items():
        folder = base / "submissions" / student / "11_embeddings"
        folder.mkdir(parents=True)
        (folder / "11_embeddings.ipynb").write_text(json.dumps(without_demos(nb, demos), indent=1))
        (folder / "timestamp.txt").write_text("2026-12-02 09:00:00 UTC" if student == "bea"
                                              else "2026-11-30 20:00:00 UTC")
    cli = Path(sys.executable).parent / "tinytorch"
    out = subprocess.run(["nice", "-n", "10", cli, "grade", "11", "submissions", "--course", "course",
                          "--nbs", ROOT / "nbs", "--jobs", "2", "--cell-timeout", "30",
                          "--due", "2026-12-01T00:00+00:00", "--late-policy", "per-day:10"],
                         cwd=base, capture_output=True, text=True)
    assert out.returncode in (0, 3), f"{out.stdout[-2000:]}{out.stderr[-2000:]}"
    return base
