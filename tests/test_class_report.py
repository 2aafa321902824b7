"""The class report, `tinytorch report 11 --course COURSE`: each part's counts and its commonest
failures, the plots, one page that shows a student's markup as text, and the pairs of submissions
that look alike.

The similarity checks run on notebooks (no grading): a class whose correct solutions were written in
different ways (loops, vectorised, other NumPy routines; tests/solution_variants.py) makes no pair,
a copy of one of them with the names changed and statements moved is found, and code that much of
the class shares makes no pair. The rest runs on a small class graded as an instructor grades it
(`graded_report_class` in tests/conftest.py)."""
import contextlib
import csv
import io
import json
import shutil
import sys
from pathlib import Path

import pytest
from requirements import require

require("nbgrader")

from payloads import MARK  # noqa: E402
from solution_variants import disguised_copy, solved_as  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = "11_embeddings"
CLI = Path(sys.executable).parent / "tinytorch"
WAIT_S = 120


def _tinytorch(*args) -> tuple:
    "(exit code, stdout, stderr) of `tinytorch ARGS...` run in this process."
    from tinytorch.cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def notebooks(release_11):
    "(the student release, the instructor's notebook) of module 11, as dicts."
    source = ROOT / "nbs" / f"{ASSIGNMENT}.ipynb"
    return json.loads(release_11.read_text()), json.loads(source.read_text())


def _pairs(klass, source):
    from tinytorch.course.results.report.similarity import part_prints, similar_pairs, student_code
    return similar_pairs({s: part_prints(student_code(nb, source)) for s, nb in klass.items()})


def test_correct_solutions_written_differently_make_no_pair(notebooks):
    release, source = notebooks
    klass = {f"way{k}": solved_as(release, source, k) for k in range(4)}
    klass.update(blank=release, also_blank=release)    # release-only notebooks: alike, never a pair
    assert _pairs(klass, source) == []


def test_a_copy_with_names_changed_and_statements_moved_is_found(notebooks):
    from tinytorch.course.results.report.similarity import student_code
    release, source = notebooks
    klass = {f"way{k}": solved_as(release, source, k) for k in range(4)}
    klass["copycat"] = disguised_copy(klass["way1"])
    theirs, mine = student_code(klass["way1"], source), student_code(klass["copycat"], source)
    disguised = ("lookup", "init", "tie", "tpe-forward")
    assert all(theirs[part] != mine[part] for part in disguised), "not disguised"
    pairs = _pairs(klass, source)
    assert [(p.first, p.second) for p in pairs] == [("copycat", "way1")], pairs
    assert pairs[0].similarity >= 0.8, pairs[0]
    # the parts whose statements moved (scatter, shift, tpe-forward) match too; of a four-line part
    # (tie) with two of its lines swapped, too little is left in place to match on its own
    matched = set(pairs[0].parts)
    assert {"lookup", "init", "rope", "scatter", "shift", "tpe-forward"} <= matched, matched
    assert len(pairs[0].parts) >= 9, pairs[0].parts


def test_code_much_of_the_class_shares_makes_no_pair(notebooks):
    from tinytorch.course.results.report.similarity import part_prints, student_code
    release, source = notebooks
    shared = ("as-ids", "init", "shift", "learned", "sinusoidal", "scatter")    # most of the code
    own = ("lookup", "embedding-grad", "tpe-forward", "tie", "rope")
    klass = {f"way{k}": solved_as(release, source, {c: 1 if c in shared else k
                                                    for c in own + shared})
             for k in range(4)}
    a, b = (part_prints(student_code(klass[s], source)) for s in ("way0", "way2"))
    smaller = min(sum(map(len, a.values())), sum(map(len, b.values())))
    alike = sum(len(a[p] & b[p]) for p in a if p in b) / smaller
    assert alike > 0.5, f"the class shares too little for this check ({alike:.2f})"
    assert _pairs(klass, source) == []


@pytest.fixture(scope="module")
def report(graded_report_class, tmp_path_factory):
    "(the folder the report was written to, what `tinytorch report` printed)."
    out = tmp_path_factory.mktemp("class-report") / "report"
    course = graded_report_class / "course"
    code, stdout, stderr = _tinytorch("report", "11", "--course", course, "--out", out)
    assert code == 0, stdout + stderr
    return out, stdout


def _rows(path: Path) -> list:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_each_part_is_counted_and_its_failures_grouped(report):
    out, stdout = report
    rows = {r["part"]: r for r in _rows(out / f"report_{ASSIGNMENT}.csv")}
    assert "class report: 6 submissions" in stdout
    lookup = rows["test_lookup_rows"]
    counts = (lookup["submissions"], lookup["full_marks"], lookup["partial"], lookup["zero"])
    assert counts == ("6", "4", "0", "2"), lookup
    rope = rows["test_rotate_pairs"]
    failed = (rope["full_marks"], rope["zero"], rope["commonest_failure"])
    assert failed == ("5", "1", "NotImplementedError"), rope
    assert rows["reflect-a1"]["to_grade"] == "6" and rows["reflect-a1"]["mean_points"] == ""
    said = [line.strip() for line in stdout.splitlines() if "raised ValueError(<script>" in line]
    assert said and said[0].startswith("1× AssertionError: lookup_rows(table, [#]) raised"), stdout


