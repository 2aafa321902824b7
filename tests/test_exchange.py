"""A course run through nbgrader's own exchange, as a JupyterHub course runs it: three students with real Unix
accounts fetch the assignment and submit as themselves (one after the due date), the instructor collects with
`nbgrader collect`, grades `submitted/` with `tinytorch grade`, releases feedback with `nbgrader release_feedback`,
each student fetches their own page with `nbgrader fetch_feedback`, and the final grades go out as a Canvas import
file. The late student's penalty is checked in every output on the way."""
import csv
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from requirements import require

require("nbgrader")

from course_scenarios import build, demo_cells, without_demos  # noqa: E402
from tinytorch.course.basics.course import Course  # noqa: E402
from tinytorch.course.authoring.assignments import generate_assignment, run_nbgrader, write_course  # noqa: E402
from tinytorch.course.authoring.leaks import find_leaks, secret_lines  # noqa: E402
from lms_importers import read_canvas_import  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "nbs" / "11_embeddings.ipynb"
ASSIGNMENT, COURSE_ID = "11_embeddings", "tt101"


@pytest.fixture(scope="module")
def students():
    """Three real Unix accounts, removed afterwards: on time, on time with an email-like id, and late."""
    require("user accounts")
    tag = secrets.token_hex(3)
    names = {"ana": f"ana{tag}", "carol": f"carol.{tag}@uni.edu", "ben": f"ben{tag}"}
    made, opened = [], {}
    try:
        for name in names.values():
            subprocess.run(["useradd", "--badname", "-m", "-N", "-s", "/bin/sh", name], check=True, capture_output=True)
            made.append(name)
        open_the_way_to(Path(sys.executable), opened)
        yield names
    finally:
        for folder, mode in opened.items():
            os.chmod(folder, mode)
        for name in made:
            subprocess.run(["userdel", "-r", "-f", name], capture_output=True)


def open_the_way_to(path: Path, opened: dict):
    """Students run this Python as themselves, as on a JupyterHub where everyone shares one install; a clone in a
    private folder (`mktemp -d` makes mode 700) would stop them at its door. Give every folder on the way that
    others can't pass through the `x` bit for others, noting {folder: old mode} in `opened` as it goes, so that
    the caller puts back every mode it changed even if one change fails."""
    for folder in reversed(path.absolute().parents):
        mode = folder.stat().st_mode & 0o7777
        if not mode & 0o001:
            opened[folder] = mode
            os.chmod(folder, mode | 0o001)


def as_student(name: str, *args, cwd=None) -> subprocess.CompletedProcess:
    "Run `python -m nbgrader ARGS` as the Unix user `name`, in their home (or `cwd`)."
    home = Path(os.path.expanduser(f"~{name}"))
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(home), "USER": name, "LOGNAME": name,
           "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(["runuser", "-u", name, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()),
                           sys.executable, "-m", "nbgrader", *args], cwd=cwd or home, capture_output=True, text=True,
                          timeout=300)


