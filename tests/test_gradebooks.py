"""The master course and its template (`tinytorch.course.gradebook.create_gradebooks`), for a new course and for a
course graded before: both gradebooks know the assignment, only the master keeps its students."""
from pathlib import Path

import pytest

pytest.importorskip("nbgrader")

from tinytorch.course.gradebook import create_gradebooks  # noqa: E402

SOURCE = Path(__file__).resolve().parents[1] / "nbs" / "11_embeddings.ipynb"
ASSIGNMENT = SOURCE.stem


def _course(folder: Path) -> dict:
    "What a course's gradebook knows: its students and the assignment's graded and source cells."
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{folder / 'gradebook.db'}", "tinytorch") as gb:
        nb = gb.find_assignment(ASSIGNMENT).notebooks[0]
        return {"students": sorted(s.id for s in gb.students),
                "grade cells": sorted((c.name, c.max_score) for c in nb.grade_cells),
                "source cells": sorted((c.name, c.checksum) for c in nb.source_cells)}


def test_a_new_course_and_a_course_graded_before(tmp_path):
    from nbgrader.api import Gradebook
    course = tmp_path / "course"
    template = create_gradebooks(SOURCE, course, cell_timeout=30)
    new = _course(course)
    assert new == _course(template) and new["students"] == [] and len(new["grade cells"]) > 10
    assert (course / "release" / ASSIGNMENT / SOURCE.name).exists()

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "tinytorch") as gb:
        gb.add_student("alice")                              # graded in the first run
    template = create_gradebooks(SOURCE, course, cell_timeout=30)
    again = _course(course)
    assert again == {**new, "students": ["alice"]}, again
    assert _course(template) == new
