"""The master course and its template (`tinytorch.course.grading.gradebook.create_gradebooks`), for a new course and for a
course graded before: both gradebooks know the assignment, only the master keeps its students."""
from pathlib import Path

from requirements import require

require("nbgrader")

from tinytorch.course.basics.course import Course  # noqa: E402
from tinytorch.course.authoring.assignments import find_leaks, secret_lines  # noqa: E402
from tinytorch.course.grading.gradebook import create_gradebooks  # noqa: E402

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


def _generations(monkeypatch, cache: bool = False) -> list:
    """The course folders nbgrader runs in from now on (`generate_assignment` runs it), by name, in order. Without
    `cache`, no generation is copied from the cache of generated gradebooks (it is the course folder's own record
    that is under test)."""
    from tinytorch.course.authoring import assignments
    from tinytorch.course.basics import generation_cache
    seen, run = [], assignments.run_nbgrader

    def counted(folder, *args, **kwargs):
        seen.append(Path(folder).name)
        return run(folder, *args, **kwargs)
    monkeypatch.setattr(assignments, "run_nbgrader", counted)
    if not cache:
        monkeypatch.setattr(generation_cache, "gradebook_cache", lambda: None)
    return seen


def test_a_new_course_and_a_course_graded_before(tmp_path, monkeypatch):
    from nbgrader.api import Gradebook
    generated = _generations(monkeypatch)
    course = tmp_path / "course"
    template = create_gradebooks(SOURCE, Course(course), cell_timeout=30).root
    new = _course(course)
    assert new["grade cells"] == _course(template)["grade cells"] and new["students"] == [] and len(new["grade cells"]) > 10
    assert _names(new) == _names(_course(template))
    assert (course / "release" / ASSIGNMENT / SOURCE.name).exists()
    assert sorted(generated) == [".template", "course"], generated

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "tinytorch") as gb:
        gb.add_student("alice")                              # graded in the first run
    generated.clear()
    template = create_gradebooks(SOURCE, Course(course), cell_timeout=30).root
    again = _course(course)
    assert again == {**new, "students": ["alice"]}, again
    assert _course(template)["grade cells"] == new["grade cells"] and _names(_course(template)) == _names(new)
    assert generated == ["course"], f"the template, still as generated from the same source, is kept: {generated}"

    # Graded again with nothing changed: no `generate_assignment`; a gradebook or release changed by hand (or cut
    # short) is generated again.
    generated.clear()
    create_gradebooks(SOURCE, Course(course), cell_timeout=30)
    assert generated == [], generated
    first, db = _course(template), template / "gradebook.db"
    db.write_bytes(db.read_bytes() + b"changed")
    create_gradebooks(SOURCE, Course(course), cell_timeout=30)
    assert generated == [".template"] and _course(template) == first, generated
    (course / "release" / ASSIGNMENT / SOURCE.name).unlink()
    create_gradebooks(SOURCE, Course(course), cell_timeout=30)
    assert generated == [".template", "course"] and (course / "release" / ASSIGNMENT / SOURCE.name).exists(), generated
    assert _course(course) == again


def _names(course: dict) -> list:
    return [name for name, _ in course["source cells"]]


def test_the_template_holds_no_hidden_test_and_no_solution(tmp_path):
    "Every byte of the template course (what each student's sandbox gets a copy of) is free of secret lines."
    template = create_gradebooks(SOURCE, Course(tmp_path / "course"), cell_timeout=30).root
    files = sorted(p for p in template.rglob("*") if p.is_file())
    assert sorted(p.name for p in files) == ["gradebook.db", "nbgrader_config.py"], files
    text = "\n".join(p.read_bytes().decode("utf-8", "replace") for p in files)
    assert "BEGIN HIDDEN" not in text and "BEGIN SOLUTION" not in text
    secrets = secret_lines(SOURCE)
    assert len(secrets) > 20 and find_leaks(secrets, text) == [], find_leaks(secrets, text)[:3]
    master = (tmp_path / "course" / "gradebook.db").read_bytes().decode("utf-8", "replace")
    assert find_leaks(secret_lines(SOURCE, solutions=False), master), "the master gradebook keeps the hidden tests"


def test_a_new_course_from_inputs_generated_before_is_copied(tmp_path, monkeypatch):
    """Two new courses from the same source, and the student release, with a cache of their own: the first course
    runs nbgrader for both gradebooks, the second course and the release run it for none. The copies know what the
    generated gradebooks know, and the release is the master course's, byte for byte."""
    from tinytorch.course.authoring.assignments import release
    monkeypatch.setenv("TINYTORCH_CACHE", str(tmp_path / "cache"))
    generated = _generations(monkeypatch, cache=True)
    first = create_gradebooks(SOURCE, Course(tmp_path / "first"), cell_timeout=30).root
    assert sorted(generated) == [".template", "first"], generated
    second = create_gradebooks(SOURCE, Course(tmp_path / "second"), cell_timeout=30).root
    released = release(11, SOURCE.parent, tmp_path / "released", cell_timeout=30)
    assert sorted(generated) == [".template", "first"], f"generated again: {generated}"
    assert _course(tmp_path / "second") == _course(tmp_path / "first") and _course(second) == _course(first)
    shipped = tmp_path / "first" / "release" / ASSIGNMENT / SOURCE.name
    assert released.read_bytes() == shipped.read_bytes() == (tmp_path / "second" / shipped.relative_to(tmp_path / "first")).read_bytes()
    # another cell timeout is another course configuration: generated, not copied
    create_gradebooks(SOURCE, Course(tmp_path / "third"), cell_timeout=31)
    assert sorted(generated) == [".template", ".template", "first", "third"], generated


def test_a_new_gradebook_is_the_one_nbgrader_makes_without_starting_alembic(tmp_path, monkeypatch):
    """`open_gradebook` makes a missing gradebook in this process, the schema version read from nbgrader's migration
    scripts: the same database, row for row, as nbgrader's own process makes (which asks `alembic heads` for it)."""
    import sqlite3
    from tinytorch.course.authoring.assignments import run_nbgrader
    from tinytorch.course.basics.course import open_gradebook
    theirs = tmp_path / "course"
    theirs.mkdir()
    (theirs / "nbgrader_config.py").write_text('c = get_config()\nc.CourseDirectory.course_id = "tinytorch"\n')
    run = run_nbgrader(Course(theirs), "db", "student", "list")
    assert run.returncode == 0, run.stderr[-2000:]
    monkeypatch.setenv("PATH", "")                          # no `alembic` to start here
    with open_gradebook(tmp_path / "ours.db"):
        pass
    dumps = [list(sqlite3.connect(db).iterdump()) for db in (theirs / "gradebook.db", tmp_path / "ours.db")]
    assert dumps[0] == dumps[1] and any('INSERT INTO "alembic_version"' in line for line in dumps[0])
