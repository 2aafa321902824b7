"""One submission fails alone: a class holding one honest submission and notebooks (and folders) built to break the
grader itself. `tinytorch grade` finishes, grades the honest student as usual, names each submission it can't read
`failed` with a one-line reason, grades a strange but readable one as usual (a timestamp it can't use is flagged),
writes no raw control character into any CSV, and keeps the course folder small."""
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = "11_embeddings.ipynb"
PRINTED = 200 << 20                 # what one cell prints: far more than a feedback page or a course should keep
SOME = 8 << 20                      # ... and a little less: graded, its output cut


def _with_cell(nb, cell):
    return dict(nb, cells=list(nb["cells"]) + [cell])


def _code(source, outputs=()):
    return {"cell_type": "code", "id": "hostile-cell", "metadata": {}, "execution_count": None,
            "outputs": list(outputs), "source": source}


def _markdown(source):
    return {"cell_type": "markdown", "id": "hostile-cell", "metadata": {}, "source": source}


def hostile_notebooks(good: dict) -> dict:
    """student -> the bytes of a notebook built to break the grader (each one the honest notebook, changed once)."""
    deep = json.dumps(_with_cell(good, _markdown("x")), indent=1)
    nested = 100_000
    deep = deep.replace('"source": "x"', '"source": "x", "nest": ' + "[" * nested + "]" * nested, 1)
    surrogate = _with_cell(good, _code("print(1)", [{"output_type": "stream", "name": "stdout", "text": "\ud800"}]))
    return {
        "number-source": json.dumps(_with_cell(good, _markdown(42))).encode(),
        "deep-nesting": deep.encode(),
        "minor-text": json.dumps(dict(good, nbformat_minor="five")).encode(),
        "lone-surrogate": json.dumps(surrogate, ensure_ascii=True).encode(),
        "many-hashes": json.dumps(_with_cell(good, _markdown("#" * 400_000))).encode(),
        "many-brackets": json.dumps(_with_cell(good, _markdown("[" * 400_000))).encode(),
        "prints-some": json.dumps(_with_cell(good, _code(f"print('y' * {SOME})"))).encode(),
        "prints-a-lot": json.dumps(_with_cell(good, _code(f"print('x' * {PRINTED})"))).encode(),
    }


# Student folders whose names are the attack: bytes that aren't UTF-8, and control characters.
ODD_FOLDERS = [b"\xff\xfe", b"ctl\x1b[31m\x07\r"]


def _build(release_11: Path, base: Path) -> Path:
    from course_scenarios import demo_cells, solve, without_demos
    released = json.loads(release_11.read_text())
    source = json.loads((ROOT / "nbs" / NOTEBOOK).read_text())
    good = without_demos(solve(released, source, own_words=True), demo_cells(released))
    subs = base / "submissions"
    (subs / "honest").mkdir(parents=True)
    (subs / "honest" / NOTEBOOK).write_text(json.dumps(good, indent=1))
    for student, data in hostile_notebooks(good).items():
        (subs / student).mkdir()
        (subs / student / NOTEBOOK).write_bytes(data)
    year_one = subs / "year-one" / "11_embeddings"           # nbgrader's collected layout
    year_one.mkdir(parents=True)
    (year_one / NOTEBOOK).write_text(json.dumps(good))
    (year_one / "timestamp.txt").write_text("0001-01-01 00:00:00.000000 +0100")     # before year 1 in UTC
    for name in ODD_FOLDERS:
        folder = os.path.join(os.fsencode(subs), name)
        os.mkdir(folder)
        with open(os.path.join(folder, NOTEBOOK.encode()), "w") as f:
            f.write(json.dumps(good))
    return base


@pytest.fixture(scope="module")
def graded_hostile(release_11, tmp_path_factory):
    """(the finished `tinytorch grade` run, the folder holding submissions/ and course/, the runs of `tinytorch grades`
    for the final grades and nbgrader's export CSV)."""
    base = _build(release_11, tmp_path_factory.mktemp("hostile"))
    cli = Path(sys.executable).parent / "tinytorch"
    out = subprocess.run([cli, "grade", "11", "submissions", "--course", "course", "--nbs", ROOT / "nbs",
                          "--jobs", "2", "--cell-timeout", "30"], cwd=base, capture_output=True, text=True,
                         errors="replace", timeout=1200)
    finals = [subprocess.run([cli, "grades", "11", "--course", "course", "--format", kind], cwd=base,
                             capture_output=True, text=True, errors="replace", timeout=600)
              for kind in ("final", "nbgrader")] if out.returncode == 3 else []
    return out, base, finals


