"""One course for a class graded in shards: `tinytorch grade-merge ... --course DIR` joins the shards' course
folders (gradebooks, autograded notebooks, feedback, grades) into one, so that one `tinytorch formgrade`
session and one `tinytorch grades` cover the whole class. A written answer is scored once, in the merged
course's formgrader in headless Chromium; the final grades must equal one machine's with the same score."""
import csv
import html
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from requirements import require

require("nbgrader")

from browser import chromium, serve_formgrader  # noqa: E402
from course_scenarios import PAIR  # noqa: E402
from tinytorch.course.authoring.assignments import graded_parts  # noqa: E402
from tinytorch.course.grading.shards import shard_of  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"
SOURCE = NBS / "11_embeddings.ipynb"
CLI = Path(sys.executable).parent / "tinytorch"
GRADES = "grades_11_embeddings.csv"
FINAL = "final_grades_11_embeddings.csv"
STUDENTS = list(PAIR)
WAIT_S = 120               # a limit for a hung server or page, with room for a busy machine
COMMENT = "Right idea; say why the table grows with the vocabulary."
ANSWER = sorted(gid for gid, kind, _ in graded_parts(SOURCE) if kind == "answer")[0]


def _tinytorch(*args, cwd):
    return subprocess.run([CLI, *map(str, args)], cwd=cwd, capture_output=True, text=True)


@pytest.fixture(scope="module")
def term(tmp_path_factory, graded_pair):
    """One machine's course of the class (the session's graded pair, copied: the test scores it) and the same class
    graded as two shards, with the same options."""
    base = tmp_path_factory.mktemp("sharded-term")
    shutil.copytree(graded_pair / "submissions", base / "submissions")
    shutil.copytree(graded_pair / "single", base / "single")
    assert sorted(shard_of(s, 2) for s in STUDENTS) == [1, 2], "each shard must hold one student"
    runs = {"course-1": ["--shard", "1/2"], "course-2": ["--shard", "2/2"]}
    procs = {name: subprocess.Popen([CLI, "grade", "11", "submissions", "--course", name, "--nbs", NBS,
                                     "--cell-timeout", "30", *args], cwd=base, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True) for name, args in runs.items()}
    for name, p in procs.items():
        out, err = p.communicate()
        assert p.returncode == 0, f"{name}: {out[-2000:]}{err[-2000:]}"
    return base


@pytest.fixture(scope="module")
def merged(term):
    out = _tinytorch("grade-merge", GRADES, f"course-1/{GRADES}", f"course-2/{GRADES}", "--course", "course",
                     cwd=term)
    assert out.returncode == 0, out
    return term / "course", out


def _gradebook(course):
    from tinytorch.course.basics.course import Course
    from tinytorch.course.grading.gradebook import read_gradebook
    return read_gradebook(Course(course), "11_embeddings")


def test_the_merged_course_holds_every_student_as_one_machines_course_does(term, merged):
    course, out = merged
    assert "one course for the whole class in course (one gradebook)" in out.stdout, out.stdout
    assert "merged 2 student(s)" in out.stdout, out.stdout
    assert (course / GRADES).read_bytes() == (term / GRADES).read_bytes() == (term / "single" / GRADES).read_bytes()
    assert _gradebook(course) == _gradebook(term / "single")
    assert sorted(_gradebook(course)) == STUDENTS
    for folder in ("autograded", "feedback"):
        assert sorted(p.name for p in (course / folder).iterdir()) == STUDENTS, folder
    assert (course / "grades_11_embeddings.log").read_text() == (term / "single" / "grades_11_embeddings.log").read_text()
    record = "graded_answers_11_embeddings.json"          # what a later re-grade compares your scored parts with
    assert json.loads((course / record).read_text()) == json.loads((term / "single" / record).read_text())


def _wait_for(condition, what):
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"the formgrader never saved {what}"
        time.sleep(0.25)


