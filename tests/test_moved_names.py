"""Old calls that stay published: a grader built by an earlier release runs the runner through its old module,
`python -m tinytorch.course.platforms.autograder TARGET`. (Course names that moved between internal modules have no shims.)"""
import importlib
import subprocess
import sys

import pytest


def test_the_old_runner_module_still_runs_the_runner():
    "`python -m tinytorch.course.autograder TARGET`, as graders built before the runner moved call it."
    out = subprocess.run([sys.executable, "-m", "tinytorch.course.autograder", "no-such-platform"],
                         capture_output=True, text=True)
    assert (out.returncode, out.stdout) == (2, ""), out
    assert "usage: python -m tinytorch.course.platforms.autograder_run" in out.stderr, out.stderr


def test_internal_names_import_only_from_their_own_module():
    with pytest.raises(AttributeError):
        importlib.import_module("tinytorch.course.results.manual_grading").final_grades
    assert importlib.import_module("tinytorch.course.results.final_grades").final_grades
