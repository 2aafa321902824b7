"""A submission can't act in the instructor's browser: a student hands in script in every place a notebook can hold
it (markdown, a written answer, outputs) and the instructor comments with markup; in headless Chromium none of it
runs, on the feedback pages (from disk and over http, as `grade` writes them and as `grades` rewrites them) or in
the formgrader's submission view, while the lesson's legitimate content still renders. Then what a script would have
found on the formgrader's server, had it run, and that `nbgrader export` pays what the final grades say."""
import contextlib
import csv
import functools
import http.server
import io
import json
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from requirements import require

require("nbgrader")

from browser import chromium, serve_formgrader  # noqa: E402
from course_scenarios import build, demo_cells, solve, without_demos  # noqa: E402
from payloads import (COMMENT, ESCAPE_FOLDER, FORMULA_FOLDER, HOSTILE_ROSTER, MARK, hostile,  # noqa: E402
                      hostile_roster_csv)

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"
CLI = Path(sys.executable).parent / "tinytorch"
ASSIGNMENT = "11_embeddings"
ANSWER = "reflect-a1"
WAIT_S = 120
PAGE = Path("feedback") / "hostile" / ASSIGNMENT / f"{ASSIGNMENT}.html"


def _tinytorch(*args) -> tuple:
    """(exit code, what it printed on stdout, on stderr) of `tinytorch ARGS...` run in this process: nbgrader and the
    course modules are loaded once for the file, not once per command."""
    from tinytorch.cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def course(release_11, tmp_path_factory):
    """One graded course shared by every check: `hostile` (payloads everywhere, correct code), `flagged` (a
    submission whose notebook score the re-check doesn't reproduce) and `copied` (the instructor's notebook handed in
    as it is: held at 0), graded as an instructor grades them."""
    base = tmp_path_factory.mktemp("browser-safety")
    release = json.loads(release_11.read_text())
    source = json.loads((NBS / f"{ASSIGNMENT}.ipynb").read_text())
    subs = build(release, source, {"course": str(base / "course"), "submissions": str(base / "submissions")})
    demos = demo_cells(release)
    for student, nb in {"hostile": hostile(without_demos(subs["reference"], demos), ANSWER),
                        "flagged": without_demos(subs["input-transformer"], demos),
                        "copied": without_demos(solve(release, source), demos),
                        ESCAPE_FOLDER: subs["reference"], FORMULA_FOLDER: subs["reference"]}.items():
        dest = base / "submissions" / student / f"{ASSIGNMENT}.ipynb"
        dest.parent.mkdir(parents=True)
        dest.write_text(json.dumps(nb))
    (base / "roster.csv").write_text(hostile_roster_csv())
    out = subprocess.run([CLI, "grade", "11", "submissions", "--course", "course", "--nbs", NBS, "--jobs", "2",
                          "--cell-timeout", "30", "--roster", "roster.csv"], cwd=base, capture_output=True, text=True)
    assert out.returncode == 3 and "flagged" in out.stdout, f"{out.stdout[-2000:]}{out.stderr[-2000:]}"
    (base / "grade.out").write_text(out.stdout + out.stderr)                 # what the instructor's console showed
    course = base / "course"
    shutil.copytree(course / "feedback", base / "feedback-by-grade")          # the pages as `grade` wrote them
    return course


@pytest.fixture(scope="module")
def regraded(course):
    "The course after the instructor commented on the written answer with markup and ran `tinytorch grades`."
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "tinytorch") as gb:
        sub = gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, "hostile")
        next(c for c in sub.comments if c.name == ANSWER).manual_comment = COMMENT
        gb.db.commit()
    code, stdout, stderr = _tinytorch("grades", "11", "--course", course)
    assert code == 0, stdout + stderr
    return course


@contextlib.contextmanager
def _http(folder):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def browser():
    with chromium("the browser-safety checks") as b:
        yield b


@pytest.fixture(scope="module")
def formgrader(regraded):
    server, url = serve_formgrader(CLI, regraded)
    yield url
    server.send_signal(signal.SIGTERM)
    assert server.wait(WAIT_S) == 0


