"""The student workspace (`tinytorch release 11 --workspace DIR`), installed into a fresh venv."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from requirements import require

require("nbgrader")

from course_scenarios import build, demo_cells, solve, without_demos  # noqa: E402
from tinytorch.course.authoring.assignments import graded_parts  # noqa: E402
from tinytorch.course.authoring.leaks import secret_lines, workspace_leaks  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "nbs" / "11_embeddings.ipynb"
VISIBLE = sum(p for _, kind, p in graded_parts(SOURCE) if kind == "test")
ROTATE = next(p for gid, kind, p in graded_parts(SOURCE) if gid == "test_rotate_pairs")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    base = tmp_path_factory.mktemp("student")
    ws = base / "workspace"
    cli = Path(sys.executable).parent / "tinytorch"
    out = subprocess.run([cli, "release", "11", "--workspace", ws, "--nbs", ROOT / "nbs"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    # as the student guide says (`pip install -e .`), without compiling every installed package's files up front:
    # the few modules the tests import are compiled as they are imported
    pip = subprocess.run([venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-compile", "-e", ws],
                         capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr[-2000:]
    return ws, venv / "bin"


def _run(bin_dir, *args, cwd):
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "MPLBACKEND": "Agg"}
    return subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, env=env)


def test_workspace_imports_student_stubs(workspace):
    ws, bin_dir = workspace
    code = ("import tinytorch.core.embeddings as m, sys; print(m.__file__)\n"
            "from tinytorch.core.embeddings import Embedding\n"
            "try:\n    Embedding(10, 4)([1])\nexcept NotImplementedError:\n    print('stub')\n")
    out = _run(bin_dir, bin_dir / "python", "-c", code, cwd="/")
    assert out.returncode == 0, out.stderr
    assert str(ws) in out.stdout and "stub" in out.stdout, out.stdout


def test_first_tinytorch_test_reports_zero(workspace):
    ws, bin_dir = workspace
    out = _run(bin_dir, bin_dir / "tinytorch", "test", "11", cwd=ws)
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"Total: 0/{VISIBLE:g}" in out.stdout, out.stdout
    parts = [line for line in out.stdout.splitlines() if line.strip().startswith(("PASS", "FAIL"))]
    assert len(parts) == sum(kind == "test" for _, kind, _ in graded_parts(SOURCE)), out.stdout
    assert all(line.strip().startswith("FAIL") and "NotImplementedError" in line for line in parts), out.stdout


def test_nothing_in_the_workspace_leaks(workspace):
    ws, _ = workspace
    secrets = secret_lines(SOURCE)
    assert len(secrets) > 50
    assert workspace_leaks(ws, secrets) == []


def test_filled_in_solutions_score_full_visible_points(workspace, tmp_path):
    ws, bin_dir = workspace
    student_nb = ws / "nbs" / "11_embeddings.ipynb"
    original = student_nb.read_text()
    try:       # every exercise filled in, the demonstration cells (no points) deleted; the next test runs them all
        release = json.loads(original)
        student_nb.write_text(json.dumps(without_demos(solve(release, json.loads(SOURCE.read_text())), demo_cells(release))))
        assert _run(bin_dir, bin_dir / "nbdev-export", cwd=ws).returncode == 0
        out = _run(bin_dir, bin_dir / "tinytorch", "test", "11", cwd=ws)
        assert out.returncode == 0, out.stdout + out.stderr
        assert f"Total: {VISIBLE:g}/{VISIBLE:g}" in out.stdout, out.stdout
        works = _run(bin_dir, bin_dir / "python", "-c",
                     "from tinytorch.core.embeddings import Embedding; print(Embedding(10, 4, seed=0)([1]).shape)", cwd="/")
        assert works.stdout.strip() == "(1, 4)", works.stderr
    finally:
        student_nb.write_text(original)
        _run(bin_dir, bin_dir / "nbdev-export", cwd=ws)


def test_the_workspace_ships_only_student_tooling(workspace):
    ws, bin_dir = workspace
    # the tooling's notebooks, in their folders (the lesson's are at the top of nbs/)
    tooling = sorted(p.relative_to(ws / "nbs").as_posix() for p in (ws / "nbs").glob("*/**/*.ipynb"))
    assert tooling == ["commands/cli.ipynb", "commands/demo.ipynb", "commands/options.ipynb",
                       "commands/test.ipynb", "course/basics/defaults.ipynb",
                       "course/basics/dependencies.ipynb", "course/basics/errors.ipynb",
                       "course/basics/notebooks.ipynb", "course/basics/vocabulary.ipynb",
                       "course/checking/judge.ipynb", "course/checking/judge_remote.ipynb",
                       "course/checking/judge_server.ipynb", "course/checking/judge_wire.ipynb",
                       "course/checking/nbtests.ipynb", "course/checking/recheck.ipynb",
                       "course/checking/selftest.ipynb"], tooling
    assert not (ws / "tinytorch" / "course" / "authoring" / "assignments.py").exists()
    usage = _run(bin_dir, bin_dir / "tinytorch", "--help", cwd=ws)
    assert usage.returncode == 0 and "{demo,test}" in usage.stdout, usage.stdout + usage.stderr
    grade = _run(bin_dir, bin_dir / "tinytorch", "grade", "11", "submissions", cwd=ws)
    assert grade.returncode == 2 and "invalid choice: 'grade'" in grade.stderr, grade.stdout + grade.stderr


def test_a_solved_notebook_runs_top_to_bottom_without_an_export(workspace):
    """Every exercise filled in, the notebook run from its first cell, and no `nbdev-export`: every cell must run,
    since the lesson's cells use the notebook's own definitions, never the package's stubs."""
    ws, bin_dir = workspace
    student_nb = ws / "nbs" / "11_embeddings.ipynb"
    original = student_nb.read_text()
    try:
        student_nb.write_text(json.dumps(solve(json.loads(original), json.loads(SOURCE.read_text()))))
        probe = ("from tinytorch.core.embeddings import sinusoidal_table\n"
                 "try:\n    sinusoidal_table(2, 2)\nexcept NotImplementedError:\n    print('stub')\n")
        stub = _run(bin_dir, bin_dir / "python", "-c", probe, cwd="/")
        assert stub.stdout.strip() == "stub", stub.stdout + stub.stderr          # nothing exported: the package has stubs
        out = _run(bin_dir, bin_dir / "nbdev-test", student_nb, cwd=ws)
        assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    finally:
        student_nb.write_text(original)