def ok(run: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert run.returncode == 0, f"{run.args}\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    return run


def tinytorch(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([Path(sys.executable).parent / "tinytorch", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=900, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})


def score_written_answers(graded: Path, names):
    "What the instructor does in the formgrader: every written answer scored, here with full marks."
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{graded / 'gradebook.db'}") as gb:
        for name in names:
            for nb in gb.find_submission(ASSIGNMENT, name).notebooks:
                for g in nb.grades:
                    if g.needs_manual_grade:
                        g.manual_score = g.max_score
        gb.db.commit()


@pytest.fixture(scope="module")
def term(students):
    """The whole term, run once: what each step left behind. In /tmp itself: the students must reach the exchange
    (pytest's own temporary folders are private to root)."""
    base = Path(tempfile.mkdtemp(prefix="tinytorch-exchange-"))
    os.chmod(base, 0o755)
    try:
        yield _run_term(students, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _run_term(students: dict, base: Path) -> dict:
    exchange, course, graded = base / "exchange", base / "course", base / "graded"
    exchange.mkdir(mode=0o777)
    os.chmod(exchange, 0o777)
    # The instructor's nbgrader course: the source, its release, and the exchange settings
    write_course(Course(course), [SOURCE], cell_timeout=30)
    ok(generate_assignment(Course(course), ASSIGNMENT))    # nbgrader generate_assignment, or its kept copy
    config = course / "nbgrader_config.py"
    config.write_text(config.read_text() + f"\nc.CourseDirectory.course_id = {COURSE_ID!r}\nc.Exchange.root = {str(exchange)!r}\n")
    ok(run_nbgrader(Course(course), "release_assignment", ASSIGNMENT))
    exchange_args = ("--course", COURSE_ID, f"--Exchange.root={exchange}")
    released = json.loads((course / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())
    # the students' own work, handed in without the lesson's demonstration cells: this term checks the exchange
    # around grading, not the lesson
    solved = without_demos(build(released, json.loads(SOURCE.read_text()), {"course": str(graded), "submissions": str(base)})
                           ["reference"], demo_cells(released))
    submitted_at = {}

    def hand_in(who: str):
        name = students[who]
        ok(as_student(name, "fetch_assignment", ASSIGNMENT, *exchange_args))
        mine = Path(os.path.expanduser(f"~{name}")) / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
        assert json.loads(mine.read_text())["cells"], "the fetched notebook is empty"
        ok(subprocess.run(["runuser", "-u", name, "--", "tee", str(mine)], input=json.dumps(solved), text=True,
                          capture_output=True))              # the student's own work, written as the student
        ok(as_student(name, "submit", ASSIGNMENT, *exchange_args))
        submitted_at[who] = datetime.now(timezone.utc)

    hand_in("ana")
    hand_in("carol")
    due = datetime.now(timezone.utc)                          # after the first two submissions, before the third
    hand_in("ben")
    ok(run_nbgrader(Course(course), "collect", ASSIGNMENT))
    # The Canvas gradebook export the instructor downloads, used as the roster as it is
    canvas_ids = {"ana": "5101", "carol": "5102", "ben": "5103"}
    roster = base / "canvas_export.csv"
    with open(roster, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Embeddings (77)"])
        w.writerow(["    Points Possible", "", "", "", "", "36"])
        for who, name in students.items():
            w.writerow([f"{who.title()}, Student", canvas_ids[who], f"S-{canvas_ids[who]}", name, "CS101 A", ""])
        w.writerow(["Absent, Dee", "5104", "S-5104", "dee", "CS101 A", ""])
    extensions = base / "extensions.csv"
    extensions.write_text(f"student,days\n{students['ana']},1\n")     # nothing changes for her: she was on time
    grade = tinytorch("grade", "11", course / "submitted", "--course", graded, "--nbs", ROOT / "nbs", "--jobs", "2",
                      "--due", due.isoformat(), "--late-policy", "per-hour:10", "--roster", roster,
                      "--extensions", extensions, cwd=base)
    assert grade.returncode in (0, 3), f"tinytorch grade failed:\n{grade.stdout[-3000:]}{grade.stderr[-3000:]}"
    release = run_nbgrader(Course(graded), "release_feedback", ASSIGNMENT, *exchange_args)
    fetched = {who: as_student(name, "fetch_feedback", ASSIGNMENT, *exchange_args) for who, name in students.items()}
    score_written_answers(graded, students.values())
    grades = tinytorch("grades", "11", "--course", graded, "--format", "canvas", "--roster", roster,
                       "--column", "Embeddings (77)", cwd=base)
    ok(run_nbgrader(Course(graded), "export", f"--to={base / 'nbgrader_export.csv'}"))
    return {"base": base, "course": course, "graded": graded, "grade": grade, "release": release, "fetched": fetched,
            "grades": grades, "due": due, "submitted_at": submitted_at, "canvas_ids": canvas_ids, "students": students}


def test_collect_puts_submissions_where_grade_reads_them(term):
    for name in term["students"].values():
        folder = term["course"] / "submitted" / name / ASSIGNMENT
        assert (folder / f"{ASSIGNMENT}.ipynb").is_file() and (folder / "timestamp.txt").is_file(), list(folder.iterdir())


def test_grade_grades_the_collected_layout_with_timestamps(term):
    run = term["grade"]
    assert run.returncode == 0, f"{run.stdout[-3000:]}{run.stderr[-3000:]}"
    assert "no submission found" not in run.stdout, run.stdout
    rows = list(csv.DictReader(open(term["graded"] / f"grades_{ASSIGNMENT}.csv")))
    by = {}
    for row in rows:
        by.setdefault(row["student"], []).append(row)
    s = term["students"]
    assert sorted(by) == sorted(s.values())
    for who in ("ana", "carol"):
        assert {(r["seconds_late"], r["late_penalty"]) for r in by[s[who]]} == {("0", "0")}, by[s[who]][0]
    ben = by[s["ben"]]
    stamp = datetime.fromisoformat(ben[0]["timestamp"])
    assert term["due"] < stamp <= term["submitted_at"]["ben"], (term["due"], stamp)
    total = sum(float(r["score"] or 0) for r in ben)
    assert total > 0 and {float(r["late_penalty"]) for r in ben} == {round(total * 0.1, 4)}, ben   # one hour begun
    assert f"{s['ben']}" in run.stdout and "point(s) off" in run.stdout, run.stdout
    assert "on the roster with no submission: dee" in run.stdout and "1 extension(s)" in run.stdout, run.stdout


def test_gradebook_has_timestamps_names_and_the_penalty(term):
    from nbgrader.api import Gradebook
    s = term["students"]
    with Gradebook(f"sqlite:///{term['graded'] / 'gradebook.db'}") as gb:
        assert gb.find_assignment(ASSIGNMENT).duedate == term["due"].replace(tzinfo=None)
        ben = gb.find_submission(ASSIGNMENT, s["ben"])
        assert ben.total_seconds_late > 0 and ben.late_submission_penalty > 0, (ben.total_seconds_late,)
        ana = gb.find_submission(ASSIGNMENT, s["ana"])
        assert ana.total_seconds_late == 0 and not ana.late_submission_penalty
        assert ana.extension == timedelta(days=1) and ana.duedate == (term["due"] + timedelta(days=1)).replace(tzinfo=None)
        assert (gb.find_student(s["carol"]).first_name, gb.find_student(s["carol"]).last_name) == ("Student", "Carol")


def test_students_fetch_their_feedback_without_hidden_tests(term):
    assert term["release"].returncode == 0, term["release"].stderr[-3000:]
    hidden = secret_lines(SOURCE, solutions=False)
    for who, name in term["students"].items():
        ok(term["fetched"][who])
        pages = list((Path(os.path.expanduser(f"~{name}")) / ASSIGNMENT / "feedback").rglob("*.html"))
        assert len(pages) == 1, (who, pages)
        page = pages[0].read_text()
        assert f"Feedback: {ASSIGNMENT}, {name}" in page, page[:500]
        assert find_leaks(hidden, page) == [], who
        assert ("point(s) off for lateness" in page) == (who == "ben"), who


def test_canvas_import_has_the_late_penalty(term):
    run = term["grades"]
    assert run.returncode == 0, f"{run.stdout[-3000:]}{run.stderr[-3000:]}"
    s, ids = term["students"], term["canvas_ids"]
    final = {r["student"]: r for r in csv.DictReader(open(term["graded"] / f"final_grades_{ASSIGNMENT}.csv"))}
    ben = final[s["ben"]]
    raw, penalty = float(ben["raw_total"]), float(ben["late_penalty"])
    assert penalty == pytest.approx(raw * 0.1) and float(ben["total"]) == pytest.approx(raw - penalty), ben
    assert f"{s['ben']} -{ben['late_penalty']}" in run.stdout, run.stdout
    canvas = read_canvas_import(term["graded"] / f"canvas_grades_{ASSIGNMENT}.csv",
                                [{"id": ids[w], "sis_user_id": f"S-{ids[w]}", "login_id": n} for w, n in s.items()]
                                + [{"id": "5104", "sis_user_id": "S-5104", "login_id": "dee"}])
    top = {float(r["max_points"]) for r in final.values()}
    assert canvas["unmatched"] == [] and [canvas["points_possible"]] == [{"Embeddings (77)": t} for t in top]
    assert {r["status"] for r in final.values()} == {"complete"}, final
    assert canvas["grades"] == {ids[w]: {"Embeddings (77)": pytest.approx(float(final[n]["total"]))}
                                for w, n in s.items()}, canvas["grades"]
    assert canvas["grades"][ids["ben"]]["Embeddings (77)"] < canvas["grades"][ids["ana"]]["Embeddings (77)"]
    assert "left blank (Canvas keeps what it has): dee" in run.stdout, run.stdout
    exported = {r["student_id"]: r for r in csv.DictReader(open(term["base"] / "nbgrader_export.csv"))}
    assert float(exported[s["ben"]]["late_submission_penalty"]) == pytest.approx(penalty), exported[s["ben"]]
    assert float(exported[s["ana"]]["late_submission_penalty"]) == 0.0
