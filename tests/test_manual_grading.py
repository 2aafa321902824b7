"""The instructor's loop after autograding, as an instructor runs it: `tinytorch formgrade` serves nbgrader's
formgrader (JupyterLab) on a graded course, a written answer is scored and commented in headless Chromium,
then `tinytorch grades` writes the final grades and feedback with that score and comment."""
import csv
import html
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from requirements import require

require("nbgrader")

from browser import chromium, serve_formgrader  # noqa: E402
from tinytorch.course.authoring.assignments import graded_parts  # noqa: E402
from tinytorch.course.authoring.leaks import find_leaks, secret_lines  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"
SOURCE = NBS / "11_embeddings.ipynb"
CLI = Path(sys.executable).parent / "tinytorch"           # the console script from pyproject.toml
ARTIFACTS = ROOT / ".artifacts" / "formgrader"
WAIT_S = 120               # a limit for a hung server or page, with room for a busy machine
COMMENT = "Clear argument; the table size is computed, not guessed."
PARTS = {gid: (kind, pts) for gid, kind, pts in graded_parts(SOURCE)}
ANSWERS = sorted(gid for gid, (kind, _) in PARTS.items() if kind == "answer")     # reflect-a1, a2, a3
CODE_MAX = sum(pts for kind, pts in PARTS.values() if kind == "test")


@pytest.fixture(scope="module")
def course(tmp_path_factory, graded_pair):
    "A graded course of two students (the session's graded pair, copied: the tests score and comment in it)."
    return shutil.copytree(graded_pair / "single", tmp_path_factory.mktemp("term") / "course")


def _answers(url):
    try:
        with urllib.request.urlopen(url, timeout=5):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def formgrader(course):
    server, url = serve_formgrader(CLI, course)
    yield url
    server.send_signal(signal.SIGTERM)
    assert server.wait(WAIT_S) == 0
    assert not _answers(url.split("/formgrader")[0] + "/api/status"), "the server outlived `tinytorch formgrade`"


def _api(page, base, kind, submission):
    "grade_id -> grade (or comment) as the formgrader's API returns it, through the browser's logged-in session."
    return {g["name"]: g for g in page.request.get(f"{base}/formgrader/api/{kind}?submission_id={submission}").json()}


def _wait_for(condition, what):
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"the formgrader never saved {what}"
        time.sleep(0.25)


def _score(page, grade_id, value):
    box = page.locator(f"input.score#{grade_id}")
    box.fill(value)
    box.press("Tab")                                       # the formgrader saves when the box loses focus
    return box


