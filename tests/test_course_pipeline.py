"""The course pipeline end to end, with real nbgrader: release, student self-test, and grading of a
class of generated submissions that covers the failure modes of stock nbgrader (README: instructor guide)."""
import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from requirements import require

require("nbgrader")

from course_scenarios import (  # noqa: E402
    WHOLE_LESSON, demo_cells, solve, vandal_report, without_demos, write_submissions,
)
from tinytorch.course.authoring.assignments import (  # noqa: E402
    check_metadata, find_leaks, graded_parts, notebook_text, secret_lines,
)
from tinytorch.course.checking.selftest import run_notebook_tests  # noqa: E402
from tinytorch.course.grading.grading import grade  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"
SOURCE = NBS / "11_embeddings.ipynb"
# Limits that hold on a busy machine, well over what the lesson and a submission's run took when
# measured (benchmarks/HISTORY.md; the wall-clock limit is per run). The scenarios that must hit a
# limit loop forever, so they hit it however fast the machine is; the SIGINT-proof loop holds a
# job slot until the wall-clock limit, so that limit sets the class's least time.
CELL_TIMEOUT, WALL_SECONDS = 30, 60
TESTS = {gid: pts for gid, kind, pts in graded_parts(SOURCE) if kind == "test"}
FULL = sum(TESTS.values())


@pytest.fixture(scope="module")
def released(release_11):
    return json.loads(release_11.read_text()), release_11


@pytest.fixture(scope="module")
def source():
    return json.loads(SOURCE.read_text())


def _kernels(marker: str) -> set:
    "pids of running IPython kernels whose environment mentions `marker` (other users' kernels don't)."
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    ours = set()
    for pid in (line.split()[0] for line in out.splitlines() if "ipykernel" in line):
        try:
            if marker.encode() in Path(f"/proc/{pid}/environ").read_bytes():
                ours.add(pid)
        except OSError:          # gone, or not ours to read
            pass
    return ours


# one submission per kind of row: full marks, one part lost, flagged with the re-check's zero (the runs that hit a time
# limit are graded at jobs=3 in `graded`; a limit's timing doesn't depend on the number of jobs)
ONE_JOB = ["reference", "broken-sinusoid", "syntax-error"]


@pytest.fixture(scope="module")
def one_job(tmp_path_factory, released, source):
    """ONE_JOB graded by `tinytorch grade --jobs 1`, in its own process, started before the class (`graded` asks for
    it first): it works while the class's SIGINT-proof loop only waits out its wall-clock limit. (the grading process,
    its folder)"""
    base = tmp_path_factory.mktemp("one-job")
    # without the lesson's demonstration cells (the class has the whole lesson): they earn no points, so the grades
    # are the class's all the same
    write_submissions(base / "submissions", released[0], source, ONE_JOB, whole_lesson=())
    cli = Path(sys.executable).parent / "tinytorch"       # the console script from pyproject.toml
    with open(base / "output.txt", "w") as output:      # a file, not a pipe: nothing blocks it while nobody reads
        proc = subprocess.Popen([cli, "grade", "11", "submissions", "--course", "course", "--nbs", NBS, "--jobs", "1",
                                 "--cell-timeout", str(CELL_TIMEOUT), "--wall-seconds", str(WALL_SECONDS)], cwd=base,
                                stdout=output, stderr=subprocess.STDOUT)
    yield proc, base
    if proc.poll() is None:                       # its test did not run: don't leave it grading
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def graded(tmp_path_factory, released, source, one_job):
    base = tmp_path_factory.mktemp("class")
    subs_dir, course, nbs, work = base / "submissions", base / "course", base / "nbs", base / "work"
    nbs.mkdir()
    shutil.copy(SOURCE, nbs)                      # the vandal attacks this copy of the source notebooks
    import tinytorch
    write_submissions(subs_dir, released[0], source, whole_lesson=WHOLE_LESSON, paths={
        "course": str(course), "submissions": str(subs_dir), "nbs": str(nbs), "work": str(work),
        "package": str(Path(tinytorch.__file__).parent / "core" / "embeddings.py")})
    untouched = {"subs": _digest(subs_dir), "nbs": _digest(nbs)}
    work.mkdir()                                  # the grading work folders, named in each kernel's environment
    import tempfile
    default, tempfile.tempdir = tempfile.tempdir, str(work)
    try:
        # three jobs: the SIGINT-proof loop holds one until its wall-clock kill, the other two grade the rest
        results, csv_path = grade(11, subs_dir, nbs, course, jobs=3, cell_timeout=CELL_TIMEOUT,
                                  wall_seconds=WALL_SECONDS, log=lambda *a: None)
    finally:
        tempfile.tempdir = default
    leftover = _kernels(str(work))
    rows = list(csv.DictReader(open(csv_path)))
    return {"results": {r.student: r for r in results}, "rows": rows, "course": course, "leftover": leftover,
            "subs_dir": subs_dir, "nbs": nbs, "untouched": untouched}


