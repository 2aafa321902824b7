"""docs/recipes/grade-shards.slurm on a real one-node Slurm cluster (munged, slurmctld, slurmd started here),
run the way the instructor guide says: `SHARDS=N bash docs/recipes/grade-shards.slurm` from the course folder.

The merged grades must be byte for byte one machine's; a failing task must cancel the merge, leave no grades CSV
and say which shard failed and where its log is; a re-run with fewer shards in the same folder must give the
right, fresh grades. Skipped only where Slurm can't be installed (not root, or no Debian packages), and never
with CI=true: `.ci/run` installs it."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from course_scenarios import PAIR
from requirements import require
from slurm_cluster import cluster
from tinytorch.course.grading.shards import shard_of

ROOT = Path(__file__).resolve().parents[1]
SLURM = ROOT / "docs" / "recipes" / "grade-shards.slurm"
TINYTORCH = Path(sys.executable).parent / "tinytorch"
STUDENTS = list(PAIR)
GRADES = "grades_11_embeddings.csv"
HANG_GUARD = "--cell-timeout 30"            # a guard against a hang (no cell comes near it), as in one machine's run


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    require("slurm")
    # the daemons' folder must be reachable by path from jobs: a short one, outside any mode-700 folder
    with cluster(tmp_path_factory.mktemp("slurm")) as c:
        yield c
        assert c.queue_empty(), c.run("squeue").stdout


@pytest.fixture(scope="module")
def course(tmp_path_factory, graded_pair):
    """The course folder an instructor submits from (nbs/, submissions/), and one machine's grades of the class
    (the session's graded pair, graded with the options the shards get)."""
    base = tmp_path_factory.mktemp("class")
    shutil.copytree(graded_pair / "submissions", base / "submissions")
    shutil.copytree(graded_pair / "single", base / "single")
    (base / "nbs").symlink_to(ROOT / "nbs")
    assert {shard_of(s, 2) for s in STUDENTS} == {1, 2}, "both shards must hold students"
    return base


def submit(slurm, course, shards: int, **env) -> tuple:
    "Run the recipe's submit step; wait until Slurm has run (or cancelled) every job. Returns (run folder, output)."
    out = subprocess.run(["bash", SLURM], cwd=course, capture_output=True, text=True, timeout=120,
                         env={**slurm.env, "SHARDS": str(shards), "TINYTORCH": str(TINYTORCH), "GRADE_ARGS": HANG_GUARD,
                              **env})
    assert out.returncode == 0, out
    run = course / re.search(r"^run folder: (\S+)$", out.stdout, re.M)[1]
    ids = re.search(r"job (\d+), .*merge \(job (\d+)\).*report \(job (\d+)\)", out.stdout)
    assert ids, out.stdout
    slurm.wait_for("every job of the run to end", slurm.queue_empty, timeout=1800)   # a hang guard only
    states = {name: slurm.jobs(job) for name, job in zip(("array", "merge", "report"), ids.groups())}
    states["tasks"] = {int(key.split("_")[1]): value for key, value in states["array"].items()}
    return run, out.stdout, states


def state(jobs: dict) -> set:
    return {s for s, _, _ in jobs.values()}


def test_two_shards_merge_into_exactly_one_machines_grades(slurm, course):
    run, said, jobs = submit(slurm, course, 2)
    assert f"when it ends: {run.relative_to(course)}/{GRADES}" in said, said
    assert state(jobs["array"]) == {"COMPLETED"} and len(jobs["array"]) == 2, jobs
    assert state(jobs["merge"]) == {"COMPLETED"}, (jobs, (run / "merge.log").read_text())
    assert state(jobs["report"]) == {"CANCELLED"}, jobs          # nothing failed, so no report
    for k in (1, 2):
        rows = (run / f"course-{k}" / GRADES).read_text().splitlines()
        assert len(rows) > 1, f"shard {k} graded nobody"
    assert (run / GRADES).read_bytes() == (course / "single" / GRADES).read_bytes()
    assert not (run / "FAILED").exists()
    # one course for the whole class: its gradebook holds every student, as one machine's does
    from tinytorch.course.basics.course import Course
    from tinytorch.course.grading.gradebook import read_gradebook
    merged = read_gradebook(Course(run / "course"), "11_embeddings")
    assert sorted(merged) == sorted(STUDENTS) and merged == read_gradebook(Course(course / "single"), "11_embeddings")


def test_a_failed_task_cancels_the_merge_and_names_the_shard_and_its_log(slurm, course, tmp_path):
    # shard 2's node has no bubblewrap: its task fails as `tinytorch grade` refuses, in one line
    node = tmp_path / "tinytorch-on-a-node-without-bwrap"
    node.write_text(f'#!/bin/bash\ncase " $* " in *" --shard 2/2 "*) export TINYTORCH_BWRAP={tmp_path}/no-bwrap;; esac\n'
                    f'exec {TINYTORCH} "$@"\n')
    node.chmod(0o755)
    run, said, jobs = submit(slurm, course, 2, TINYTORCH=str(node))
    assert jobs["tasks"][1][0] == "COMPLETED" and jobs["tasks"][2][:2] == ("FAILED", "1:0"), jobs
    assert list(jobs["merge"].values())[0][::2] == ("CANCELLED", "DependencyNeverSatisfied"), jobs
    assert state(jobs["report"]) == {"COMPLETED"}, jobs
    failed = (run / "FAILED").read_text()
    rel = run.relative_to(course)
    assert failed.splitlines() == [
        f"grading failed: the merge was cancelled and no grades were written for this run ({rel})",
        f"shard 2/2 failed; its log: {rel}/grade-2.log",
        "    last line: tinytorch grade: no sandbox: bubblewrap (bwrap) is not installed; install it (Debian/Ubuntu: "
        "apt-get install bubblewrap, Fedora: dnf install bubblewrap, Arch: pacman -S bubblewrap) or pass "
        "--no-sandbox to grade without one"], failed
    assert not (run / GRADES).exists() and not (run / "course").exists() and not list(course.glob(GRADES))
    assert (run / "course-1" / GRADES).exists()      # the shard that worked kept its grades, for a look


def test_a_rerun_with_fewer_shards_gives_fresh_grades(slurm, course):
    earlier = sorted(p.name for p in (course / "shards").iterdir())
    assert len(earlier) >= 1
    run, said, jobs = submit(slurm, course, 1)
    assert run.name not in earlier
    assert state(jobs["merge"]) == {"COMPLETED"}, (jobs, (run / "merge.log").read_text())
    assert sorted(p.name for p in run.iterdir() if p.is_dir()) == ["course", "course-1"]
    assert (run / GRADES).read_bytes() == (course / "single" / GRADES).read_bytes()
