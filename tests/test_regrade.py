"""An instructor's term replayed: a class is graded, its written answers scored and commented the
way the formgrader saves them (nbgrader's API), then graded again, then one student fixed and
graded alone, then one picked out of the full folder with `--only`. Nothing the instructor entered
is lost, and a student not graded again keeps every row, gradebook entry and feedback page byte
for byte."""
import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from requirements import require

require("nbgrader")

from course_scenarios import cells_by_id, solve, without_demos, demo_cells  # noqa: E402
from tinytorch.course.basics.course import Course  # noqa: E402
from tinytorch.course.authoring.assignments import graded_parts  # noqa: E402
from tinytorch.course.grading.gradebook import read_gradebook  # noqa: E402
from tinytorch.course.basics.course import open_gradebook  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"
SOURCE = NBS / "11_embeddings.ipynb"
CLI = Path(sys.executable).parent / "tinytorch"
ASSIGNMENT = "11_embeddings"
PARTS = {gid: (kind, pts) for gid, kind, pts in graded_parts(SOURCE)}
ANSWERS = sorted(gid for gid, (kind, _) in PARTS.items() if kind == "answer")
FIRST_TEST = next(gid for gid, (kind, _) in PARTS.items() if kind == "test")
# What the teaching assistants enter: student -> part -> (score, extra credit, comment)
SCORED = {
    "reference": {ANSWERS[0]: (2.0, 0.5, "Clear: the table size is computed."),
                  ANSWERS[1]: (1.0, None, "Half."), ANSWERS[2]: (2.0, None, None)},
    "untouched": {ANSWERS[0]: (0.0, None, "Nothing written."), ANSWERS[1]: (0.0, None, None),
                  ANSWERS[2]: (0.0, None, None),
                  FIRST_TEST: (1.0, None, "A point for the attempt you showed me.")},
}


def _run(base, *args):
    out = subprocess.run([CLI, *map(str, args)], cwd=base, capture_output=True, text=True)
    said = f"{out.stdout[-3000:]}{out.stderr[-3000:]}"
    assert out.returncode == 0, f"tinytorch {' '.join(map(str, args))}: exit {out.returncode}\n{said}"
    return out.stdout


def _grade(base, folder, *more):
    return _run(base, "grade", "11", folder, "--course", "course", "--nbs", NBS, "--jobs", "2",
                "--cell-timeout", "30", *more)


def _score_as_the_formgrader_does(course):
    "Every score, extra credit and comment of SCORED, saved as the formgrader's API saves them."
    with open_gradebook(course / "gradebook.db") as gb:
        for student, parts in SCORED.items():
            for nb in gb.find_submission(ASSIGNMENT, student).notebooks:
                for grade in nb.grades:
                    if grade.name in parts:
                        grade.manual_score, grade.extra_credit, _ = parts[grade.name]
                        grade.needs_manual_grade = False
                for comment in nb.comments:
                    if comment.name in parts and parts[comment.name][2]:
                        comment.manual_comment = parts[comment.name][2]
        gb.db.commit()


def _your_work(course):
    "student -> part -> (score, extra credit, comment, to look at again) of SCORED's parts."
    book = read_gradebook(Course(course), ASSIGNMENT)
    return {s: {p: (book[s][p]["manual"], book[s][p]["extra"], book[s][p]["comment"],
                    book[s][p].get("second_look", False)) for p in parts}
            for s, parts in SCORED.items()}


def _final(base):
    _run(base, "grades", "11", "--course", "course")
    with open(base / "course" / f"final_grades_{ASSIGNMENT}.csv", newline="") as f:
        return {row["student"]: row for row in csv.DictReader(f)}


def _student_state(course, student):
    "`student`'s grades CSV rows, log entry, gradebook entry and feedback files (bytes)."
    rows = [line for line in (course / f"grades_{ASSIGNMENT}.csv").read_text().splitlines()
            if line.startswith(f"{student},")]
    log = [line for line in (course / f"grades_{ASSIGNMENT}.log").read_text().splitlines()
           if line.startswith(f"{student}:")]
    feedback = {p.name: p.read_bytes()
                for p in sorted((course / "feedback" / student / ASSIGNMENT).iterdir())}
    return {"rows": rows, "log": log, "gradebook": read_gradebook(Course(course), ASSIGNMENT)[student],
            "feedback": feedback}