def _digest(folder):
    import hashlib
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def points(graded, student):
    return {r["part"]: float(r["points"]) for r in graded["rows"] if r["student"] == student and r["kind"] == "test"}


def statuses(graded, student):
    return {r["status"] for r in graded["rows"] if r["student"] == student and r["kind"] == "test"}


def all_but(lost):
    return {gid: (0.0 if gid in lost else pts) for gid, pts in TESTS.items()}


def _column(graded, student, column):
    "part -> the value of `column` in the code parts' rows of `student`."
    return {r["part"]: r[column] for r in graded["rows"] if r["student"] == student and r["kind"] == "test"}


# The points to import (the CSV's score column) per scenario, summed over the code parts; None: every score
# empty (the submission failed). Flagged parts count at the lower of nbgrader's and the re-check's points.
NO_SINUSOID, NO_SCATTER = FULL - TESTS["test_sinusoidal_table"], FULL - TESTS["test_scatter_add_rows"]
SCORES = {
    "reference": FULL, "untouched": 0, "broken-sinusoid": NO_SINUSOID, "broken-backward": NO_SCATTER,
    "test-edited-to-pass": NO_SINUSOID, "infinite-loop": NO_SINUSOID, "syntax-error": 0, "metadata-stripped": FULL,
    "duplicated-cell": FULL, "skip-tag": NO_SINUSOID, "snoop": FULL, "input-transformer": 0,
    "a-sigint-proof-loop": None, "fake-marker": NO_SINUSOID, "forged-results": NO_SINUSOID, "stray-import": 0,
}


# ------------------------------------------------------------------ metadata and release

def test_committed_metadata_matches_markers():
    for nb in sorted(NBS.glob("[0-9][0-9]_*.ipynb")):
        assert check_metadata(nb) == [], f"{nb.name}: run `tinytorch metadata`"


def test_release_has_no_solutions_or_hidden_tests(released):
    nb, path = released
    secrets = secret_lines(SOURCE)
    assert len(secrets) > 50
    assert find_leaks(secrets, notebook_text(path)) == []
    text = notebook_text(path)
    assert "BEGIN HIDDEN TESTS" not in text and "### BEGIN SOLUTION" not in text
    regions = sum("".join(c["source"]).count("### BEGIN SOLUTION") for c in json.loads(SOURCE.read_text())["cells"]
                  if (c["metadata"].get("nbgrader") or {}).get("solution") and c["cell_type"] == "code")
    assert text.count("raise NotImplementedError()") == regions == 12