def _open(browser, url, login=None, watch=None):
    """(page, payload names that ran) after `url` loaded, its javascript: links clicked and its events handled;
    `watch(page)` is called before anything loads."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    if watch:
        watch(page)
    page.set_default_timeout(WAIT_S * 1000)
    ran = set()
    page.on("console", lambda m: ran.add(m.text[len(MARK):]) if m.text.startswith(MARK) else None)
    if login:
        page.goto(login)
    page.goto(url, wait_until="load")
    links = page.locator("a", has_text="PAYLOAD LINK")
    for k in range(links.count()):
        links.nth(k).click()
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => setTimeout(done, 0)))")
    return page, ran


def _submission_url(page, formgrader, student):
    base = formgrader.split("/formgrader")[0]
    listing = page.request.get(f"{base}/formgrader/api/submitted_notebooks/{ASSIGNMENT}/{ASSIGNMENT}").json()
    return f"{base}/formgrader/submissions/{next(s['id'] for s in listing if s['student'] == student)}/"


@contextlib.contextmanager
def _place(where, course, browser, formgrader=None, watch=None):
    "Open the hostile student's page in `where`; yields (page, names that ran)."
    folder = {"feedback": course.parent / "feedback-by-grade", "regraded": course / "feedback"}.get(where.split("-")[0])
    if where.endswith("-file"):
        yield _open(browser, (folder / PAGE.relative_to("feedback")).as_uri(), watch=watch)
    elif where.endswith("-http"):
        with _http(folder) as base:
            yield _open(browser, f"{base}/{PAGE.relative_to('feedback').as_posix()}", watch=watch)
    else:
        login = browser.new_page()
        login.goto(formgrader)
        url = _submission_url(login, formgrader, "hostile")
        login.close()
        page, ran = _open(browser, url, login=formgrader, watch=watch)
        page.wait_for_function("() => window.MathJax && MathJax.loaded === true")
        yield page, ran


PLACES = ["feedback-file", "feedback-http", "formgrader", "regraded-file", "regraded-http"]
# The lesson's own content on the hostile student's page: what -> (selector, text it holds); counted on each visit.
LESSON_CONTENT = {"heading": ("h2", "A heading the lesson shows"), "emphasis": ("p em", "emphasis"),
                  "list": ("li", "two items"), "link": ("a[href='https://example.org/embeddings']", None),
                  "markdown table": ("table", "0.25"), "pandas table": ("table.dataframe th", "loss"),
                  "figure as PNG": ("img[src^='data:image/png']", None),
                  "figure as SVG": ("img[src^='data:image/svg+xml']", None),
                  "typeset formula": (".MathJax_Display, .MathJax, .MathJax_CHTML", None)}


def _formgrader(where, request):
    return request.getfixturevalue("formgrader") if where == "formgrader" else None


@pytest.fixture(scope="module")
def seen(course, regraded, browser):
    """where -> what one visit of the hostile student's page there showed: its text, the count of each piece of
    LESSON_CONTENT, what covers the scores, the payloads that ran. Each place is opened once for the three checks
    that only look (the page policy's and the formgrader's checks act on a page of their own)."""
    found = {}

    def visit(where, formgrader=None):
        if where not in found:
            with _place(where, course, browser, formgrader) as (page, ran):
                found[where] = {"text": page.inner_text("body"),
                                "content": {what: page.locator(selector, has_text=text).count()
                                            for what, (selector, text) in LESSON_CONTENT.items()},
                                "removed": page.get_by_text("interactive output removed").count(),
                                **_covering(where, page)}       # last: it scrolls the page
                page.close()
            found[where]["ran"] = sorted(ran)
        return found[where]
    return visit


@pytest.mark.parametrize("where", PLACES)
def test_no_payload_runs(where, seen, request):
    s = seen(where, _formgrader(where, request))
    text = s["text"]                                # the payloads are in the page (as text, once made harmless)
    assert "PAYLOAD LINK md" in text and "PAYLOAD LINK answer" in text and "My answer, with markup" in text
    assert "Nice work" in text or not where.startswith("regraded"), "the comment is not on the page"
    assert s["ran"] == [], f"{where}: ran {s['ran']}"


@pytest.mark.parametrize("where", PLACES)
def test_the_lessons_content_still_renders(where, seen, request):
    s = seen(where, _formgrader(where, request))
    count = s["content"]
    once = {what: count[what] for what in ("heading", "emphasis", "link", "markdown table", "pandas table")}
    assert once == dict.fromkeys(once, 1), f"{where}: {once}"
    assert all(count[what] >= 1 for what in ("list", "figure as PNG", "figure as SVG")), f"{where}: {count}"
    assert s["removed"] >= 1, f"{where}: no 'interactive output removed' note"
    if where == "formgrader":                                                      # MathJax typeset the formula
        assert count["typeset formula"] >= 1, count
    else:                       # the pages load MathJax from its CDN, offline here: the formula's TeX is intact
        assert r"\sum_{i=1}^{n} d_i" in s["text"]


VIOLATIONS = ("window.__violations = []; document.addEventListener('securitypolicyviolation', "
              "e => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI))")
INJECT = f"""() => new Promise(done => {{
    const s = document.createElement('script');
    s.textContent = "console.log('{MARK}dom-script')";
    document.body.appendChild(s);
    const a = document.createElement('a');
    a.href = "javascript:console.log('{MARK}dom-javascript-link')";
    a.textContent = 'PAYLOAD LINK dom';
    document.body.appendChild(a);
    const i = document.createElement('img');
    i.setAttribute('onerror', "console.log('{MARK}dom-img-onerror')");
    i.addEventListener('error', () => setTimeout(done, 0));
    i.src = 'x-missing.png';
    document.body.appendChild(i);
}})"""


@pytest.mark.parametrize("where", ["feedback-file", "feedback-http", "formgrader"])
def test_the_page_policy_refuses_script_the_cleaner_let_through(where, course, browser, request):
    """The second line: markup added to the page after the cleaner (as if it had missed it) doesn't run, and the
    page's own scripts are not refused."""
    with _place(where, course, browser, _formgrader(where, request),
                watch=lambda page: page.add_init_script(VIOLATIONS)) as (page, ran):
        own = [v for v in page.evaluate("() => window.__violations") if v.startswith("script-src")]
        assert own == [], f"the page's own scripts were refused: {own}"
        page.evaluate(INJECT)
        page.locator("a", has_text="PAYLOAD LINK dom").click()
        # Each refusal is reported by an event when the browser gets to it, later on a busy machine:
        # the count is read from here until all three are in (or WAIT_S has passed), so no wait
        # depends on the page drawing.
        deadline = time.monotonic() + WAIT_S
        while len(_script_refusals(page)) < 3 and time.monotonic() < deadline:
            page.wait_for_timeout(100)
        refused = page.evaluate("() => window.__violations")
        page.close()
    assert ran == set(), f"{where}: ran {sorted(ran)}"
    assert len([v for v in refused if v.startswith("script-src")]) == 3, refused