def test_tinytorch_test_says_the_grader_cannot_import_the_export(workspace):
    """A stray `import torch` (a module the grader doesn't have, nor this workspace) in export cell 'rope': the kernel
    loses only that cell's part, but the grader's re-check can't import the export at all. `tinytorch test` says so in
    the grader's words, with the points the grade will give."""
    ws, bin_dir = workspace
    student_nb = ws / "nbs" / "11_embeddings.ipynb"
    original = student_nb.read_text()
    try:
        release = json.loads(original)
        stray = build(release, json.loads(SOURCE.read_text()), {"course": "/nonexistent", "submissions": "/nonexistent"})
        student_nb.write_text(json.dumps(without_demos(stray["stray-import"], demo_cells(release))))
        out = _run(bin_dir, bin_dir / "tinytorch", "test", "11", cwd=ws)
        assert out.returncode == 1, out.stdout + out.stderr
        assert f"Total: {VISIBLE - ROTATE:g}/{VISIBLE:g}" in out.stdout, out.stdout   # rotate_pairs, in the kernel
        assert "Your exported cells do not import outside the notebook, as the grader imports them:\n" \
               "    ModuleNotFoundError: No module named 'torch', in export cell 'rope'\n" in out.stdout, out.stdout
        assert f"the grade will give 0/{VISIBLE:g} for the tests until your instructor reviews" in out.stdout, out.stdout
    finally:
        student_nb.write_text(original)