def test_scores_and_comments_reach_final_grades_and_feedback(course, formgrader):
    base = formgrader.split("/formgrader")[0]
    with chromium("the formgrader") as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(WAIT_S * 1000)
        problems = []
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        # a web font the browser stops fetching (the page moved on) is not a page that fails to work
        page.on("requestfailed", lambda r: r.resource_type == "font" or problems.append(f"request failed: {r.url}"))
        page.goto(formgrader)                              # the printed address logs the browser in
        listing = page.request.get(f"{base}/formgrader/api/submitted_notebooks/11_embeddings/11_embeddings").json()
        submission = next(s["id"] for s in listing if s["student"] == "reference")
        page.goto(f"{base}/formgrader/submissions/{submission}/")
        try:                                               # the page's script is ready once MathJax is
            page.wait_for_function("() => window.MathJax && MathJax.loaded === true")
        except Exception:
            pytest.fail("the grading page never finished loading, so no score box can save:\n" + "\n".join(problems))
        assert page.locator("input.score").count() == len(PARTS), "every graded part should show a score box"

        a1, a2, a3 = ANSWERS
        assert [PARTS[a][1] for a in ANSWERS] == [4, 4, 4], "the scores below assume three answers of 4 points"
        _score(page, a1, "3")
        comment = page.locator(f"textarea#{a1}-comment")
        comment.fill(COMMENT)
        comment.press("Tab")
        too_high, negative = _score(page, a2, "99"), _score(page, a3, "-1")
        _wait_for(lambda: _api(page, base, "grades", submission)[a1]["manual_score"] == 3, f"the score of {a1}")
        # out of range: the formgrader saves the maximum for a score above it and 0 for a negative one
        _wait_for(lambda: _api(page, base, "grades", submission)[a2]["manual_score"] == 4, f"{a2} as its maximum")
        _wait_for(lambda: _api(page, base, "grades", submission)[a3]["manual_score"] == 0, f"{a3} as 0")
        assert (too_high.input_value(), negative.input_value()) == ("4", "0")
        _wait_for(lambda: _api(page, base, "comments", submission)[a1]["manual_comment"] == COMMENT,
                  f"the comment on {a1}")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.locator(f"input.score#{a1}").scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "formgrader.png"))
        assert not problems, "\n".join(problems)

    out = subprocess.run([CLI, "grades", "11", "--course", course], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "final grades: " in out.stdout and "1 complete, 1 to grade" in out.stdout, out.stdout
    rows = {r["student"]: r for r in csv.DictReader(open(course / "final_grades_11_embeddings.csv"))}
    reference, untouched = rows["reference"], rows["untouched"]
    assert [reference[a] for a in ANSWERS] == ["3", "4", "0"]
    total, top = CODE_MAX + 7, CODE_MAX + 12
    assert (reference["autograded_total"], reference["manual_total"], reference["total"], reference["max_points"]) \
        == (f"{CODE_MAX:g}", "7", f"{total:g}", f"{top:g}"), reference
    assert reference["status"] == "complete" and reference["details"] == ""
    assert untouched[a1] == "" and untouched["status"] == "to grade", untouched
    assert untouched["details"] == "to grade: " + ", ".join(ANSWERS)

    page_html = (course / "feedback" / "reference" / "11_embeddings" / "11_embeddings.html").read_text()
    text = html.unescape(page_html)
    assert COMMENT in text and f"Total: {total:g} / {top:g} points" in text
    assert find_leaks(secret_lines(SOURCE, solutions=False), text) == [], "the feedback shows hidden tests"


def test_a_score_outside_its_range_stops_final_grades(course, tmp_path):
    from nbgrader.api import Gradebook
    copy = shutil.copytree(course, tmp_path / "course")
    with Gradebook(f"sqlite:///{copy / 'gradebook.db'}", "tinytorch") as gb:
        sub = gb.find_submission_notebook("11_embeddings", "11_embeddings", "untouched")
        next(g for g in sub.grades if g.name == ANSWERS[1]).manual_score = 9   # by other means than the formgrader
        gb.db.commit()
    (copy / "final_grades_11_embeddings.csv").unlink(missing_ok=True)
    out = subprocess.run([CLI, "grades", "11", "--course", copy], capture_output=True, text=True)
    assert out.returncode == 2 and out.stdout == "", out.stdout + out.stderr
    assert out.stderr.strip() == (f"tinytorch grades: untouched: part {ANSWERS[1]} has score 9, outside 0 … 4; "
                                  "correct it in the formgrader"), out.stderr
    assert not (copy / "final_grades_11_embeddings.csv").exists(), "a final grades file was written anyway"


@pytest.mark.parametrize("command", [["grades", "11", "--course"], ["formgrade"]])
def test_a_course_never_graded_gets_one_line(command, tmp_path):
    out = subprocess.run([CLI, *command, tmp_path], capture_output=True, text=True)
    assert out.returncode == 2, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "run `tinytorch grade" in lines[0] and str(tmp_path) in lines[0], out.stderr


def test_a_gradebook_changed_after_grading_cannot_inflate_a_grade(course, tmp_path):
    """What a script in the formgrader (or an edited gradebook.db) could write: an autograded score raised, extra
    credit on an autograded part, extra credit that takes the total above the maximum. None of it is paid, and the
    student's row is flagged with each reason."""
    from nbgrader.api import Gradebook
    copy = shutil.copytree(course, tmp_path / "course")
    tests = [gid for gid, (kind, _) in PARTS.items() if kind == "test"]
    raised, extra = tests[0], tests[1]
    with Gradebook(f"sqlite:///{copy / 'gradebook.db'}", "tinytorch") as gb:
        sub = gb.find_submission_notebook("11_embeddings", "11_embeddings", "untouched")
        grades = {g.name: g for g in sub.grades}
        grades[raised].auto_score = PARTS[raised][1]
        grades[extra].extra_credit = 7
        grades[ANSWERS[0]].manual_score, grades[ANSWERS[0]].extra_credit = 4, 100
        gb.db.commit()
    out = subprocess.run([CLI, "grades", "11", "--course", copy], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "1 flagged" in out.stdout, out.stdout
    rows = {r["student"]: r for r in csv.DictReader(open(copy / "final_grades_11_embeddings.csv"))}
    row, top = rows["untouched"], CODE_MAX + 12
    assert row["status"] == "flagged", row
    assert (row[raised], row[extra], row["autograded_total"]) == ("0", "0", "0"), row
    assert row["manual_total"] == "104" and row["total"] == "104", row        # counted, but flagged for you
    assert f"part {raised} has {PARTS[raised][1]:g} in the gradebook, not the 0 that tinytorch grade recorded" \
        in row["details"], row["details"]
    assert f"part {extra} has extra credit 7, refused on an autograded part" in row["details"], row["details"]
    assert f"total 104 above the maximum {top:g}" in row["details"], row["details"]
    assert rows["reference"]["status"] != "flagged", rows["reference"]


def test_final_grades_and_feedback_read_the_gradebook_once(course, tmp_path, monkeypatch):
    "`tinytorch grades` opens the gradebook once for the scores: the final grades and the feedback pages share them."
    from tinytorch.course.grading import feedback
    from tinytorch.course.results import final_grades
    copy = shutil.copytree(course, tmp_path / "course")
    reads, real = [], final_grades.read_gradebook
    def counted(*args, **kwargs):
        reads.append(args)
        return real(*args, **kwargs)
    monkeypatch.setattr(final_grades, "read_gradebook", counted)
    monkeypatch.setattr(feedback, "read_gradebook", counted)
    final_grades.grades("11", copy, log=lambda line: None)
    assert len(reads) == 1, reads
    assert (copy / "final_grades_11_embeddings.csv").is_file()
