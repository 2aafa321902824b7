"""What the `tinytorch` command does when something goes wrong.

Every command, given a bad input, prints exactly one line on stderr that names the value and says
what was expected, and exits with code 2 (a `UsageError`). A bug — any other exception — is not
dressed up as one: Python's traceback is printed and the exit code is 1. Bad inputs are caught
before any slow work (no kernel, no nbgrader, no training), so these tests are quick.
"""
import importlib
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tinytorch.cli import main
from tinytorch.course.basics.errors import UsageError

ROOT = Path(__file__).resolve().parents[1]
TINYTORCH = Path(sys.executable).parent / "tinytorch"       # the console script from pyproject.toml
COMMANDS = ["demo", "release", "test", "grade", "grade-merge", "formgrade", "grades", "docs", "metadata",
            "report"]


def _notebook(cells: list) -> str:
    return json.dumps({"cells": [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {},
                                  "outputs": [], "source": src} for i, src in enumerate(cells)],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def _fake_graded_course(folder: Path) -> Path:
    "The files `formgrade` looks for before it starts a server (nothing else is read)."
    folder.mkdir()
    (folder / "gradebook.db").write_bytes(b"")
    (folder / "nbgrader_config.py").write_text("c = get_config()\n")
    return folder


def _busy_port():
    "A socket listening on 127.0.0.1; its port is in use until it is closed."
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


# (command, arguments with {tmp} for the test's folder, a setup step, words the one line must hold).
# `{tmp}` in the words stands for the folder too: the line must name the value it rejects.
BAD_INPUTS = {
    "demo --text missing": (
        ["demo", "--text", "{tmp}/missing.txt", "--out", "{tmp}/plots"], None,
        ["--text {tmp}/missing.txt", "no such file"]),
    "demo --text binary": (
        ["demo", "--text", "{tmp}/data.bin", "--out", "{tmp}/plots"],
        lambda t: (t / "data.bin").write_bytes(b"\x00\x01binary"),
        ["{tmp}/data.bin", "expected UTF-8 text"]),
    "demo --out is a file": (
        ["demo", "--out", "{tmp}/plots.png"], lambda t: (t / "plots.png").write_bytes(b"png"),
        ["--out {tmp}/plots.png", "is a file, expected a folder"]),
    "release: module not a number": (
        ["release", "eleven", "--nbs", "{tmp}", "--to", "{tmp}/release"], None,
        ["'eleven'", "a module is named by its number"]),
    "release: no notebook for the module": (
        ["release", "11", "--nbs", "{tmp}", "--to", "{tmp}/release"], None,
        ["module 11", "in {tmp}", "no single notebook"]),
    "release --workspace not empty": (
        ["release", "11", "--nbs", "{tmp}", "--workspace", "{tmp}/ws"],
        lambda t: ((t / "ws").mkdir(), (t / "ws" / "notes.txt").write_text("mine")),
        ["{tmp}/ws", "not empty", "choose a new folder"]),
    "release --nbs missing": (
        ["release", "11", "--nbs", "{tmp}/nowhere"], None,
        ["--nbs {tmp}/nowhere", "no such folder"]),
    "test --notebook missing": (
        ["test", "11", "--notebook", "{tmp}/mine.ipynb"], None,
        ["--notebook {tmp}/mine.ipynb", "no such file"]),
    "test --notebook not a notebook": (
        ["test", "11", "--notebook", "{tmp}/mine.ipynb"],
        lambda t: (t / "mine.ipynb").write_text("print('hello')\n"),
        ["{tmp}/mine.ipynb", "not a readable notebook"]),
    "grade: submissions folder missing": (
        ["grade", "11", "{tmp}/submissions", "--nbs", str(ROOT / "nbs"), "--course", "{tmp}/course"], None,
        ["{tmp}/submissions", "no such folder", "expected SUBMISSIONS/<student>/<notebook>.ipynb"]),
    "grade --course is a file": (
        ["grade", "11", "{tmp}", "--course", "{tmp}/grades.csv"], lambda t: (t / "grades.csv").write_text(""),
        ["--course {tmp}/grades.csv", "is a file, expected a folder"]),
    "grade --shard 0/2": (
        ["grade", "11", "{tmp}", "--shard", "0/2", "--course", "{tmp}/course"], None,
        ["--shard '0/2'", "K must be between 1 and 2"]),
    "grade-merge: shard CSV missing": (
        ["grade-merge", "{tmp}/merged.csv", "{tmp}/shard1.csv"], None,
        ["{tmp}/shard1.csv", "no such file", "expected a grades CSV"]),
    "grade-merge: not a grades CSV": (
        ["grade-merge", "{tmp}/merged.csv", "{tmp}/shard1.csv"],
        lambda t: (t / "shard1.csv").write_text("name,score\nalice,3\n"),
        ["{tmp}/shard1.csv", "columns ['name', 'score'] don't match"]),
    "formgrade: folder never graded": (
        ["formgrade", "{tmp}"], None,
        ["{tmp} is not a graded course folder", "run `tinytorch grade"]),
    "formgrade --port in use": (
        ["formgrade", "{tmp}/course", "--port", "{port}"],
        lambda t: _fake_graded_course(t / "course"),
        ["port {port}", "in use", "pass another --port"]),
    "grades: folder never graded": (
        ["grades", "11", "--course", "{tmp}"], None,
        ["{tmp} holds no grades for module 11", "run `tinytorch grade"]),
    "grades: module not a number": (
        ["grades", "embeddings", "--course", "{tmp}"], None,
        ["'embeddings'", "a module is named by its number"]),
    "docs --nbs missing": (
        ["docs", "--nbs", "{tmp}/nowhere", "--out", "{tmp}/site"], None,
        ["--nbs {tmp}/nowhere", "no such folder"]),
    "docs --out holds other files": (
        ["docs", "--out", "{tmp}/site"],
        lambda t: ((t / "site").mkdir(), (t / "site" / "thesis.tex").write_text("mine")),
        ["{tmp}/site", "is not an earlier docs build", "refusing to replace it"]),
    "docs --out is a file": (
        ["docs", "--out", "{tmp}/site.zip"], lambda t: (t / "site.zip").write_bytes(b"zip"),
        ["--out {tmp}/site.zip", "is a file, expected a folder"]),
    "report: no course folder": (
        ["report", "11", "--course", "{tmp}/course"], None,
        ["--course {tmp}/course", "no such folder",
         "the course folder that `tinytorch grade` wrote"]),
    "report: folder never graded": (
        ["report", "11", "--course", "{tmp}"], None,
        ["{tmp} holds no grades for module 11", "run `tinytorch grade"]),
    "metadata: no notebooks": (
        ["metadata", "--nbs", "{tmp}"], None,
        ["no course notebooks", "in {tmp}"]),
    "metadata: a solution region never closed": (
        ["metadata", "--nbs", "{tmp}"],
        lambda t: (t / "01_broken.ipynb").write_text(_notebook(["def f():\n    ### BEGIN SOLUTION\n    return 1\n"])),
        ["01_broken.ipynb", "'### BEGIN SOLUTION' is never closed"]),
}


def test_every_command_has_a_bad_input_case():
    assert {case.split()[0].rstrip(":") for case in BAD_INPUTS} == set(COMMANDS)
    assert set(COMMANDS) <= set(subprocess.run([TINYTORCH, "--help"], capture_output=True, text=True).stdout.split("{")[1]
                                .split("}")[0].split(",")), "a command is missing from COMMANDS"


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_a_bad_input_is_one_line_and_exit_2(case, tmp_path, capsys, monkeypatch):
    args, setup, words = BAD_INPUTS[case]
    if setup:
        setup(tmp_path)
    monkeypatch.chdir(ROOT)                 # `docs` reads docs/conf.py from the working folder
    with _busy_port() as busy:
        fill = lambda s: s.replace("{tmp}", str(tmp_path)).replace("{port}", str(busy.getsockname()[1]))
        before = sorted(tmp_path.rglob("*"))
        code = main([fill(a) for a in args])
        out, err = capsys.readouterr()
        assert code == 2, (code, out, err)
        assert err.endswith("\n") and err.count("\n") == 1, f"expected one line on stderr, got:\n{err}"
        assert err.startswith(f"tinytorch {args[0]}: ") and "Traceback" not in err, err
        for word in words:
            assert fill(word) in err, (word, err)
        assert out == "", out
        assert sorted(tmp_path.rglob("*")) == before, "a refused command left files behind"


# ------------------------------------------------------------------ bugs are not usage errors

def _raise(error):
    def broken(*args, **kwargs):
        raise error
    return broken


BUGS = {   # command line, the course function a bug is planted in, the plain exception it raises
    "demo": (["demo", "--steps", "5"], "tinytorch.core.char_model.train_char_model", RuntimeError("tensor shapes disagree")),
    "release": (["release", "11"], "tinytorch.course.authoring.assignments.release", ValueError("bad cell index")),
    "test": (["test", "11"], "tinytorch.course.basics.notebooks.find_notebook", FileNotFoundError("a lost temp file")),
    "grade": (["grade", "11", "{tmp}"], "tinytorch.course.grading.grading.grade", KeyError("grade_id")),
    "grade-merge": (["grade-merge", "{tmp}/out.csv", "{tmp}/a.csv"], "tinytorch.course.grading.shards.merge_grade_csvs",
                    ValueError("could not convert string to float: ''")),
    "formgrade": (["formgrade", "{tmp}"], "tinytorch.course.results.manual_grading.serve_formgrader", OSError("bad socket")),
    "grades": (["grades", "11", "--course", "{tmp}"], "tinytorch.course.results.final_grades.graded_assignment",
               TypeError("unsupported operand")),
    "docs": (["docs", "--out", "{tmp}/site"], "tinytorch.course.site.docs.build_docs", FileExistsError("_proc/docs")),
    "metadata": (["metadata"], "tinytorch.course.authoring.assignments.sync_metadata", KeyError("cells")),
    "report": (["report", "11", "--course", "{tmp}"],
               "tinytorch.course.results.report.page.write_class_report", KeyError("part")),
}


def test_every_command_has_a_bug_case():
    assert set(BUGS) == set(COMMANDS)


@pytest.mark.parametrize("command", BUGS)
def test_a_bug_is_not_caught(command, tmp_path, capsys, monkeypatch):
    args, where, error = BUGS[command]
    module, name = where.rsplit(".", 1)
    monkeypatch.setattr(importlib.import_module(module), name, _raise(error))
    monkeypatch.chdir(ROOT)
    with pytest.raises(type(error)) as raised:
        main([a.replace("{tmp}", str(tmp_path)) for a in args])
    assert raised.value is error
    assert capsys.readouterr().err == "", "the bug was reported as if it were the user's mistake"


# ------------------------------------------------------------------ end to end, as a shell sees it

def test_end_to_end_a_usage_error_is_exit_2_with_one_line(tmp_path):
    out = subprocess.run([TINYTORCH, "grade-merge", "merged.csv", "shard1.csv"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert out.returncode == 2, out
    assert out.stderr == ("tinytorch grade-merge: shard1.csv: no such file "
                          "(expected a grades CSV written by tinytorch grade)\n"), out.stderr
    assert out.stdout == "" and not (tmp_path / "merged.csv").exists()


BUGGY_MERGE = """\
import sys
import tinytorch.course.grading.shards as shards
def merge_grade_csvs(out, inputs, course=None):
    row = {'points': ''}
    return float(row['points'])     # a bug: an empty cell read as a number
shards.merge_grade_csvs = merge_grade_csvs
from tinytorch.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_end_to_end_a_bug_is_exit_1_with_its_traceback(tmp_path):
    script = tmp_path / "buggy_tinytorch.py"
    script.write_text(BUGGY_MERGE)
    out = subprocess.run([sys.executable, script, "grade-merge", "merged.csv", "shard1.csv"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 1, out
    lines = out.stderr.strip().splitlines()
    assert lines[0] == "Traceback (most recent call last):", out.stderr
    assert "return float(row['points'])" in out.stderr and "in merge_grade_csvs" in out.stderr, out.stderr
    assert lines[-1] == "ValueError: could not convert string to float: ''", out.stderr


def test_usage_errors_keep_their_builtin_bases():
    "Code that caught the built-in exceptions before keeps working."
    from tinytorch.demo import DemoInputError
    from tinytorch.course.authoring.assignments import MarkerError
    from tinytorch.course.isolation.sandbox import SandboxUnavailable
    from tinytorch.course.results.final_grades import CourseNotGraded
    for cls, builtin in ((DemoInputError, ValueError), (MarkerError, ValueError),
                         (SandboxUnavailable, RuntimeError), (CourseNotGraded, FileNotFoundError)):
        assert issubclass(cls, UsageError) and issubclass(cls, builtin), cls


# ------------------------------------------------------- the instructor's install and `release`

def test_release_with_a_tool_not_installed_is_one_line_exit_2_and_writes_nothing(
        tmp_path, capsys, monkeypatch):
    """The README's `pip install '.[course]'`, then `tinytorch release 11 --workspace handout/` on
    a machine where nbdev (which writes the workspace's package) is not installed: one line naming
    the install, exit 2, no folder."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "nbdev" else real(name, *a))
    monkeypatch.chdir(ROOT)
    code = main(["release", "11", "--workspace", str(tmp_path / "handout")])
    out, err = capsys.readouterr()
    assert (code, out) == (2, ""), (code, out, err)
    assert err == ("tinytorch release: needs nbdev, not installed here: "
                   "pip install 'tinytorch[course]'\n"), err
    assert list(tmp_path.iterdir()) == [], "a refused release left files behind"


def test_a_workspace_that_fails_to_build_leaves_nothing_behind(tmp_path, monkeypatch):
    "A workspace whose package can't be written (nbdev fails in it) leaves nothing half-written."
    real = subprocess.run
    def run(cmd, *args, **kwargs):
        if "nbdev" in " ".join(map(str, cmd)):
            return subprocess.CompletedProcess(cmd, 1, "", "nbdev could not write the package")
        return real(cmd, *args, **kwargs)
    monkeypatch.setattr(subprocess, "run", run)
    monkeypatch.chdir(ROOT)
    (tmp_path / "handout").mkdir()           # an empty folder may be named: it stays as it was
    with pytest.raises(RuntimeError, match="nbdev could not write the package"):
        main(["release", "11", "--workspace", str(tmp_path / "handout")])
    assert [p.name for p in tmp_path.iterdir()] == ["handout"], list(tmp_path.iterdir())
    assert list((tmp_path / "handout").iterdir()) == [], "a failed release left files behind"


# ------------------------------------------------------- each command in one place, its defaults in one

DEFAULTED = {"cell_timeout", "wall_seconds", "memory", "processes", "disk"}   # the options the library takes too


def spelled_defaults(package: Path) -> list:
    """(file, line, name) of every parameter or field among DEFAULTED whose default is written as a literal
    (`cell_timeout: int = 30`) instead of naming `tinytorch.course.basics.defaults`."""
    import ast
    found = []
    for path in sorted(package.rglob("*.py")):
        if path.name == "defaults.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            pairs = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                pairs = list(zip(a.args[len(a.args) - len(a.defaults):], a.defaults)) + [
                    (arg, d) for arg, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
                pairs = [(arg.arg, d) for arg, d in pairs]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
                pairs = [(node.target.id, node.value)]
            found += [(path.relative_to(package.parent).as_posix(), d.lineno, name) for name, d in pairs
                      if name in DEFAULTED and isinstance(d, (ast.Constant, ast.BinOp))
                      and getattr(d, "value", 0) is not None]
    return found


def test_option_defaults_are_written_once():
    assert spelled_defaults(ROOT / "tinytorch") == []


def test_a_literal_default_is_found(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("def grade(m, cell_timeout: int = 30, *, disk='1G', memory=None):\n"
                                           "    pass\nclass Setup:\n    wall_seconds: float = 300\n"
                                           "def fine(cell_timeout=CELL_TIMEOUT):\n    pass\n")
    assert spelled_defaults(tmp_path / "pkg") == [("pkg/a.py", 1, "cell_timeout"), ("pkg/a.py", 1, "disk"),
                                                  ("pkg/a.py", 4, "wall_seconds")]


def test_the_parser_and_the_library_agree_on_defaults():
    "`tinytorch grade` with no option grades as `grade(...)` called from Python does."
    import argparse
    import inspect
    from tinytorch.cli import build_parser
    from tinytorch.course.authoring.assignments import release
    from tinytorch.course.grading.grading import grade
    from tinytorch.course.isolation.limits import Limits, parse_limits
    from tinytorch.course.platforms.autograder import GraderOptions
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    default = lambda command, dest: next(a.default for a in sub[command]._actions if a.dest == dest)
    for command, fn, names in (("grade", grade, ("cell_timeout", "wall_seconds")),
                               ("release", release, ("cell_timeout",)),
                               ("autograder", GraderOptions, ("cell_timeout", "wall_seconds"))):
        for name in names:
            assert default(command, name) == inspect.signature(fn).parameters[name].default, (command, name)
    assert parse_limits(*(default("grade", n) for n in ("memory", "processes", "disk"))) == Limits()



def test_each_command_is_declared_beside_what_it_runs():
    "A command's arguments, its handler and its line in --help are in one module."
    from tinytorch.cli import available_commands
    commands = available_commands()
    assert len(commands) == len(COMMANDS) + 2, sorted(commands)     # and autograder, collect
    for name, command in commands.items():
        assert command.run.__module__ == command.arguments.__module__, name