def _script_refusals(page) -> list:
    "The page policy's reports so far of a script it refused."
    return page.evaluate("() => window.__violations.filter(v => v.startsWith('script-src'))")


# What a script running in the formgrader's page, with the instructor's session, would try. POSTs that would run
# nbgrader come last: on a server that allowed them they change the course.
ATTEMPTS = [("GET", "/api/contents"), ("GET", "/api/contents/source/11_embeddings/11_embeddings.ipynb"),
            ("GET", "/files/source/11_embeddings/11_embeddings.ipynb"), ("GET", "/api/sessions"),
            ("GET", "/api/kernelspecs"), ("GET", "/lab"), ("GET", "/tree"), ("PUT", "/api/contents/evil.py"),
            ("POST", "/api/kernels"), ("POST", "/api/sessions"), ("POST", "/api/terminals"),
            ("PUT", "/formgrader/api/student/intruder"), ("PUT", "/formgrader/api/assignment/intrusion"),
            ("POST", "/formgrader/api/assignment/11_embeddings/hostile/generate_feedback"),
            ("POST", "/formgrader/api/submission/11_embeddings/hostile/autograde")]
FETCH = """async ([base, tries]) => {
    const xsrf = decodeURIComponent((document.cookie.match(/_xsrf=([^;]+)/) || [, ''])[1]);
    const out = {};
    for (const [method, path] of tries) {
        const body = method === 'GET' ? undefined : (path.includes('contents') ? '{"type": "file", "format": "text", "content": "x"}' : '{}');
        const r = await fetch(base + path, {method, body, headers: {'X-XSRFToken': xsrf, 'Content-Type': 'application/json'}});
        out[method + ' ' + path] = r.status;
    }
    return out;
}"""