def test_a_short_submission_leaves_out_only_the_demonstrations(released):
    "The machinery's tests grade notebooks without the demo cells: every graded, locked and exported cell stays."
    nb, _ = released
    dropped = demo_cells(nb)
    kept = {c["id"] for c in without_demos(nb, dropped)["cells"]}
    assert {"profile-run", "learn-run", "extrapolate-train", "pe-picture", "vocab-tradeoff"} <= dropped
    for cell in nb["cells"]:
        if cell["metadata"].get("nbgrader") or cell["cell_type"] == "markdown" or "#| export" in "".join(cell["source"]):
            assert cell["id"] in kept, cell["id"]
    assert kept | dropped == {c["id"] for c in nb["cells"]} and not kept & dropped


def test_release_fails_every_visible_test_and_reference_passes(released, source, tmp_path):
    report = run_notebook_tests(released[1], timeout=60)
    assert report["parts"] and report["points"] == 0
    assert all("NotImplementedError" in p["error"] for p in report["parts"]), report["parts"]
    solved = tmp_path / "11_embeddings.ipynb"       # without the demonstration cells: they earn no points
    solved.write_text(json.dumps(without_demos(solve(released[0], source), demo_cells(released[0]))))
    report = run_notebook_tests(solved, timeout=60)
    assert report["points"] == FULL, report


def test_cli_test_command_reports_parts(released):
    cli = Path(sys.executable).parent / "tinytorch"       # the console script from pyproject.toml
    out = subprocess.run([cli, "test", "11", "--notebook", str(released[1])], capture_output=True, text=True)
    assert out.returncode == 1
    assert "FAIL  test_as_token_ids" in out.stdout and f"Total: 0/{FULL:g}" in out.stdout, out.stdout
    assert out.stdout.startswith("Testing "), f"the report should come first, got: {out.stdout[:300]!r}"
    assert "WARNING" not in out.stderr and "without encryption" not in out.stderr, out.stderr


# ------------------------------------------------------------------ grading scenarios (issue table)

def test_reference_gets_full_marks_and_agrees(graded):
    assert points(graded, "reference") == TESTS
    assert statuses(graded, "reference") == {"graded"}
    rows = [r for r in graded["rows"] if r["student"] == "reference" and r["kind"] == "test"]
    assert all(r["recheck_points"] == r["points"] for r in rows)
    answers = [r for r in graded["rows"] if r["student"] == "reference" and r["kind"] == "answer"]
    assert len(answers) == 3 and {r["status"] for r in answers} == {"needs manual grading"}


def test_reference_test_cells_print_nothing_to_stderr(graded):
    nb = json.loads(graded["results"]["reference"].autograded.read_text())
    for cell in nb["cells"]:
        if (cell["metadata"].get("nbgrader") or {}).get("grade") and cell["cell_type"] == "code":
            assert not [o for o in cell["outputs"] if o.get("name") == "stderr"], cell["metadata"]["nbgrader"]["grade_id"]


def test_untouched_release_scores_zero(graded):
    assert points(graded, "untouched") == all_but(TESTS)


def test_one_broken_function_loses_exactly_its_part(graded):
    assert points(graded, "broken-sinusoid") == all_but({"test_sinusoidal_table"})
    broken = points(graded, "broken-backward")
    # the student's scatter-add is graded on its own; the layer's backward uses the library's kernels
    assert broken == all_but({"test_scatter_add_rows"}), broken
    assert broken["test_as_token_ids"] == TESTS["test_as_token_ids"]
    assert broken["test_sinusoidal_table"] == TESTS["test_sinusoidal_table"]


def test_locked_test_edited_to_pass_is_graded_by_the_original(graded):
    assert points(graded, "test-edited-to-pass") == all_but({"test_sinusoidal_table"})


def test_infinite_loop_times_out_one_part(graded):
    assert points(graded, "infinite-loop") == all_but({"test_sinusoidal_table"})
    assert graded["results"]["infinite-loop"].failure is None


