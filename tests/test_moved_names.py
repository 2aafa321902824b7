"""Names that moved when a course module was split still import from their old module, with a warning naming the new
home: an instructor's script written for an earlier release keeps working. A grader built before the autograder's
runner moved still runs it through the old module."""
import importlib
import subprocess
import sys

import pytest

MOVED = [("tinytorch.course.assignments", "build_workspace", "tinytorch.course.workspace"),
         ("tinytorch.course.assignments", "WORKSPACE_TOOLING", "tinytorch.course.workspace"),
         ("tinytorch.course.assignments", "workspace_leaks", "tinytorch.course.leaks"),
         ("tinytorch.course.assignments", "public_text", "tinytorch.course.leaks"),
         ("tinytorch.course.autograder", "run", "tinytorch.course.autograder_run"),
         ("tinytorch.course.autograder", "gradescope_results", "tinytorch.course.autograder_run"),
         ("tinytorch.course.docs", "autodoc_docstring", "tinytorch.course.docs_api"),
         ("tinytorch.course.manual_grading", "final_grades", "tinytorch.course.final_grades"),
         ("tinytorch.course.manual_grading", "write_final_grades", "tinytorch.course.final_grades"),
         ("tinytorch.course.manual_grading", "regenerate_feedback", "tinytorch.course.feedback")]


@pytest.mark.parametrize("old, name, home", MOVED, ids=[f"{o.rsplit('.', 1)[1]}.{n}" for o, n, _ in MOVED])
def test_a_moved_name_imports_from_its_old_module_with_a_warning(old, name, home):
    with pytest.warns(DeprecationWarning, match=rf"{old}\.{name} moved to {home}\.{name}"):
        found = getattr(importlib.import_module(old), name)
    assert found is getattr(importlib.import_module(home), name)


def test_a_name_that_never_was_is_still_an_attribute_error():
    with pytest.raises(AttributeError, match="'tinytorch.course.manual_grading' has no attribute 'no_such_name'"):
        importlib.import_module("tinytorch.course.manual_grading").no_such_name


def test_the_old_runner_module_still_runs_the_runner():
    "`python -m tinytorch.course.autograder TARGET`, as graders built before the runner moved call it."
    out = subprocess.run([sys.executable, "-m", "tinytorch.course.autograder", "no-such-platform"],
                         capture_output=True, text=True)
    assert (out.returncode, out.stdout) == (2, ""), out
    assert "usage: python -m tinytorch.course.autograder_run" in out.stderr, out.stderr