def test_a_script_on_the_formgrader_origin_can_only_grade(course, browser, formgrader, request):
    """Measured from the submission view with the instructor's session: Jupyter's API and the formgrader's
    nbgrader-running endpoints are refused; what the grading page itself requests while a score and a comment are
    saved is served."""
    base = formgrader.split("/formgrader")[0]
    used = []
    watch = lambda page: page.on("response", lambda r: used.append((r.request.method, r.url.replace(base, "").split("?")[0],
                                                                    r.status)))
    with _place("formgrader", course, browser, formgrader, watch=watch) as (page, _):
        box = page.locator(f"input.score#{ANSWER}")
        box.fill("2")
        box.press("Tab")
        comment = page.locator(f"textarea#{ANSWER}-comment")
        comment.fill("seen")
        comment.press("Tab")
        page.wait_for_function(f"""() => fetch('{base}/formgrader/api/comments?submission_id=' + submission_id)
            .then(r => r.json()).then(cs => cs.some(c => c.name === '{ANSWER}' && c.manual_comment === 'seen'))""")
        page_used = [u for u in used if u[0] != "GET" or not u[1].endswith("/api/comments")]   # the page's, not the wait's
        statuses = page.evaluate(FETCH, [base, ATTEMPTS])
        grade_id = page.evaluate("() => fetch(base_url + '/api/grades?submission_id=' + submission_id)"
                                 ".then(r => r.json()).then(gs => gs[0].id)")
        still = page.evaluate(FETCH, [base, [("GET", "/api/status"), ("PUT", f"/formgrader/api/grade/{grade_id}")]])
        page.close()
    print("attempts:", statuses, "\nstill allowed:", still, "\nthe grading page used:", sorted(set(page_used)))
    assert all(code in (403, 404) for code in statuses.values()), statuses
    assert [u for u in page_used if u[2] == 403] == [], "the guard refused what the grading page needs"
    assert any(m == "PUT" and "/formgrader/api/grade/" in p for m, p, _ in page_used), "no score was saved"
    assert still == {"GET /api/status": 200, f"PUT /formgrader/api/grade/{grade_id}": 200}, still