def test_syntax_error_zeroes_dependent_parts_with_a_clear_message(graded):
    got = points(graded, "syntax-error")
    assert got["test_init_embedding_table"] == 0 and got["test_token_position_embedding"] == 0
    assert got["test_as_token_ids"] == TESTS["test_as_token_ids"]
    assert got["test_sinusoidal_table"] == TESTS["test_sinusoidal_table"]
    feedback = graded["results"]["syntax-error"].feedback.read_text()
    assert "SyntaxError" in feedback
    assert any("does not import" in f and "SyntaxError" in f for f in graded["results"]["syntax-error"].flags)


def test_a_stray_import_is_flagged_with_its_cause_in_the_graders_words(graded):
    "`import torch` in export cell 'rope': nbgrader loses that cell's part; the export doesn't import outside the kernel."
    r = graded["results"]["stray-import"]
    assert points(graded, "stray-import") == all_but({"test_rotate_pairs"})
    assert statuses(graded, "stray-import") == {"flagged"}
    assert r.flags[0] == ("the student's exported code does not import outside the notebook (ModuleNotFoundError: "
                          "No module named 'torch', in export cell 'rope'); the re-check scores it 0"), r.flags
    assert "--clear stray-import" in r.flags[1], r.flags


def test_clear_settles_an_export_that_does_not_import_in_one_action(graded, tmp_path):
    "`--clear STUDENT` once: every code part counts nbgrader's points, graded, nothing left to confirm part by part."
    subs = tmp_path / "submissions"
    (subs / "stray-import").mkdir(parents=True)
    shutil.copy(graded["subs_dir"] / "stray-import" / "11_embeddings.ipynb", subs / "stray-import")
    said = []
    results, csv_path = grade(11, subs, NBS, tmp_path / "course", cell_timeout=CELL_TIMEOUT, wall_seconds=WALL_SECONDS,
                              log=said.append, clear=("stray-import",))
    rows = [r for r in csv.DictReader(open(csv_path)) if r["kind"] == "test"]
    assert {r["status"] for r in rows} == {"graded"} and not results[0].flags, (rows, results[0].flags)
    assert {r["part"]: float(r["score"]) for r in rows} == all_but({"test_rotate_pairs"})
    assert {r["recheck_points"] for r in rows} == {""}
    log = (tmp_path / "course" / "grades_11_embeddings.log").read_text()
    assert "cleared by you: the student's exported code does not import outside the notebook" in log, log


