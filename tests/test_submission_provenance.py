"""A submission scores only what its student wrote: `tinytorch grade` on a class where each student tries to score
the instructor's notebook, through a symbolic link (their folder, their assignment folder, their notebook, a file
beside it; both layouts `grade` reads) or a copy (the source notebook itself, hidden tests pasted in, the
solutions pasted without the markers). Links are refused and copies held at 0 before anything runs, so the first
run grades nobody; the second clears one held student (`--clear`), the only submission graded here."""
import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from requirements import require

require("nbgrader")

from course_scenarios import build, cells_by_id, demo_cells, solve, src, without_demos  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "nbs" / "11_embeddings.ipynb"
REGIONS = sum(src(c).count("### BEGIN SOLUTION") for c in json.loads(SOURCE.read_text())["cells"]
              if c["cell_type"] == "code")                # the lesson's solution regions
NB = "11_embeddings.ipynb"
LINKED = {"xia", "zed", "bo", "amy"}
COPIED = {"cy", "dee", "eve"}


def tinytorch_grade(base: Path, *extra) -> subprocess.CompletedProcess:
    return subprocess.run([Path(sys.executable).parent / "tinytorch", "grade", "11", "subs", "--course", "course",
                           "--nbs", ROOT / "nbs", *extra], cwd=base, capture_output=True, text=True, timeout=900)


def grade_rows(base: Path) -> dict:
    "student -> {part: row} of the grades CSV."
    out = {}
    with open(base / "course" / "grades_11_embeddings.csv", newline="") as f:
        for row in csv.DictReader(f):
            out.setdefault(row["student"], {})[row["part"]] = row
    return out


def without_markers(nb: dict) -> dict:
    "`nb` with nbgrader's marker lines removed: the instructor's solutions pasted in as they are."
    for cell in nb["cells"]:
        cell["source"] = "\n".join(l for l in src(cell).splitlines() if "### BEGIN" not in l and "### END" not in l)
    return nb


def write_nb(path: Path, nb: dict):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb))


@pytest.fixture(scope="module")
def runs(release_11, tmp_path_factory):
    base = tmp_path_factory.mktemp("provenance")
    instructor = base / "instructor" / "11_embeddings"         # a folder holding the source notebook
    instructor.mkdir(parents=True)
    shutil.copy(SOURCE, instructor / NB)
    release, source = json.loads(release_11.read_text()), json.loads(SOURCE.read_text())
    demos = demo_cells(release)
    own = without_demos(build(release, source, {"course": str(base / "course"), "submissions": str(base / "subs")})
                        ["reference"], demos)
    subs = base / "subs"
    subs.mkdir()
    (subs / "xia").symlink_to(instructor)                                     # the student folder (flat layout)
    (subs / "zed").mkdir()
    (subs / "zed" / "11_embeddings").symlink_to(instructor)                   # the assignment folder (collected)
    (subs / "bo").mkdir()
    (subs / "bo" / NB).symlink_to(instructor / NB)                            # the notebook
    write_nb(subs / "amy" / "11_embeddings" / NB, own)
    (subs / "amy" / "11_embeddings" / "helper.py").symlink_to(instructor / NB)  # a file beside it
    (subs / "cy").mkdir()
    shutil.copy(SOURCE, subs / "cy" / NB)                                     # a copy of the source notebook
    hidden_test = next(c for c in source["cells"] if "### BEGIN HIDDEN TESTS" in src(c))
    dee = json.loads(json.dumps(own))
    cells_by_id(dee)[hidden_test["id"]]["source"] = src(hidden_test)          # the hidden tests pasted in
    write_nb(subs / "dee" / NB, dee)
    write_nb(subs / "eve" / NB, without_demos(without_markers(solve(release, source)), demos))   # solutions pasted
    first = tinytorch_grade(base)
    first_rows = grade_rows(base)
    first_log = (base / "course" / "grades_11_embeddings.log").read_text()
    second = tinytorch_grade(base, "--clear", "eve")
    return {"base": base, "instructor": instructor, "first": first, "first_rows": first_rows, "first_log": first_log,
            "second": second, "second_rows": grade_rows(base)}


def test_a_link_anywhere_on_the_path_is_refused_with_its_target(runs):
    assert runs["first"].returncode == 3, runs["first"].stdout[-3000:] + runs["first"].stderr[-3000:]
    rows, where = runs["first_rows"], runs["instructor"]
    targets = {"xia": f"xia is a symbolic link (to {where})",
               "zed": f"zed/11_embeddings is a symbolic link (to {where})",
               "bo": f"bo/11_embeddings.ipynb is a symbolic link (to {where / NB})",
               "amy": f"amy/11_embeddings/helper.py is a symbolic link (to {where / NB})"}
    for student, says in targets.items():
        parts = rows[student].values()
        assert {(r["status"], r["points"], r["score"]) for r in parts} == {("failed", "0", "")}, (student, parts)
        assert all(r["reason"].startswith("not graded, a symbolic link is on its path: ") for r in parts), parts
        assert says in runs["first_log"], (says, runs["first_log"][-3000:])


def test_a_copy_of_the_instructors_notebook_is_held_at_zero(runs):
    rows = runs["first_rows"]
    reasons = {"cy": "it holds nbgrader's solution or hidden-test markers",
               "dee": "it holds nbgrader's solution or hidden-test markers",
               "eve": f"{REGIONS} of the instructor's {REGIONS} solution regions appear in it unchanged"}
    for student, says in reasons.items():
        tests = [r for r in rows[student].values() if r["kind"] == "test"]
        assert tests and {(r["status"], r["score"]) for r in tests} == {("flagged", "0")}, (student, tests)
        assert all(r["reason"].startswith(f"held at 0 until you clear it: {says}") for r in tests), tests
        assert f"--clear {student}` grades it as usual" in runs["first_log"], runs["first_log"][-3000:]
    assert "graded cells that never ran" not in runs["first_log"]     # held before grading, never run


def test_clear_grades_that_notebook_as_usual_and_keeps_the_others_held(runs):
    second, rows = runs["second"], runs["second_rows"]
    assert second.returncode == 3, second.stdout[-3000:] + second.stderr[-3000:]
    assert "cleared by you, graded as usual: eve (kept in cleared_11_embeddings.csv)" in second.stdout, second.stdout
    eve = [r for r in rows["eve"].values() if r["kind"] == "test"]
    assert {r["status"] for r in eve} == {"graded"} and all(r["score"] == r["max_points"] for r in eve), eve
    cleared = list(csv.DictReader(open(runs["base"] / "course" / "cleared_11_embeddings.csv")))
    assert [r["student"] for r in cleared] == ["eve"] and len(cleared[0]["sha256"]) == 64, cleared
    for student in ("cy", "dee"):
        assert {r["status"] for r in rows[student].values() if r["kind"] == "test"} == {"flagged"}, rows[student]
    for student in LINKED:
        assert {r["status"] for r in rows[student].values()} == {"failed"}, rows[student]


def test_clear_names_a_student_it_can_find_or_stops_before_anything_is_written(runs, tmp_path):
    (tmp_path / "subs" / "amy").mkdir(parents=True)
    run = tinytorch_grade(tmp_path, "--clear", "nobody")
    assert run.returncode == 2 and "--clear nobody: no notebook of that student in subs to clear" in run.stderr, run
    assert not (tmp_path / "course").exists()