def test_nbgrader_export_pays_what_the_final_grades_say(regraded, tmp_path):
    "The gradebook holds the safe score: nbgrader's own export agrees with `final_grades`, flagged students included."
    from tinytorch.course.results.final_grades import final_grades
    out = subprocess.run([sys.executable, "-m", "nbgrader", "export", f"--CsvExportPlugin.to={tmp_path / 'export.csv'}"],
                         cwd=regraded, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    exported = {r["student_id"]: float(r["score"]) for r in csv.DictReader(open(tmp_path / "export.csv"))}
    _, rows = final_grades(regraded, 11)
    from tinytorch.course.basics.untrusted_text import printable          # a CSV holds a control character escaped
    refused = (ESCAPE_FOLDER, printable(ESCAPE_FOLDER), FORMULA_FOLDER)   # not student ids: not in the gradebook
    final = {r.student: r.total for r in rows if r.student not in refused}
    assert {r.student: r.status for r in rows}[FORMULA_FOLDER] == "failed", rows   # refused: not a student id
    assert {r.student: r.status for r in rows}["flagged"] in ("to confirm", "to grade"), rows
    graded = {r["student"]: r for r in csv.DictReader(open(regraded / f"grades_{ASSIGNMENT}.csv"))
              if r["status"] == "flagged" and float(r["points"]) > float(r["score"])}
    assert "flagged" in graded, "the flagged student should have a part nbgrader paid more than the re-check"
    assert exported == final, (exported, final)


# Names and pages' shape: what a student chose can't become markup, a formula or a cursor movement, and nothing a
# submission draws covers the scores.
COVERED = """([selector, own]) => [...document.querySelectorAll(selector)].map(box => {
    box.scrollIntoView({block: 'center', inline: 'center'});
    const r = box.getBoundingClientRect();
    const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    return (hit === box || box.contains(hit) || (own && hit && hit.closest(own))) ? null
        : `${selector} #${box.id}: covered by <${hit && hit.tagName.toLowerCase()} class="${hit && hit.className}">`;
}).filter(x => x)"""


def _covering(where, page) -> dict:
    """{'scores': how many score boxes or score table cells, 'covered': those covered at their centre, 'fixed': student
    content positioned over the page}: the score boxes (formgrader) or the score table (feedback pages), and the
    formgrader's navigation."""
    if where == "formgrader":
        boxes = ["input.score", "input.extra-credit", "textarea.comment"]
        scores = page.locator("input.score").count()
        covered = [c for s in boxes for c in page.evaluate(COVERED, [s, None])]
        covered += page.evaluate(COVERED, ["body > nav.navbar", "body > nav.navbar"])
    else:
        table = '[id="cell-id=tinytorch-feedback"] table td'
        scores = page.locator(table).count()
        covered = page.evaluate(COVERED, [table, None])
    fixed = page.evaluate("""() => [...document.querySelectorAll('.text_cell_render *, .output_subarea *, .cell')]
        .filter(e => ['fixed', 'sticky'].includes(getComputedStyle(e).position)).map(e => e.outerHTML.slice(0, 80))""")
    return {"scores": scores, "covered": covered, "fixed": fixed}


@pytest.mark.parametrize("where", PLACES)
def test_nothing_a_submission_draws_covers_the_scores(where, seen, request):
    """The score boxes (formgrader) and the score table (feedback pages) are each the topmost element at their own
    centre, and so is the formgrader's navigation: no fixed picture, backdrop, banner or cell covers them."""
    s = seen(where, _formgrader(where, request))
    assert s["scores"] >= 2, f"{where}: no score boxes or score table on the page"
    assert s["covered"] == [], f"{where}: {s['covered']}"
    assert s["fixed"] == [], f"{where}: student content positioned over the page: {s['fixed']}"


def test_roster_names_are_text_in_the_formgrader(course, browser, formgrader):
    """A roster name holding `<style>`, `<meta http-equiv=refresh>` or an element shows as text in the submission view;
    a student id in the address of nbgrader's own student page is text too."""
    with _place("formgrader", course, browser, formgrader) as (page, _):
        injected = page.evaluate("""() => ({element: document.querySelectorAll('#roster-injected').length,
            refresh: document.querySelectorAll('meta[http-equiv="refresh" i]').length,
            style: [...document.querySelectorAll('style')].filter(s => s.textContent.includes('input.score{display')).length,
            hidden: [...document.querySelectorAll('input.score')].filter(i => getComputedStyle(i).display === 'none').length})""")
        shown = page.locator("a.name-shown").first.text_content()
        url = page.url
        base = formgrader.split("/formgrader")[0]
        page.goto(f"{base}/formgrader/manage_students/%3Cb%20id%3Dreflected%3Ex%3C%2Fb%3E", wait_until="load")
        reflected = page.locator("#reflected").count()
        page.close()
    assert injected == {"element": 0, "refresh": 0, "style": 0, "hidden": 0}, injected
    assert "<style>input.score{display:none}</style>Eve" in shown and '<b id="roster-injected">' in shown, shown
    assert "#hijacked" not in url, url
    assert reflected == 0, "a student id in the address became markup in nbgrader's student page"


def test_names_stay_text_in_every_csv_and_on_the_console(course, regraded, tmp_path):
    """A folder name and roster fields that a spreadsheet would run are quoted in the grades CSV, the final grades and
    the Canvas, Moodle and nbgrader exports (Canvas still matches every student by its ID); an escape sequence in a
    folder name reaches the console escaped."""
    from lms_importers import read_canvas_import
    console = (course.parent / "grade.out").read_text()
    assert "\x1b" not in console and "\\x1b[1A\\x1b[2K\\rmallory" in console, console[-2000:]
    files = {"grades": course / f"grades_{ASSIGNMENT}.csv", "final": course / f"final_grades_{ASSIGNMENT}.csv"}
    for kind in ("canvas", "moodle", "nbgrader"):
        files[kind] = tmp_path / f"{kind}.csv"
        code, stdout, stderr = _tinytorch("grades", "11", "--course", course, "--format", kind, "--roster",
                                          course.parent / "roster.csv", "--out", files[kind])
        assert code == 0, stdout + stderr
        assert "\x1b" not in stdout and "written with a quote in front" in stdout, stdout
    for kind, path in files.items():
        cells = [c for line in csv.reader(open(path, encoding="utf-8")) for c in line]
        running = [c for c in cells if c[:1] in ("=", "+", "@") or (c[:1] == "-" and not c[1:].replace(".", "").isdigit())]
        assert running == [], f"{kind}: cells a spreadsheet would run: {running}"
    assert f"'{FORMULA_FOLDER}" in open(files["grades"]).read() and f"'{FORMULA_FOLDER}" in open(files["final"]).read()
    users = [{"id": r["lms_user_id"], "sis_user_id": r["sis_user_id"], "login_id": r["id"]} for r in HOSTILE_ROSTER]
    matched = read_canvas_import(files["canvas"], users)
    rows = list(csv.reader(open(files["canvas"], encoding="utf-8")))[2:]          # after the Points Possible row
    assert len(rows) == 2 and matched["unmatched"] == [], (rows, matched)      # both matched, by Canvas' own ID


def _listed(page, base) -> dict:
    "student -> their submission in the formgrader's Manual Grading list (as its page asks the server for it)."
    return {s["student"]: s for s in page.request.get(
        f"{base}/formgrader/api/submitted_notebooks/{ASSIGNMENT}/{ASSIGNMENT}").json()}


def test_every_submission_that_needs_review_is_in_the_formgrader_with_why(regraded, browser, formgrader):
    """The held copy is listed in the formgrader with a score box for every part, ticked Flagged? with why in its
    first comment box; the flagged submission is ticked too; the final grades call the copy `held`."""
    base = formgrader.split("/formgrader")[0]
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(WAIT_S * 1000)
    page.goto(formgrader)
    listed = _listed(page, base)
    assert "copied" in listed, f"the held copy is not in the formgrader: {sorted(listed)}"
    assert (listed["copied"]["flagged"], listed["flagged"]["flagged"]) == (True, True), listed
    page.goto(f"{base}/formgrader/submissions/{listed['copied']['id']}/", wait_until="load")
    page.wait_for_function("() => window.MathJax && MathJax.loaded === true")
    boxes = page.locator("input.score").count()
    why = page.locator("textarea.comment").first.get_attribute("placeholder")
    page.close()
    rows = {r["student"]: r for r in csv.DictReader(open(regraded / f"final_grades_{ASSIGNMENT}.csv"))}
    parts = [c for c in rows["copied"] if c not in ("student", "autograded_total", "manual_total", "total",
                                                      "max_points", "status", "details", "timestamp", "seconds_late",
                                                      "raw_total", "late_penalty", "review")]
    assert boxes == len(parts), (boxes, parts)
    assert why.startswith("tinytorch grade flagged this submission: held at 0 until you clear it: "), why
    assert (rows["copied"]["status"], rows["copied"]["total"]) == ("held", "0"), rows["copied"]
    assert rows["copied"]["review"].startswith("held: held at 0 until you clear it"), rows["copied"]
    assert rows["flagged"]["review"].startswith("flagged: "), rows["flagged"]


# nbgrader's pages -> the controls on them that the guard refuses (405/403): none may be visible.
REFUSED_CONTROLS = {
    "manage_assignments": ["td.edit a", "td.edit span", "td.assign a", "td.preview a", "td.release a",
                           "td.collect a", "td.generate-feedback a", "td.release-feedback a",
                           "text=Add new assignment...", "th:has-text('Release Feedback')", "th:has-text('Collect')"],
    f"manage_submissions/{ASSIGNMENT}": ["td.autograde a", "td.generate-feedback a", "td.release-feedback a",
                                         "th:has-text('Autograde')"],
    "manage_students": ["td.edit a", "td.edit span", "text=Add new student...", "th:has-text('Edit Student')"]}


def test_the_formgrader_shows_no_control_its_guard_refuses(regraded, browser, formgrader):
    """nbgrader's Manage Assignments, Manage Submissions and Manage Students pages show none of the buttons the guard
    answers 403, and keep what grading uses; Manage Students says its scores come before the late penalty; the
    grading page's name is not a link to the live notebook (JupyterLab, refused)."""
    base = formgrader.split("/formgrader")[0]
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(WAIT_S * 1000)
    page.goto(formgrader)
    shown = {}
    for where, selectors in REFUSED_CONTROLS.items():
        page.goto(f"{base}/formgrader/{where}", wait_until="load")
        page.wait_for_function("() => !document.body.innerText.includes('Loading, please wait')")
        shown[where] = [s for s in selectors if any(e.is_visible() for e in page.locator(s).all())]
        if where == "manage_students":
            note = " ".join(page.locator(".tinytorch-score-note").all_inner_texts())
            kept = page.locator("td.score").count()
    page.goto(f"{base}/formgrader/submissions/{_listed(page, base)['hostile']['id']}/", wait_until="load")
    page.wait_for_function("() => window.MathJax && MathJax.loaded === true")
    live = page.evaluate("() => [...document.querySelectorAll('li.live-notebook a')]"
                         ".map(a => getComputedStyle(a).pointerEvents)")
    page.close()
    assert shown == dict.fromkeys(REFUSED_CONTROLS, []), shown
    assert kept >= 1 and "before any late penalty" in note and "final grades" in note, note
    assert live and set(live) == {"none"}, live
