"""`tinytorch grade` without its sandbox: the refusal when no sandbox can be had, and `--no-sandbox` saying so in every
row; and the class helpers of tests/test_grading_limits.py, which grades a class with a vandal, a snoop and a runaway
of each kind in the sandbox, from a private (mode 700) folder, as root, and again, without the memory runaway, as a user
who is not root."""
import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from requirements import require

require("nbgrader")

from course_scenarios import write_submissions  # noqa: E402
from tinytorch.course.authoring.assignments import graded_parts  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "nbs" / "11_embeddings.ipynb"
PACKAGE = Path(__import__("tinytorch").__file__).parent
TESTS = {gid: pts for gid, kind, pts in graded_parts(SOURCE) if kind == "test"}
STUDENTS = ["reference", "broken-sinusoid", "vandal", "snoop"]      # graded with the runaways: tests/test_grading_limits.py
INSTRUCTOR_UID = 61_234            # a user who is not root (no account needed)
GRADE = "import sys; from tinytorch.cli import main; sys.exit(main(sys.argv[1:]))"


def digest(folder: Path) -> dict:
    "relative path -> sha256 of every file under `folder`."
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def released(release_11):
    return json.loads(release_11.read_text())


def make_class(base: Path, released: dict, students=STUDENTS, whole_lesson=()) -> dict:
    """A repository copy (nbs/ with the source notebook, the tinytorch package) and a class, all under `base`; the
    students not in `whole_lesson` hand in their notebooks without the lesson's demonstration cells."""
    repo, klass = base / "repo", base / "class"
    (repo / "nbs").mkdir(parents=True)
    shutil.copy(SOURCE, repo / "nbs")
    shutil.copytree(PACKAGE, repo / "tinytorch", ignore=shutil.ignore_patterns("__pycache__"))
    (base / "work").mkdir()                           # the grader's temporary folder ($TMPDIR)
    paths = {"course": str(klass / "course"), "submissions": str(klass / "submissions"), "nbs": str(repo / "nbs"),
             "package": str(repo / "tinytorch" / "core" / "embeddings.py"), "work": str(base / "work")}
    write_submissions(klass / "submissions", released, json.loads(SOURCE.read_text()), students, paths, whole_lesson)
    return {"repo": repo, "subs": klass / "submissions", "course": klass / "course"}


def grade_command(python, c: dict, *extra, env=None, user=None) -> dict:
    "The arguments of `subprocess.run` that run `tinytorch grade 11` by `python` (as `user` when given), on the class `c`."
    cmd = [str(python), "-c", GRADE, "grade", "11", str(c["subs"]), "--course", str(c["course"]),
           "--nbs", str(c["repo"] / "nbs"), "--jobs", "2", "--cell-timeout", "10", "--wall-seconds", "120", *extra]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    env = {**os.environ, "PYTHONPATH": str(c["repo"]), "PYTHONDONTWRITEBYTECODE": "1",
           "TMPDIR": str(c["repo"].parent / "work"), **(env or {})}
    return {"args": cmd, "env": env, "cwd": c["repo"].parent}


def grade_cli(python, c: dict, *extra, env=None, user=None) -> subprocess.CompletedProcess:
    "`tinytorch grade 11` run by `python` (as `user` when given), on the class `c`."
    return subprocess.run(**grade_command(python, c, *extra, env=env, user=user), capture_output=True, text=True,
                          timeout=900)


def venv_copy(dest: Path) -> Path:
    "The project venv at `dest`: its files hard-linked (copied across file systems), its scripts run its own Python."
    if subprocess.run(["cp", "-al", sys.prefix, dest], capture_output=True).returncode != 0:
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(sys.prefix, dest, symlinks=True)
    shebang = f"#!{sys.prefix}/bin/python"
    for script in (dest / "bin").iterdir():
        if script.is_file() and not script.is_symlink() and script.read_bytes().startswith(shebang.encode()):
            text = script.read_text().replace(shebang, f"#!{dest}/bin/python", 1)
            script.unlink()                           # a new file: the hard-linked original stays as it is
            script.write_text(text)
            script.chmod(0o755)
    return dest / "bin" / "python"


@pytest.mark.parametrize("bwrap, missing", [("/nonexistent/bwrap", "is not installed"), ("false", "cannot start one")])
def test_grade_refuses_without_a_sandbox(tmp_path, released, bwrap, missing):
    c = make_class(tmp_path, released, ["reference"])
    run = grade_cli(sys.executable, c, env={"TINYTORCH_BWRAP": bwrap})
    assert run.returncode == 2, (run.returncode, run.stdout, run.stderr)
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tinytorch grade: no sandbox:") and missing in lines[0], lines
    assert "bubblewrap" in lines[0] and "--no-sandbox" in lines[0], lines
    assert run.stdout == "" and not c["course"].exists(), "refused, yet something was written"


def test_no_sandbox_grades_and_every_row_says_so(tmp_path, released):
    c = make_class(tmp_path, released, ["reference", "broken-sinusoid"])
    run = grade_cli(sys.executable, c, "--no-sandbox", env={"TINYTORCH_BWRAP": "/nonexistent/bwrap"})
    assert run.returncode == 0, (run.returncode, run.stdout[-2000:], run.stderr[-2000:])
    assert "NONE" in run.stdout and "WITHOUT a sandbox" in run.stdout, run.stdout
    assert "--disk 1 GiB counts the work folder only" in run.stdout, run.stdout        # said, never silent
    rows = list(csv.DictReader(open(c["course"] / "grades_11_embeddings.csv")))
    assert len(rows) == 2 * (len(TESTS) + 3)
    assert all("graded WITHOUT a sandbox (--no-sandbox)" in r["reason"] for r in rows), [r["reason"] for r in rows]
    got = {r["part"]: float(r["points"]) for r in rows if r["student"] == "reference" and r["kind"] == "test"}
    assert got == TESTS
