"""The course on a JupyterHub. The students' package (`tinytorch release 11 --wheel DIR`): installed
into a new image with `pip install`, it runs the released notebook to its first exercise, and its
leak scan finds a solution line planted in it. Then a real hub on docs/recipes/jupyterhub/
(JupyterHub from PyPI, configurable-http-proxy from npm, started here as root with local Unix
accounts, users and the formgrader on their own origins): in headless Chromium a student logs in,
fetches the assignment, runs it to its first exercise, hands in a solution; the instructor grades
with tinytorch and opens the formgrader through the hub; the student fetches feedback and is refused
the formgrader."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import pytest
from requirements import DEV_EXTRA, require, unavailable

require("nbgrader")

from course_hub import ASSIGNMENT, COURSE_ID, PROXY, course_hub  # noqa: E402
from jupyterhub_image import RUN_TO_FIRST_ERROR, make_image  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "nbs" / "11_embeddings.ipynb"
CLI = Path(sys.executable).parent / "tinytorch"
SCREENSHOT = str(Path(tempfile.gettempdir()) / "hub_formgrader.png")
HOST_RULES = ["--host-resolver-rules=MAP *.localhost 127.0.0.1"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    "The students' wheel, written by the command an instructor runs."
    dist = tmp_path_factory.mktemp("dist")
    run = subprocess.run(
        [CLI, "release", "11", "--wheel", dist, "--nbs", ROOT / "nbs"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, f"{run.stdout[-2000:]}{run.stderr[-2000:]}"
    wheels = list(dist.glob("tinytorch-*.whl"))
    assert len(wheels) == 1 and f"students' wheel written: {wheels[0]}" in run.stdout, (
        wheels,
        run.stdout,
    )
    return wheels[0]


@pytest.fixture(scope="module")
def image(wheel) -> Path:
    """The Python of a hub image into which the wheel was pip-installed; in a folder of /tmp that
    the hub's users can read (pytest's own temporary folders are private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="tinytorch-image-"))
    os.chmod(folder, 0o755)
    try:
        yield make_image(folder, wheel)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_the_released_notebook_runs_on_the_wheel_to_its_first_exercise(image, release_11, tmp_path):
    nb = tmp_path / release_11.name
    shutil.copy(release_11, nb)
    run = subprocess.run(
        [image, "-c", RUN_TO_FIRST_ERROR, nb, tmp_path],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen["origin"].startswith(str(image.parent.parent)), seen[
        "origin"
    ]  # the wheel's package
    assert seen["error"] == "NotImplementedError", seen
    first = seen["first_solution"]
    assert first is not None and len(seen["error_cells"]) == 1 and seen["error_cells"][0] > first, (
        seen
    )
    before = [i for i in seen["code_cells"] if i <= first]
    assert set(before) <= set(seen["ran"]), seen  # the imports and everything up to the exercise


def test_the_wheel_holds_stubs_and_its_leak_scan_finds_a_planted_solution_line(wheel, tmp_path):
    from tinytorch.course.authoring.leaks import secret_lines
    from tinytorch.course.authoring.workspace import wheel_leaks

    solution = "np.add.at(summed, slot.reshape(-1), rows)"
    secrets = secret_lines(SOURCE)
    assert solution in secrets
    with zipfile.ZipFile(wheel) as z:
        stubs = z.read("tinytorch/core/embeddings.py").decode()
    assert "raise NotImplementedError" in stubs and solution not in stubs
    assert wheel_leaks(wheel, secrets) == []
    planted = tmp_path / wheel.name
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(planted, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename == "tinytorch/core/embeddings.py":
                data += f"\n\ndef _planted(summed, slot, rows):\n    {solution}\n".encode()
            dst.writestr(item, data)
    assert wheel_leaks(planted, secrets) == [
        (f"{wheel.name}!tinytorch/core/embeddings.py", solution)
    ]


# ---------------------------------------------------------------- the course on a running hub
# The calls JupyterLab's own pages make: its _xsrf cookie goes back as a header.
POST_FORM = """async ([path, form]) => {
    const xsrf = (document.cookie.match(/(?:^|; )_xsrf=([^;]*)/) || [])[1] || '';
    const r = await fetch(path, {method: 'POST', body: new URLSearchParams(form),
        headers: {'X-XSRFToken': decodeURIComponent(xsrf),
                  'Content-Type': 'application/x-www-form-urlencoded'}});
    return {status: r.status, text: await r.text()};
}"""
CONTENTS = """async ([url, method, body]) => {
    const xsrf = (document.cookie.match(/(?:^|; )_xsrf=([^;]*)/) || [])[1] || '';
    const r = await fetch(url, {method, body: body === null ? undefined : JSON.stringify(body),
        headers: {'X-XSRFToken': decodeURIComponent(xsrf), 'Content-Type': 'application/json'}});
    const text = await r.text();
    let json = null;
    try { json = JSON.parse(text); } catch (e) { json = null; }
    return {status: r.status, json};
}"""


def _post(page, path: str, **form) -> dict:
    "POST `form` to `path` from the page, as JupyterLab's own calls do."
    return page.evaluate(POST_FORM, [path, form])


def _contents(page, base: str, path: str, method="GET", body=None) -> dict:
    "Jupyter's contents API on `path` from the page: {status, json}."
    return page.evaluate(CONTENTS, [f"{base}/api/contents/{path}", method, body])


def _log_in(page, hub, name: str):
    page.goto(f"{hub.url}/hub/login")
    page.fill("#username_input", name)
    page.fill("#password_input", hub.password)
    page.click("#login_submit")


def _ok(run):
    assert run.returncode == 0, f"{run.args}\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    return run


@pytest.fixture(scope="module")
def term(image, release_11):
    "One term on a running hub, each person in their own browser context: what each did and saw."
    require("user accounts")
    require("chromium")
    require("playwright")
    if importlib.util.find_spec("jupyterhub") is None:
        unavailable(f"jupyterhub is not installed (the hub extra: {DEV_EXTRA})")
    if shutil.which(PROXY) is None:
        unavailable("configurable-http-proxy is not installed "
                    "(npm install -g configurable-http-proxy; .ci/run does)")
    from browser import chromium

    seen = {}
    with course_hub(image) as hub, chromium("the hub test", extra_args=HOST_RULES) as browser:
        try:
            _instructor_releases(hub, release_11)
            student = browser.new_context()
            _student_hands_in(hub, student.new_page(), release_11, seen)
            _instructor_grades(hub, browser.new_context().new_page(), seen)
            _student_fetches_feedback_and_is_refused(hub, student.new_page(), seen)
        except BaseException:
            for context in browser.contexts:  # where each person's browser stood, and the hub's log
                for page in context.pages:
                    print(f"--- {page.url}\n{page.content()[:3000]}")
            for step, value in seen.items():
                if isinstance(value, subprocess.CompletedProcess):
                    print(
                        f"--- {step}: exit {value.returncode}\n{value.stdout[-3000:]}\n"
                        f"{value.stderr[-3000:]}"
                    )
            print(f"--- the hub's log\n{hub.log.read_text(errors='replace')[-6000:]}")
            raise
    return seen


def _instructor_releases(hub, release_11):
    """The instructor puts the leak-checked release into their course and releases it to the
    exchange."""
    i = hub.instructor
    target = hub.course / "release" / ASSIGNMENT
    _ok(hub.as_user(i, "mkdir", "-p", target))
    _ok(
        hub.as_user(
            i,
            "tee",
            hub.course / "nbgrader_config.py",  # the exchange's root: the hub's own config
            input=f"c = get_config()\nc.CourseDirectory.course_id = {COURSE_ID!r}\n",
        )
    )
    _ok(hub.as_user(i, "tee", target / f"{ASSIGNMENT}.ipynb", input=release_11.read_text()))
    _ok(
        hub.as_user(
            i,
            sys.executable,
            "-m",
            "nbgrader",
            "release_assignment",
            ASSIGNMENT,
            "--force",
            cwd=hub.course,
        )
    )


def _student_hands_in(hub, page, release_11, seen):
    s, base = hub.student, hub.user_url(hub.student)
    _log_in(page, hub, s)
    page.wait_for_url(f"{base}/lab**", timeout=240_000)
    seen["student_server"] = page.url
    seen["fetch"] = _post(
        page, f"{base}/assignments/fetch", course_id=COURSE_ID, assignment_id=ASSIGNMENT
    )
    nb_path = f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
    page.goto(f"{base}/lab/tree/{nb_path}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
    page.wait_for_selector("text=Python 3 (ipykernel) | Idle", timeout=120_000)
    page.click(".lm-MenuBar-itemLabel:text-is('Run')", timeout=30_000)
    page.click(".lm-Menu-itemLabel:text-is('Run All Cells')", timeout=30_000)
    page.wait_for_selector(
        ".jp-OutputArea-output:has-text('NotImplementedError')", state="attached", timeout=300_000
    )
    page.wait_for_selector("text=Python 3 (ipykernel) | Idle", timeout=120_000)
    page.click(".lm-MenuBar-itemLabel:text-is('File')", timeout=30_000)
    page.click(".lm-Menu-itemLabel:text-is('Save Notebook')", timeout=30_000)
    page.wait_for_timeout(3000)
    seen["ran"] = _contents(page, base, nb_path)["json"]
    # the student's solution, written over the fetched notebook and handed in
    from course_scenarios import demo_cells, solve, without_demos

    released = json.loads(release_11.read_text())
    solved = without_demos(
        solve(released, json.loads(SOURCE.read_text()), own_words=True), demo_cells(released)
    )
    page.goto(f"{base}/lab")
    seen["saved"] = _contents(
        page, base, nb_path, "PUT", {"type": "notebook", "format": "json", "content": solved}
    )
    seen["submit"] = _post(
        page, f"{base}/assignments/submit", course_id=COURSE_ID, assignment_id=ASSIGNMENT
    )


def _instructor_grades(hub, page, seen):
    i = hub.instructor
    seen["collect"] = hub.as_user(
        i, Path(sys.executable).parent / "tinytorch", "collect", ASSIGNMENT, cwd=hub.course
    )
    seen["grade"] = hub.as_user(
        i,
        Path(sys.executable).parent / "tinytorch",
        "grade",
        "11",
        "submitted",
        "--course",
        hub.graded,
        "--nbs",
        ROOT / "nbs",
        cwd=hub.course,
    )
    _ok(seen["collect"])
    _ok(seen["grade"])
    _log_in(page, hub, i)
    page.wait_for_url("**/lab**", timeout=240_000)
    deadline = time.monotonic() + 180
    while True:  # the service starts its server once the course is graded
        response = page.goto(hub.formgrader)
        if (
            response.status == 200
            and page.locator("text=Manual Grading").count()
            or time.monotonic() > deadline
        ):
            break
        page.wait_for_timeout(2000)
    seen["formgrader_status"], seen["formgrader_url"] = response.status, page.url
    seen["formgrader_text"] = page.content()
    page.goto(
        f"{hub.formgrader}/gradebook/{ASSIGNMENT}/{ASSIGNMENT}"
    )  # Manual Grading: the submission
    page.wait_for_selector("a[href*='/formgrader/submissions/']", state="attached", timeout=60_000)
    seen["manual_grading_text"] = page.content()
    page.screenshot(path=SCREENSHOT, full_page=True)
    seen["grades"] = hub.as_user(
        i,
        Path(sys.executable).parent / "tinytorch",
        "grades",
        "11",
        "--course",
        hub.graded,
        cwd=hub.course,
    )
    seen["release_feedback"] = hub.as_user(
        i,
        sys.executable,
        "-m",
        "nbgrader",
        "release_feedback",
        ASSIGNMENT,
        "--course",
        COURSE_ID,
        cwd=hub.graded,
    )  # the graded folder's is not


def _student_fetches_feedback_and_is_refused(hub, page, seen):
    base = hub.user_url(hub.student)
    page.goto(f"{base}/lab")
    page.wait_for_selector(".jp-LabShell", timeout=120_000)
    seen["fetch_feedback"] = _post(
        page, f"{base}/assignments/fetch_feedback", course_id=COURSE_ID, assignment_id=ASSIGNMENT
    )
    listing = _contents(page, base, f"{ASSIGNMENT}/feedback")
    seen["feedback_listing"] = listing
    if (
        listing["status"] == 200 and listing["json"]["content"]
    ):  # feedback/<time>/11_embeddings.html
        seen["feedback_pages"] = _contents(page, base, listing["json"]["content"][0]["path"])
    response = page.goto(hub.formgrader)
    seen["student_formgrader_status"], seen["student_formgrader_text"] = (
        response.status,
        page.content(),
    )


def test_the_student_runs_the_fetched_notebook_to_its_first_exercise_on_the_hub(term):
    assert json.loads(term["fetch"]["text"]).get("success"), term["fetch"]
    nb = term["ran"]["content"]
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    errors = [
        i for i, c in enumerate(code) if any(o["output_type"] == "error" for o in c["outputs"])
    ]
    assert len(errors) == 1 and code[errors[0]]["outputs"][-1]["ename"] == "NotImplementedError", (
        errors
    )
    first = next(i for i, c in enumerate(code) if c["metadata"].get("nbgrader", {}).get("solution"))
    assert errors[0] > first and all(c["execution_count"] for c in code[:first]), (errors, first)


def test_the_student_submits(term):
    assert term["saved"]["status"] == 200, term["saved"]
    assert json.loads(term["submit"]["text"]).get("success"), term["submit"]


def test_the_instructor_collects_grades_and_opens_the_formgrader_through_the_hub(term):
    _ok(term["collect"])
    assert term["grade"].returncode == 0, (
        f"{term['grade'].stdout[-3000:]}{term['grade'].stderr[-3000:]}"
    )
    assert term["formgrader_status"] == 200 and "Manual Grading" in term["formgrader_text"], term[
        "formgrader_url"
    ]
    assert term["formgrader_url"].startswith("http://formgrader--service.hub.localhost:"), term[
        "formgrader_url"
    ]
    assert (
        "/formgrader/submissions/" in term["manual_grading_text"]
    )  # the student's submission, listed
    _ok(term["grades"])
    _ok(term["release_feedback"])


def test_the_student_fetches_feedback_and_is_refused_the_formgrader(term):
    assert json.loads(term["fetch_feedback"]["text"]).get("success"), term["fetch_feedback"]
    listing = term["feedback_listing"]
    assert listing["status"] == 200, (listing, term["release_feedback"].stderr[-2000:])
    pages = [item["name"] for item in term["feedback_pages"]["json"]["content"]]
    assert pages == [f"{ASSIGNMENT}.html"], term["feedback_pages"]
    assert term["student_formgrader_status"] == 403, term["student_formgrader_status"]
    assert "Manual Grading" not in term["student_formgrader_text"]