def test_one_formgrader_session_and_one_grades_run_cover_the_class(term, merged):
    course, _ = merged
    server, url = serve_formgrader(CLI, course)
    base = url.split("/formgrader")[0]
    try:
        with chromium("the formgrader") as browser:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(WAIT_S * 1000)
            page.goto(url)
            listing = page.request.get(f"{base}/formgrader/api/submitted_notebooks/11_embeddings/11_embeddings").json()
            assert sorted(s["student"] for s in listing) == STUDENTS, listing    # both shards' students, one session
            submission = next(s["id"] for s in listing if s["student"] == "reference")
            page.goto(f"{base}/formgrader/submissions/{submission}/")
            page.wait_for_function("() => window.MathJax && MathJax.loaded === true")
            box = page.locator(f"input.score#{ANSWER}")
            box.fill("3")
            box.press("Tab")
            comment = page.locator(f"textarea#{ANSWER}-comment")
            comment.fill(COMMENT)
            comment.press("Tab")

            def saved(kind, field, value):
                got = page.request.get(f"{base}/formgrader/api/{kind}?submission_id={submission}").json()
                return {g["name"]: g for g in got}[ANSWER][field] == value
            _wait_for(lambda: saved("grades", "manual_score", 3), f"the score of {ANSWER}")
            _wait_for(lambda: saved("comments", "manual_comment", COMMENT), f"the comment on {ANSWER}")
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(WAIT_S) == 0

    # the same score and comment on one machine's course, written into its gradebook directly
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{term / 'single' / 'gradebook.db'}", "tinytorch") as gb:
        nb = gb.find_submission_notebook("11_embeddings", "11_embeddings", "reference")
        next(g for g in nb.grades if g.name == ANSWER).manual_score = 3
        next(c for c in nb.comments if c.name == ANSWER).manual_comment = COMMENT
        gb.db.commit()
    for folder in (course, term / "single"):
        out = _tinytorch("grades", "11", "--course", folder, cwd=term)
        assert out.returncode == 0 and "0 complete, 2 to grade" in out.stdout, out
    assert (course / FINAL).read_bytes() == (term / "single" / FINAL).read_bytes()
    rows = {r["student"]: r for r in csv.DictReader(open(course / FINAL))}
    assert rows["reference"][ANSWER] == "3" and rows["untouched"][ANSWER] == "", rows
    page_html = (course / "feedback" / "reference" / "11_embeddings" / "11_embeddings.html").read_text()
    assert COMMENT in html.unescape(page_html)


def _nothing_written(folder, before):
    assert sorted(p.name for p in folder.iterdir()) == before


def test_a_student_in_two_shards_is_one_line_and_writes_nothing(term):
    shutil.copytree(term / "course-1", term / "course-1-again")
    before = sorted(p.name for p in term.iterdir())
    out = _tinytorch("grade-merge", "twice.csv", f"course-1/{GRADES}", f"course-1-again/{GRADES}", "--course", "twice",
                     cwd=term)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out
    assert "student 'reference' is in both course-1/" in out.stderr, out.stderr
    _nothing_written(term, before)


def test_a_shard_without_a_gradebook_is_one_line_and_writes_nothing(term):
    shutil.copytree(term / "course-2", term / "course-2-bare")
    (term / "course-2-bare" / "gradebook.db").unlink()
    before = sorted(p.name for p in term.iterdir())
    out = _tinytorch("grade-merge", "bare.csv", f"course-1/{GRADES}", f"course-2-bare/{GRADES}", "--course", "bare",
                     cwd=term)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out
    assert out.stderr.startswith("tinytorch grade-merge: course-2-bare: no gradebook.db"), out.stderr
    _nothing_written(term, before)


def test_a_shard_whose_gradebook_lacks_its_students_is_one_line_and_writes_nothing(term):
    shutil.copytree(term / "course-2", term / "course-2-swapped")
    shutil.copy(term / "course-1" / "gradebook.db", term / "course-2-swapped" / "gradebook.db")
    before = sorted(p.name for p in term.iterdir())
    out = _tinytorch("grade-merge", "swapped.csv", f"course-1/{GRADES}", f"course-2-swapped/{GRADES}", "--course",
                     "swapped", cwd=term)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out
    assert out.stderr.startswith("tinytorch grade-merge: course-2-swapped/gradebook.db lacks 'untouched', graded in "
                                 f"{GRADES}: not the gradebook of the run that wrote it"), out.stderr
    _nothing_written(term, before)