def _rows(base: Path) -> dict:
    with open(base / "course" / "grades_11_embeddings.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    table = {}
    for row in rows:
        table.setdefault(row["student"], []).append(row)
    return table


class TestOneSubmissionFailsAlone:
    def test_grading_finishes_and_names_the_bad_ones(self, graded_hostile):
        out, _, _ = graded_hostile
        assert out.returncode == 3, f"{out.stdout[-3000:]}{out.stderr[-3000:]}"
        assert "Traceback" not in out.stderr, out.stderr[-3000:]

    def test_the_honest_student_is_graded(self, graded_hostile):
        out, base, _ = graded_hostile
        rows = _rows(base)["honest"]
        tests = [r for r in rows if r["kind"] == "test"]
        assert tests and all(r["status"] == "graded" for r in tests), rows
        assert all(r["points"] == r["max_points"] for r in tests), rows

    @pytest.mark.parametrize("student, says", [
        ("number-source", "a cell source of type int"), ("deep-nesting", "nested more than 200 levels deep"),
        ("minor-text", "nbformat_minor is 'five'"), ("lone-surrogate", "isn't Unicode"),
        ("prints-a-lot", "its outputs are too large")])
    def test_each_unreadable_notebook_fails_alone_with_one_line(self, graded_hostile, student, says):
        out, base, _ = graded_hostile
        rows = _rows(base).get(student)
        assert rows, f"no rows for {student}: {out.stdout[-3000:]}{out.stderr[-3000:]}"
        assert {r["status"] for r in rows} == {"failed"}, rows
        reason = rows[0]["reason"]
        assert says in reason and "\\n" not in reason and len(reason) <= 200, reason
        assert student in out.stdout

    @pytest.mark.parametrize("student", ["many-hashes", "many-brackets", "prints-some"])
    def test_a_flood_in_a_cell_is_graded_as_usual(self, graded_hostile, student):
        _, base, _ = graded_hostile
        rows = {r["part"]: (r["points"], r["status"]) for r in _rows(base)[student]}
        assert rows == {r["part"]: (r["points"], r["status"]) for r in _rows(base)["honest"]}, rows

    def test_a_long_output_is_cut_before_it_is_kept(self, graded_hostile):
        _, base, _ = graded_hostile
        graded = base / "course" / "autograded" / "prints-some" / "11_embeddings" / NOTEBOOK
        page = base / "course" / "feedback" / "prints-some" / "11_embeddings" / "11_embeddings.html"
        assert graded.stat().st_size < 2 << 20 and page.stat().st_size < 3 << 20
        assert "more characters of output not kept" in graded.read_text(encoding="utf-8")

    def test_a_timestamp_before_year_one_is_flagged(self, graded_hostile):
        _, base, _ = graded_hostile
        rows = [r for r in _rows(base)["year-one"] if r["kind"] == "test"]
        assert {r["status"] for r in rows} == {"flagged"}, rows
        assert rows[0]["reason"].startswith("year-one/11_embeddings/timestamp.txt '0001-01-01"), rows[0]

    def test_odd_folder_names_are_refused_by_name(self, graded_hostile):
        out, base, _ = graded_hostile
        known = {"honest", "year-one", *hostile_notebooks({"cells": []})}
        odd = [s for s in _rows(base) if s not in known]
        assert len(odd) == len(ODD_FOLDERS), list(_rows(base))
        for student in odd:
            assert {r["status"] for r in _rows(base)[student]} == {"failed"}
            assert "not a valid student id" in _rows(base)[student][0]["reason"]

    def test_final_grades_and_exports_are_written(self, graded_hostile):
        _, _, finals = graded_hostile
        assert [run.returncode for run in finals] == [0, 0], [run.stdout[-2000:] + run.stderr[-2000:] for run in finals]

    def test_no_csv_holds_a_raw_control_character(self, graded_hostile):
        _, base, _ = graded_hostile
        written = sorted(p.name for p in (base / "course").rglob("*.csv"))
        expected = {"grades_11_embeddings.csv", "final_grades_11_embeddings.csv", "nbgrader_grades_11_embeddings.csv"}
        assert expected <= set(written), written
        written = list((base / "course").rglob("*.csv"))
        for path in written:
            text = path.read_bytes().decode("utf-8")
            for line in text.replace("\r\n", "\n").split("\n"):
                bad = [c for c in line if ord(c) < 0x20 or 0x7f <= ord(c) < 0xa0 or c in "\u2028\u2029"]
                assert not bad, f"{path.name}: {line!r}"

    def test_the_course_stays_small(self, graded_hostile):
        _, base, _ = graded_hostile
        size = sum(p.stat().st_size for p in (base / "course").rglob("*") if p.is_file())
        assert size < 50 << 20, f"the course folder holds {size >> 20} MiB"