@pytest.fixture(scope="module")
def term(graded_pair, release_11, tmp_path_factory):
    """The replay, step by step; what each step left, by name."""
    base = tmp_path_factory.mktemp("regrade")
    shutil.copytree(graded_pair / "submissions", base / "submissions")
    shutil.copytree(graded_pair / "single", base / "course")
    course, seen = base / "course", {}
    _score_as_the_formgrader_does(course)
    seen["scored"], seen["final scored"] = _your_work(course), _final(base)

    seen["regrade log"] = _grade(base, "submissions")                  # the whole class again
    seen["regraded"], seen["final regraded"] = _your_work(course), _final(base)

    # untouched hands in a fix: solved code, answers 1 and 3 rewritten, answer 2 kept
    release = json.loads(release_11.read_text())
    before = json.loads((base / "submissions" / "untouched" / f"{ASSIGNMENT}.ipynb").read_text())
    solved = solve(release, json.loads(SOURCE.read_text()), own_words=True)
    fixed = without_demos(solved, demo_cells(release))
    cells_by_id(fixed)[ANSWERS[1]]["source"] = cells_by_id(before)[ANSWERS[1]]["source"]
    (base / "fix" / "untouched").mkdir(parents=True)
    (base / "fix" / "untouched" / f"{ASSIGNMENT}.ipynb").write_text(json.dumps(fixed))
    seen["reference before fix"] = _student_state(course, "reference")
    seen["untouched before fix"] = _student_state(course, "untouched")
    seen["fix log"] = _grade(base, "fix")                      # a folder holding one student
    seen["reference after fix"] = _student_state(course, "reference")
    seen["untouched after fix"] = _student_state(course, "untouched")
    seen["fixed"] = _your_work(course)
    seen["grades csv after fix"] = (course / f"grades_{ASSIGNMENT}.csv").read_text()

    # one student picked out of the whole folder
    seen["only log"] = _grade(base, "submissions", "--only", "reference")
    seen["untouched after only"] = _student_state(course, "untouched")
    seen["final after only"] = _final(base)
    return seen


def test_a_regrade_of_the_class_keeps_every_score_extra_credit_and_comment(term):
    assert term["regraded"] == term["scored"]
    assert all(not waiting for parts in term["regraded"].values() for *_, waiting in parts.values())
    log = term["regrade log"]
    assert "your formgrader work is kept: 7 part(s) of 2 student(s)" in log, log


def test_a_regrade_of_the_class_leaves_the_final_grades_as_they_were(term):
    before, after = term["final scored"], term["final regraded"]
    assert {s: (r["total"], r["manual_total"]) for s, r in after.items()} == \
        {s: (r["total"], r["manual_total"]) for s, r in before.items()}
    assert float(before["reference"]["manual_total"]) == 2.0 + 0.5 + 1.0 + 2.0  # extra credit in


def test_one_student_graded_alone_leaves_the_others_byte_for_byte(term):
    assert term["reference after fix"] == term["reference before fix"]
    assert term["untouched after fix"]["rows"] != term["untouched before fix"]["rows"]
    assert "the grades of the 1 other(s) graded before" in term["fix log"], term["fix log"]
    students = {line.split(",")[0] for line in term["grades csv after fix"].splitlines()[1:]}
    assert students == {"reference", "untouched"}


def test_a_changed_answer_keeps_its_score_and_is_marked_to_look_at_again(term):
    fixed = term["fixed"]["untouched"]
    assert {p: (score, waiting) for p, (score, _, _, waiting) in fixed.items()} == {
        ANSWERS[0]: (0.0, True), ANSWERS[1]: (0.0, False), ANSWERS[2]: (0.0, True),
        FIRST_TEST: (1.0, True)}
    assert fixed[ANSWERS[0]][2] == "Nothing written."
    log = term["fix log"]
    assert f"untouched {ANSWERS[0]}" in log and f"untouched {ANSWERS[1]}" not in log, log
    assert term["fixed"]["reference"] == term["scored"]["reference"]


def test_only_grades_the_student_it_names(term):
    assert term["untouched after only"] == term["untouched after fix"]
    final = term["final after only"]
    assert sorted(final) == ["reference", "untouched"]
    assert final["untouched"]["status"] == "to confirm", final["untouched"]
    before = term["final scored"]["untouched"]
    assert float(final["untouched"]["autograded_total"]) > float(before["autograded_total"])


def test_only_naming_a_student_with_no_folder_is_one_line_and_writes_nothing(graded_pair, tmp_path):
    shutil.copytree(graded_pair / "submissions", tmp_path / "submissions")
    out = subprocess.run([CLI, "grade", "11", "submissions", "--course", "course", "--nbs", NBS,
                          "--only", "fred"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "--only fred: no such student folder in submissions" in out.stderr, out.stderr
    assert not (tmp_path / "course").exists()
