"""Shared pytest setup.

`--nb-package-root DIR` runs the notebooks' test cells (tests/test_notebook_cells.py) against the
`tinytorch` package found in DIR (a student workspace or another build) instead of the installed one.
"""
import json
import os
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


def pytest_configure(config):
    root = config.getoption("--nb-package-root")
    if root:
        sys.path.insert(0, str(Path(root).resolve()))
        for name in [m for m in sys.modules if m == "tinytorch" or m.startswith("tinytorch.")]:
            del sys.modules[name]


import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def release_11(tmp_path_factory) -> Path:
    """The student release of module 11 from nbs/, built once per test session (nbgrader runs once, not once per
    test file): the path of the released notebook. Tests read it and write their own copies; none changes it."""
    pytest.importorskip("nbgrader")
    from tinytorch.course.assignments import release
    return release(11, ROOT / "nbs", tmp_path_factory.mktemp("release-11"), cell_timeout=30)


@pytest.fixture(scope="session")
def graded_pair(release_11, tmp_path_factory) -> Path:
    """Two students (PAIR) graded once per test session the way an instructor grades them,
    `tinytorch grade 11 submissions --course single --jobs 2 --cell-timeout 30`: the folder holding `submissions/`
    and the graded course `single/`. Tests that change a course (scores, comments, final grades) copy it first."""
    from course_scenarios import PAIR, write_submissions
    base = tmp_path_factory.mktemp("graded-pair")
    source = json.loads((ROOT / "nbs" / "11_embeddings.ipynb").read_text())
    write_submissions(base / "submissions", json.loads(release_11.read_text()), source, PAIR)
    cli = Path(sys.executable).parent / "tinytorch"           # the console script from pyproject.toml
    out = subprocess.run([cli, "grade", "11", "submissions", "--course", "single", "--nbs", ROOT / "nbs",
                          "--jobs", "2", "--cell-timeout", "30"], cwd=base, capture_output=True, text=True)
    assert out.returncode == 0, f"{out.stdout[-2000:]}{out.stderr[-2000:]}"
    return base