def test_the_pairs_csv_names_the_copy_only(report):
    out, stdout = report
    rows = _rows(out / f"similarity_{ASSIGNMENT}.csv")
    assert [(r["student"], r["other_student"]) for r in rows] == [("ada", "copycat")], rows
    assert float(rows[0]["similarity"]) >= 0.8 and "lookup:" in rows[0]["matching_parts"]
    assert "ada and copycat" in stdout


def test_the_plots_are_pictures_and_the_page_holds_them(report):
    out, _ = report
    for name in ("totals", "full_marks", "late"):
        png = (out / f"report_{ASSIGNMENT}_{name}.png").read_bytes()
        assert png.startswith(b"\x89PNG\r\n\x1a\n")
    page = (out / f"report_{ASSIGNMENT}.html").read_text()
    assert page.count('src="data:image/png;base64,') == 3
    assert "Content-Security-Policy" in page and "<script" not in page


def test_written_answers_count_once_scored_and_grades_run(graded_report_class, tmp_path):
    from nbgrader.api import Gradebook
    course = tmp_path / "course"
    shutil.copytree(graded_report_class / "course", course)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "tinytorch") as gb:
        for student, score in (("ada", 4.0), ("bea", 1.5)):
            sub = gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, student)
            next(g for g in sub.grades if g.name == "reflect-a1").manual_score = score
        gb.db.commit()
    code, stdout, stderr = _tinytorch("grades", "11", "--course", course)
    assert code == 0, stdout + stderr
    code, stdout, stderr = _tinytorch("report", "11", "--course", course)
    assert code == 0, stdout + stderr
    row = next(r for r in _rows(course / f"report_{ASSIGNMENT}.csv") if r["part"] == "reflect-a1")
    counts = (row["full_marks"], row["partial"], row["to_grade"], row["mean_points"])
    assert counts == ("1", "1", "4", "2.75"), row


@pytest.mark.parametrize("args, words", [
    (["report", "12", "--course", "{course}"],
     ["holds no grades for module 12", "run `tinytorch grade"]),
    (["report", "embeddings", "--course", "{course}"],
     ["'embeddings'", "a module is named by its number"]),
    (["report", "11", "--course", "{course}", "--out", "{course}/grades_11_embeddings.csv"],
     ["--out", "is a file, expected a folder"]),
])
def test_bad_input_is_one_line_and_exit_2(graded_report_class, args, words):
    course = graded_report_class / "course"
    before = sorted(p.name for p in course.iterdir())
    code, stdout, stderr = _tinytorch(*[a.replace("{course}", str(course)) for a in args])
    assert code == 2 and stdout == "" and stderr.count("\n") == 1, (code, stdout, stderr)
    assert all(w in stderr for w in words), stderr
    assert sorted(p.name for p in course.iterdir()) == before, "a refused report wrote files"


VIOLATIONS = ("window.__violations = []; document.addEventListener('securitypolicyviolation', "
              "e => window.__violations.push(e.violatedDirective))")
INJECT = f"""() => {{
    const s = document.createElement('script');
    s.textContent = "console.log('{MARK}dom-script')";
    document.body.appendChild(s);
}}"""


def test_no_script_a_student_wrote_runs_in_the_page(report):
    """The hostile student's failure message holds a <script> and an <img onerror>: in Chromium the
    page shows them as text and runs neither; a script added to the page after the cleaner (as if it
    had missed one) is refused."""
    from browser import chromium
    out, _ = report
    with chromium("the class report's page") as browser:
        page = browser.new_page()
        page.set_default_timeout(WAIT_S * 1000)
        ran = []
        page.on("console", lambda m: ran.append(m.text) if m.text.startswith(MARK) else None)
        page.add_init_script(VIOLATIONS)
        page.goto((out / f"report_{ASSIGNMENT}.html").as_uri(), wait_until="load")
        text = page.inner_text("body")
        assert ran == [], f"the student's markup ran: {ran}"
        page.evaluate(INJECT)
        page.wait_for_function("() => window.__violations.some(v => v.startsWith('script-src'))",
                               timeout=WAIT_S * 1000)
        images = page.evaluate("() => [...document.images].filter(i => i.naturalWidth > 0).length")
        page.close()
    assert ran == [], ran
    assert f"<script>console.log(/{MARK}message/.source)</script>" in text, text[:2000]
    assert images == 3, "the plots are not shown"
