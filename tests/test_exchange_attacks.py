"""nbgrader's exchange, attacked by two students with real Unix accounts. Eve puts an inbound folder in the exchange
whose notebook is a symbolic link to the instructor's source notebook (which she can't read, but `nbgrader collect`,
run by the instructor, can); Dan hands in his own work after the due date in an inbound folder he made himself,
with a `timestamp.txt` (and a folder name) saying he was early. `tinytorch collect` copies nothing through the
link and keeps when each folder reached the exchange; `tinytorch grade` refuses Eve's and takes Dan's lateness
from the exchange's time, flagging his timestamp with both times. Only Dan is graded."""
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
from test_exchange import open_the_way_to, tinytorch  # noqa: E402
from tinytorch.course.basics.course import Course  # noqa: E402
from tinytorch.course.authoring.assignments import run_nbgrader, write_course  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "nbs" / "11_embeddings.ipynb"
ASSIGNMENT, COURSE_ID = "11_embeddings", "tt102"


def as_user(name: str, *command, stdin: str | None = None) -> subprocess.CompletedProcess:
    run = subprocess.run(["runuser", "-u", name, "--", *map(str, command)], input=stdin, text=True,
                         capture_output=True, timeout=120)
    assert run.returncode == 0, f"{command}: {run.stderr[-2000:]}"
    return run


@pytest.fixture(scope="module")
def attack(release_11):
    require("user accounts")
    tag = secrets.token_hex(3)
    eve, dan = f"eve{tag}", f"dan{tag}"
    base = Path(tempfile.mkdtemp(prefix="tinytorch-exchange-attacks-"))     # in /tmp: the students must reach it
    os.chmod(base, 0o755)
    made, opened = [], {}
    try:
        for name in (eve, dan):
            subprocess.run(["useradd", "--badname", "-m", "-N", "-s", "/bin/sh", name], check=True, capture_output=True)
            made.append(name)
        open_the_way_to(Path(sys.executable), opened)
        yield _run(base, eve, dan, release_11)
    finally:
        for folder, mode in opened.items():
            os.chmod(folder, mode)
        for name in made:
            subprocess.run(["userdel", "-r", "-f", name], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def _run(base: Path, eve: str, dan: str, release_11: Path) -> dict:
    exchange, course, graded = base / "exchange", base / "course", base / "graded"
    exchange.mkdir()
    os.chmod(exchange, 0o777)
    write_course(Course(course), [SOURCE], cell_timeout=30)
    config = course / "nbgrader_config.py"
    config.write_text(config.read_text().replace("c.ExchangeFactory.collect", "# c.ExchangeFactory.collect")
                      + f"\nc.CourseDirectory.course_id = {COURSE_ID!r}\nc.Exchange.root = {str(exchange)!r}\n")
    for step in ("generate_assignment", "release_assignment"):      # an instructor's own course: plain nbgrader
        run = run_nbgrader(Course(course), step, ASSIGNMENT, *(["--force"] if step == "generate_assignment" else []))
        assert run.returncode == 0, run.stderr[-3000:]
    inbound = exchange / COURSE_ID / "inbound"
    release = json.loads(release_11.read_text())
    own = without_demos(build(release, json.loads(SOURCE.read_text()), {"course": str(graded), "submissions": str(base)})
                        ["reference"], demo_cells(release))
    stamp = lambda when: when.strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    due = datetime.now(timezone.utc) - timedelta(seconds=1)
    early = due - timedelta(hours=2)
    # Eve: a link to the instructor's source notebook, in an inbound folder of her own making
    eve_in = inbound / f"{eve}+{ASSIGNMENT}+{stamp(early)}"
    as_user(eve, "mkdir", eve_in)
    as_user(eve, "ln", "-s", course / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", eve_in / f"{ASSIGNMENT}.ipynb")
    as_user(eve, "tee", eve_in / "timestamp.txt", stdin=stamp(early))
    # Dan: his own work, after the due date, in a folder whose name and timestamp.txt say two hours early
    dan_in = inbound / f"{dan}+{ASSIGNMENT}+{stamp(early)}"
    as_user(dan, "mkdir", dan_in)
    as_user(dan, "tee", dan_in / f"{ASSIGNMENT}.ipynb", stdin=json.dumps(own))
    as_user(dan, "tee", dan_in / "timestamp.txt", stdin=stamp(early))
    handed_in = datetime.now(timezone.utc)
    collected = tinytorch("collect", ASSIGNMENT, "--course", course, cwd=base)
    grade = tinytorch("grade", "11", course / "submitted", "--course", graded, "--nbs", ROOT / "nbs",
                      "--due", due.isoformat(), "--late-policy", "per-hour:10", cwd=base)
    rows = {}
    if (graded / f"grades_{ASSIGNMENT}.csv").exists():
        for row in csv.DictReader(open(graded / f"grades_{ASSIGNMENT}.csv")):
            rows.setdefault(row["student"], []).append(row)
    return {"eve": eve, "dan": dan, "course": course, "collected": collected, "grade": grade, "rows": rows,
            "due": due, "early": early, "handed_in": handed_in, "source": course / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"}


def test_collect_copies_nothing_through_a_link_and_says_so(attack):
    run, eve = attack["collected"], attack["eve"]
    assert run.returncode == 3, run.stdout[-3000:] + run.stderr[-3000:]
    assert f"NOT collected: {eve}: inbound/{eve}+{ASSIGNMENT}+" in run.stdout, run.stdout
    assert f"is a symbolic link (to {attack['source']})" in run.stdout, run.stdout
    assert list((attack["course"] / "submitted" / eve / ASSIGNMENT).iterdir()) == []


def test_grade_refuses_the_linked_submission(attack):
    eve = attack["rows"].get(attack["eve"])
    assert eve, attack["grade"].stdout[-3000:] + attack["grade"].stderr[-3000:]
    assert {(r["status"], r["score"]) for r in eve} == {("failed", "")}, eve
    assert all(r["reason"].startswith("not collected from the exchange: ") for r in eve), eve


def test_lateness_counts_from_the_receipt_not_the_students_timestamp(attack):
    dan = attack["rows"].get(attack["dan"])
    assert dan, attack["grade"].stdout[-3000:] + attack["grade"].stderr[-3000:]
    received = datetime.fromisoformat(dan[0]["timestamp"])
    assert attack["due"] < received <= attack["handed_in"] + timedelta(seconds=1), (attack["due"], received)
    seconds_late, penalty = float(dan[0]["seconds_late"]), float(dan[0]["late_penalty"])
    total = sum(float(r["score"] or 0) for r in dan)
    assert seconds_late > 0 and total > 0 and penalty == pytest.approx(round(total * 0.1, 4)), dan   # one hour begun
    early = f"{attack['early']:%Y-%m-%d %H:%M:%S}"
    assert dan[0]["reason"].startswith(f"timestamp.txt says {early} UTC, but the exchange received the submission at "
                                       f"{received:%Y-%m-%d %H:%M:%S} UTC"), dan[0]
    assert attack["grade"].returncode == 3, attack["grade"].stdout[-3000:]