def test_a_correct_notebooks_feedback_has_no_traceback_and_no_grading_path(graded):
    """The whole lesson handed in, correct: the cells nbgrader runs import the student's own module
    (`tinytorch.core.embeddings`); no error of the grading machinery and no folder of the grading machine is on the page."""
    import html
    import re
    import tinytorch
    page = html.unescape(graded["results"]["reference"].feedback.read_text())
    shown = re.sub(r"<style.*?</style>", "", page, flags=re.S)         # the template's CSS names a `Traceback` class
    for word in ("Traceback", "ImportError", "NameError", "site-packages", "/tmp/", "tinytorch-grading", str(ROOT),
                 str(graded["course"]), str(graded["subs_dir"]), str(Path(tinytorch.__file__).parent), sys.prefix):
        assert word not in shown, (word, shown[max(0, shown.find(word) - 300):shown.find(word) + 200])
    nb = json.loads(graded["results"]["reference"].autograded.read_text())
    errors = [(c["id"], o["ename"]) for c in nb["cells"] for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert errors == [], errors


def test_nbgraders_run_leaves_out_the_demonstrations_and_the_page_says_so(graded):
    """The whole lesson handed in: nbgrader's run leaves out the lesson's demonstrations (no graded cell needs them; the
    judge's verdicts decide the points), runs every graded, locked and exported cell, and the page says so."""
    import html
    r = graded["results"]["reference"]
    nb = json.loads(r.autograded.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    left_out = {c["id"] for c in code if c["execution_count"] is None}
    assert {"learn-run", "order-run", "profile-run", "pe-picture", "vocab-tradeoff"} <= left_out, left_out
    assert left_out == {nb["cells"][i]["id"] for i in r.not_run}
    assert not [c["id"] for c in code if c["id"] in left_out and c["outputs"]]
    kept = [c["id"] for c in code if c["metadata"].get("nbgrader") or "#| export" in "".join(c["source"])]
    assert kept and not set(kept) & left_out, set(kept) & left_out
    page = html.unescape(r.feedback.read_text())
    assert f"Not run in grading: {len(left_out)} code cells" in page, page[:3000]


def test_stripped_metadata_is_flagged_and_still_graded(graded):
    assert statuses(graded, "metadata-stripped") == {"flagged"}
    assert "stripped" in " ".join(graded["results"]["metadata-stripped"].flags)
    assert points(graded, "metadata-stripped") == TESTS


def test_duplicated_cell_is_flagged_and_graded(graded):
    r = graded["results"]["duplicated-cell"]
    assert r.failure is None and any("more than once" in f for f in r.flags), r.flags
    assert points(graded, "duplicated-cell") == TESTS


def test_skip_tag_cannot_skip_a_test(graded):
    r = graded["results"]["skip-tag"]
    assert points(graded, "skip-tag")["test_sinusoidal_table"] == 0
    assert any("skip" in f for f in r.flags), r.flags


def test_input_transformer_is_caught_by_the_second_channel(graded):
    r = graded["results"]["input-transformer"]
    # nbgrader is fooled (every later cell became `pass`); the out-of-kernel re-run is not
    assert points(graded, "input-transformer") == TESTS
    assert any("disagrees" in f or "does not import" in f for f in r.flags), r.flags
    rows = {x["part"]: x for x in graded["rows"] if x["student"] == "input-transformer" and x["kind"] == "test"}
    assert rows["test_sinusoidal_table"]["recheck_points"] == "0"
    assert {x["status"] for x in rows.values()} == {"flagged"}


def test_fake_result_markers_change_nothing(graded):
    # the student's code prints "every test passed" (the old stdout marker and the re-check's JSON) on import,
    # from inside a test and at exit, and at exit overwrites the re-check's results file: graded as without it
    for column in ("points", "recheck_points", "status", "score"):
        assert _column(graded, "fake-marker", column) == _column(graded, "broken-sinusoid", column), column
    assert statuses(graded, "fake-marker") == {"graded"}
    assert points(graded, "fake-marker") == all_but({"test_sinusoidal_table"})
    assert not graded["results"]["fake-marker"].flags


def test_a_forged_results_file_changes_nothing(graded):
    # it would write a results file named on its command line and end the process: the judge reads no file a
    # student's process writes, so it is graded as its code is
    for column in ("points", "recheck_points", "status", "score"):
        assert _column(graded, "forged-results", column) == _column(graded, "broken-sinusoid", column), column


def test_sigint_proof_loop_is_killed_and_batch_goes_on(graded):
    r = graded["results"]["a-sigint-proof-loop"]
    assert r.failure and "wall-clock" in r.failure, r.failure
    assert statuses(graded, "a-sigint-proof-loop") == {"failed"}
    assert graded["leftover"] == set(), f"kernels left running: {graded['leftover']}"


def test_vandal_cannot_change_other_grades(graded):
    # every other student's grade is exactly what it is without the vandal in the class
    assert points(graded, "reference") == TESTS and points(graded, "untouched") == all_but(TESTS)
    assert points(graded, "broken-sinusoid") == all_but({"test_sinusoidal_table"})
    assert graded["course"].joinpath("gradebook.db").read_bytes()[:15] == b"SQLite format 3"
    assert all((graded["subs_dir"] / s).exists() for s in graded["results"]), "submissions were deleted"
    assert _digest(graded["subs_dir"]) == graded["untouched"]["subs"], "submissions were changed"
    assert _digest(graded["nbs"]) == graded["untouched"]["nbs"], "the source notebooks were changed"
    frozen = graded["course"] / "source" / "11_embeddings" / "11_embeddings.ipynb"
    assert frozen.read_bytes() == (graded["nbs"] / "11_embeddings.ipynb").read_bytes()
    # the vandal overwrote the only gradebook it could reach, its own copy: its grading fails, loudly
    vandal = graded["results"]["vandal"]
    assert vandal.failure or vandal.flags
    assert statuses(graded, "vandal") <= {"failed", "flagged"}


def test_snoop_reads_no_course_file_reaches_no_network_and_is_graded(graded):
    assert points(graded, "snoop") == TESTS and statuses(graded, "snoop") == {"graded"}
    nb = json.loads(graded["results"]["snoop"].autograded.read_text())
    report = vandal_report(nb)
    assert report and [i for i in report if i.startswith("network: ")], report
    assert "network: reached pypi.org" not in report
    assert [i for i in report if i.startswith("read ")] == [i for i in report if i.endswith("embeddings.py")], report
    printed = "\n".join("".join(o.get("text", "")) for cell in nb["cells"] for o in cell.get("outputs", []))
    # the module it read is its own export (mounted over the stub for the lesson's demonstrations): no hidden test,
    # and no line of the solution that it didn't write itself
    own = notebook_text(graded["subs_dir"] / "snoop" / "11_embeddings.ipynb")
    assert "# exported from a student submission by tinytorch grade" in printed
    assert find_leaks({s for s in secret_lines(SOURCE) if s not in own}, printed) == []


def test_score_column_is_what_to_import_for_every_scenario(graded):
    assert set(SCORES) | {"vandal"} == set(graded["results"]), "a scenario without an expected score"
    for student, expected in SCORES.items():
        scores = _column(graded, student, "score")
        if expected is None:
            assert set(scores.values()) == {""}, (student, scores)
        else:
            assert sum(float(v) for v in scores.values()) == expected, (student, scores)
    for row in graded["rows"]:                  # the rule, row by row, the vandal included
        status, score = row["status"], row["score"]
        if status == "graded":
            assert score == row["points"], row
        elif status == "flagged":
            assert float(score) == min(float(row["points"]), float(row["recheck_points"] or 0)), row
        else:
            assert status in ("needs manual grading", "failed") and score == "", row


def test_reasons_are_one_short_sentence_and_the_log_has_every_flag(graded):
    for row in graded["rows"]:
        assert len(row["reason"]) <= 160 and "\n" not in row["reason"], row
    log = (graded["course"] / "grades_11_embeddings.log").read_text()
    for r in graded["results"].values():
        for text in ([r.failure] if r.failure else r.flags):
            assert text in log, (r.student, text)


def test_master_gradebook_has_every_student(graded):
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{graded['course'] / 'gradebook.db'}", "tinytorch") as gb:
        assert {s.id for s in gb.students} == set(graded["results"])
        sub = gb.find_submission("11_embeddings", "reference")
        assert sub.score == FULL and sub.needs_manual_grade


def test_feedback_never_shows_hidden_tests(graded):
    import html
    hidden = secret_lines(SOURCE, solutions=False)
    for r in graded["results"].values():
        if r.feedback:
            assert find_leaks(hidden, html.unescape(r.feedback.read_text())) == [], r.student
    assert graded["results"]["reference"].feedback is not None


def test_one_job_gives_the_same_grades_as_three(graded, one_job):
    proc, base = one_job
    assert proc.wait() in (0, 3), (base / "output.txt").read_text()[-3000:]
    again = [(r["student"], r["part"], r["points"], r["status"], r["score"])
             for r in csv.DictReader(open(base / "course" / "grades_11_embeddings.csv"))]
    first = [(r["student"], r["part"], r["points"], r["status"], r["score"]) for r in graded["rows"]
             if r["student"] in ONE_JOB]
    assert sorted(again) == sorted(first)
