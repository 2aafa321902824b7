"""Grading a class in shards (`tinytorch grade --shard K/N`, `tinytorch grade-merge`) and the recipes
in docs/recipes/, run here the way their job engines run them: the GitHub Actions workflow grades one
of two shards and the Slurm array script the other, each in its own process and course folder, and
both recipes' merges must write exactly the grades CSV of one run over the whole class."""
import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from requirements import require

yaml = require("yaml")

from tinytorch.course.grading.grade_table import CSV_FIELDS  # noqa: E402
from tinytorch.course.grading.shards import shard_of  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / "docs" / "recipes" / "grade-shards.yml"
SLURM = ROOT / "docs" / "recipes" / "grade-shards.slurm"
TINYTORCH = Path(sys.executable).parent / "tinytorch"       # the console script from pyproject.toml
GRADE_STEP = 'sudo "$(command -v tinytorch)" grade "$MODULE" "$SUBMISSIONS" --shard "$SHARD/$SHARDS" --course "course-$SHARD"'
GRADE_ARGS = "--cell-timeout 30"           # extra grade options, as the workflow's input and Slurm's GRADE_ARGS pass them


def load_workflow() -> dict:
    wf = yaml.safe_load(WORKFLOW.read_text())
    wf["on"] = wf.pop(True, wf.get("on"))       # YAML 1.1 reads the key `on` as True
    return wf


def find_step(job: dict, text: str) -> dict:
    found = [s for s in job["steps"] if text in (s.get("run") or s.get("uses") or "")]
    assert len(found) == 1, f"expected one step with {text!r}, found {len(found)} in {job['steps']}"
    return found[0]


def expand(text: str, shard=None, env=None) -> str:
    "A workflow expression text as the runner expands it."
    text = text.replace("${{ matrix.shard }}", str(shard)).replace("${{ inputs.grade-args }}", GRADE_ARGS)
    text = re.sub(r"\$\{\{ env\.(\w+) \}\}", lambda m: env[m[1]], text)
    assert "${{" not in text, text
    return text


def slurm_settings() -> dict:
    text = SLURM.read_text()
    return {"array": re.findall(r"^#SBATCH --array=1-(\d+)$", text, re.M),
            "shards": re.findall(r"^SHARDS=\$\{SHARDS:-(\d+)\}", text, re.M), "text": text}


# ------------------------------------------------------------------ the recipes say what they should

def test_workflow_is_valid_yaml_with_a_shard_matrix_grade_and_merge():
    wf = load_workflow()
    assert "workflow_dispatch" in wf["on"]
    n = int(wf["env"]["SHARDS"])
    grade, merge = wf["jobs"]["grade"], wf["jobs"]["merge"]
    assert grade["strategy"]["matrix"]["shard"] == list(range(1, n + 1)), "the matrix must list 1..SHARDS"
    assert grade["strategy"]["fail-fast"] is False
    assert grade["env"]["SHARD"] == "${{ matrix.shard }}" and grade["env"]["GRADE_ARGS"] == "${{ inputs.grade-args }}"
    assert "grade-args" in wf["on"]["workflow_dispatch"]["inputs"]
    run = find_step(grade, "tinytorch")["run"]
    assert GRADE_STEP in run and run.strip().endswith('${extra[@]+"${extra[@]}"} || test $? -eq 3'), run
    assert "bubblewrap" in find_step(grade, "apt-get install")["run"]
    assert "kernel.apparmor_restrict_unprivileged_userns=0" in find_step(grade, "sysctl")["run"]
    assert wf["permissions"] == {} and grade["permissions"] == merge["permissions"] == {"contents": "read"}
    for job in (grade, merge):
        checkout = find_step(job, "actions/checkout@")
        assert checkout["with"] == {"persist-credentials": False}, checkout
    upload = find_step(grade, "actions/upload-artifact")["with"]
    assert upload["name"] == "grades-shard-${{ matrix.shard }}"
    assert {f"course-${{{{ matrix.shard }}}}/{p}" for p in ("${{ env.GRADES }}", "feedback/", "autograded/", "gradebook.db",
                                                         "nbgrader_config.py", "source/")} <= set(
        upload["path"].splitlines()), upload["path"]
    assert merge["needs"] == "grade"
    assert find_step(merge, "actions/download-artifact")["with"] == {"pattern": "grades-shard-*", "path": "shards"}
    assert 'for k in $(seq 1 "$SHARDS"); do csvs+=("shards/grades-shard-$k/$GRADES"); done' in find_step(merge, "grade-merge")["run"]
    assert 'tinytorch grade-merge "$GRADES" "${csvs[@]}" --course course' in find_step(merge, "grade-merge")["run"]
    assert find_step(merge, "actions/upload-artifact")["with"]["path"].splitlines() == ["${{ env.GRADES }}", "course/"]


def test_slurm_script_has_the_array_the_shard_command_and_a_dependent_merge():
    s = slurm_settings()
    assert s["array"] == s["shards"] and len(s["array"]) == 1, "#SBATCH --array=1-N and the default SHARDS=N must agree"
    text = s["text"]
    assert '"$TINYTORCH" grade "$MODULE" "$SUBMISSIONS" --shard "$k/$SHARDS" --course "$RUN/course-$k"' in text
    assert '${extra[@]+"${extra[@]}"} || test $? -eq 3' in text
    assert 'RUN=$(mktemp -d "shards/$(date +%Y%m%d-%H%M%S)-XXXX")' in text
    assert 'sbatch --parsable --array=1-"$SHARDS" --output="$RUN/grade-%a.log" "$script"' in text
    assert '--dependency=afterok:"$array" --kill-on-invalid-dep=yes' in text
    assert '--dependency=afternotok:"$array" --kill-on-invalid-dep=yes' in text
    assert '"$TINYTORCH" grade-merge "$RUN/$GRADES" "${csvs[@]}"' in text
    assert subprocess.run(["bash", "-n", SLURM]).returncode == 0


# ------------------------------------------------------------------ the command line

def test_a_students_shard_is_the_same_in_every_process():
    ids = [f"student-{i}" for i in range(200)] + ["Ünïcode", "bad name"]
    code = ("import json, sys; from tinytorch.course.grading.shards import shard_of; "
            "print(json.dumps([shard_of(s, 7) for s in json.loads(sys.argv[1])]))")
    runs = [subprocess.run([sys.executable, "-c", code, json.dumps(ids)], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")]
    assert json.loads(runs[0]) == json.loads(runs[1]) == [shard_of(s, 7) for s in ids]


@pytest.mark.parametrize("bad", ["0/2", "3/2", "a/b", "2", "1/0", "1/-2"])
def test_bad_shard_values_are_one_line_errors_before_any_work(bad, tmp_path, monkeypatch, capsys):
    from tinytorch.cli import main       # in this process: the console script's exit code is main's (test_cli.py)
    (tmp_path / "submissions" / "alice").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    code = main(["grade", "11", "submissions", "--shard", bad, "--course", "course", "--nbs", str(ROOT / "nbs")])
    err = capsys.readouterr().err
    assert code == 2, (code, err)
    assert err.startswith(f"tinytorch grade: --shard {bad!r}: ") and err.count("\n") == 1, err
    assert not (tmp_path / "course").exists()


def test_grade_merge_refuses_a_student_in_two_shards_and_writes_nothing(tmp_path):
    row = {"student": "alice", "part": "test_a", "kind": "test", "points": "1", "max_points": "1",
           "recheck_points": "1", "status": "graded", "reason": "", "assignment": "11_embeddings"}
    for name in ("a.csv", "b.csv"):
        with open(tmp_path / name, "w", newline="") as f:
            w = csv.DictWriter(f, CSV_FIELDS)
            w.writeheader()
            w.writerow(row)
    out = subprocess.run([TINYTORCH, "grade-merge", "merged.csv", "a.csv", "b.csv"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out
    assert "student 'alice' is in both a.csv and b.csv" in out.stderr, out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "b.csv"]


# ------------------------------------------------------------------ the recipes run: two shards, two merges, one answer

STUDENTS = ["reference", "untouched", "broken-sinusoid"]    # + an invalid folder name
INVALID = "bad name"


def _tool(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(body)
    path.chmod(0o755)


def _rows(path: Path) -> list:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def recipes_run(tmp_path_factory, release_11):
    require("nbgrader")
    from course_scenarios import write_submissions

    base = tmp_path_factory.mktemp("shards")
    source = json.loads((ROOT / "nbs" / "11_embeddings.ipynb").read_text())
    released = json.loads(release_11.read_text())
    subs = write_submissions(base / "submissions", released, source, STUDENTS, whole_lesson=())
    shutil.copytree(subs / "reference", subs / INVALID)
    gha, slurm, tools = base / "gha", base / "slurm", base / "bin"
    for cwd in (gha, slurm):                   # each engine's working copy: the repository's nbs/ and submissions/
        cwd.mkdir()
        (cwd / "nbs").symlink_to(ROOT / "nbs")
        (cwd / "submissions").symlink_to(subs)
    tools.mkdir()
    # sudo: on a runner it makes the grader root; here a pass-through (the tests already run as whoever they run as)
    _tool(tools, "sudo", '#!/bin/sh\nwhile [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done\nexec "$@"\n')
    # the runner's installers are recorded, not run: this environment already has bubblewrap and tinytorch
    for name in ("apt-get", "sysctl", "pip"):
        _tool(tools, name, f'#!/bin/sh\necho "{name} $*" >> "$INSTALL_LOG"\n')
    _tool(tools, "sbatch", f"#!{sys.executable}\nimport json, os, sys\n"
          "open(os.environ['SBATCH_LOG'], 'a').write(json.dumps(sys.argv[1:]) + '\\n')\nprint(4242)\n")

    wf = load_workflow()
    env = {**os.environ, **wf["env"], "SHARDS": "2", "SBATCH_LOG": str(base / "sbatch.log"),
           "INSTALL_LOG": str(base / "install.log"), "TINYTORCH": str(TINYTORCH),
           "PATH": f"{tools}{os.pathsep}{TINYTORCH.parent}{os.pathsep}{os.environ['PATH']}"}
    gha_shell = ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c"]   # how Actions runs a `run:` step
    grade_job, merge_job = wf["jobs"]["grade"], wf["jobs"]["merge"]
    empty = next(k for k in range(1, 5) if all(shard_of(s, 4) != k for s in STUDENTS + [INVALID]))

    def job_env(job, shard=None):
        return {**env, **{k: expand(str(v), shard, env) for k, v in job.get("env", {}).items()}}

    def run_step(step, shard=None, **kw):
        return subprocess.run(gha_shell + [expand(step["run"], shard, env)], cwd=gha, capture_output=True, text=True,
                              env=job_env(grade_job if shard else merge_job, shard), **kw)

    def start(args, cwd, **extra):
        return subprocess.Popen(args, cwd=cwd, env={**env, **extra}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)

    # the grade job's `run:` steps for shard 1, in order: the installers (recorded), then the grading, which runs
    # at once with Slurm array task 2, an empty shard and one machine grading the whole class, each in its own process
    grade_steps = [s for s in grade_job["steps"] if "run" in s]
    setup = [run_step(s, 1) for s in grade_steps[:-1]]
    slurm_run = slurm / "shards" / "test-run"
    slurm_run.mkdir(parents=True)
    running = {"gha shard 1": start(gha_shell + [expand(grade_steps[-1]["run"], 1, env)], gha, **job_env(grade_job, 1)),
               "slurm task 2": start(["bash", SLURM], slurm, SLURM_ARRAY_TASK_ID="2", SLURM_CPUS_PER_TASK="2",
                                     RUN="shards/test-run", GRADE_ARGS=GRADE_ARGS),
               "empty shard": start([TINYTORCH, "grade", "11", "submissions", "--shard", f"{empty}/4",
                                     "--course", "course-empty"], gha),
               "single": start([TINYTORCH, "grade", "11", "submissions", "--course", "single", "--jobs", "2"], gha)}
    done = {}
    for name, p in running.items():
        out, err = p.communicate()
        done[name] = (p.returncode, out, err)
    single = subprocess.CompletedProcess(running["single"].args, *done.pop("single"))    # one machine, the whole class

    # the engines' transport: Actions' artifacts (upload paths, download layout), Slurm's shared disk
    shutil.copytree(slurm_run / "course-2", gha / "course-2")
    artifacts = {}
    upload = find_step(grade_job, "actions/upload-artifact")["with"]
    for k in (1, 2):
        folder = gha / "shards" / expand(upload["name"], k, env)
        for pattern in expand(upload["path"], k, env).splitlines():
            for found in gha.glob(pattern.rstrip("/")):
                dest = folder / found.relative_to(gha / f"course-{k}")      # paths kept below their common folder
                dest.parent.mkdir(parents=True, exist_ok=True)
                if found.is_dir():
                    shutil.copytree(found, dest)
                else:
                    shutil.copy(found, dest)
        artifacts[k] = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    # the merge job's `run:` steps in order (the download already done above)
    merge_steps = [run_step(s) for s in merge_job["steps"] if "run" in s]
    gha_merge = merge_steps[-1]

    shutil.copytree(gha / "course-1", slurm_run / "course-1")
    slurm_merge = subprocess.run(["bash", SLURM, "merge"], cwd=slurm, env={**env, "RUN": "shards/test-run"},
                                 capture_output=True, text=True)
    submit = subprocess.run(["bash", SLURM], cwd=slurm, env=env, capture_output=True, text=True)
    sbatch_calls = [json.loads(line) for line in (base / "sbatch.log").read_text().splitlines()]

    return {"base": base, "gha": gha, "slurm": slurm, "slurm_run": slurm_run, "done": done, "single": single,
            "gha_merge": gha_merge, "slurm_merge": slurm_merge, "submit": submit, "sbatch_calls": sbatch_calls,
            "artifacts": artifacts, "grades": env["GRADES"], "empty": empty, "setup": setup + merge_steps[:-1],
            "installs": (base / "install.log").read_text().splitlines()}


def test_the_workflows_setup_steps_install_bubblewrap_lift_apparmors_limit_and_install_tinytorch(recipes_run):
    r = recipes_run
    assert all(step.returncode == 0 for step in r["setup"]), r["setup"]
    assert r["installs"] == ["apt-get update -qq", "apt-get install -y -qq bubblewrap",
                             "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0", "pip install .[dev]",
                             "pip install .[dev]"], r["installs"]


def test_both_shards_ran_and_split_the_class(recipes_run):
    r = recipes_run
    for name in ("gha shard 1", "slurm task 2"):
        code, out, err = r["done"][name]
        assert code == 0, f"{name} exited {code}:\n{out[-2000:]}\n{err[-2000:]}"
    shard1 = {row["student"] for row in _rows(r["gha"] / "course-1" / r["grades"])}
    shard2 = {row["student"] for row in _rows(r["slurm_run"] / "course-2" / r["grades"])}
    everyone = set(STUDENTS) | {INVALID}
    assert shard1 and shard2, f"both shards must hold students: {shard1} / {shard2}"
    assert not shard1 & shard2 and shard1 | shard2 == everyone, (shard1, shard2)
    assert shard1 == {s for s in everyone if shard_of(s, 2) == 1}
    graded1 = shard1 - {INVALID}
    assert r["artifacts"][1] == sorted([r["grades"], r["grades"].replace(".csv", ".log"), "gradebook.db",
                                        "nbgrader_config.py", "source/11_embeddings/11_embeddings.ipynb"]
                                       + [f"{kind}/{s}/11_embeddings/11_embeddings.{ext}" for s in graded1
                                          for kind, ext in (("feedback", "html"), ("autograded", "ipynb"))]), \
        r["artifacts"][1]


def test_both_merges_write_exactly_the_csv_of_one_run(recipes_run):
    r = recipes_run
    assert r["single"].returncode == 3, r["single"]            # 3: the invalid folder needs attention
    for merge in (r["gha_merge"], r["slurm_merge"]):
        assert merge.returncode == 0, merge
        assert "merged 4 student(s)" in merge.stdout and "from 2 shard CSV(s)" in merge.stdout, merge.stdout
    one = r["gha"] / "single" / r["grades"]
    for merged in (r["gha"] / r["grades"], r["slurm_run"] / r["grades"]):
        got, want = _rows(merged), _rows(one)
        assert len(got) == len(want) > 0
        for i, (g, w) in enumerate(zip(got, want)):
            assert g == w, f"{merged.parent.name} row {i}: {g} != {w}"
        assert merged.read_bytes() == one.read_bytes()


def test_both_merges_make_one_course_whose_gradebook_holds_the_whole_class(recipes_run):
    from tinytorch.course.basics.course import Course
    from tinytorch.course.grading.gradebook import read_gradebook
    r = recipes_run
    single = r["gha"] / "single"
    for course in (r["gha"] / "course", r["slurm_run"] / "course"):
        assert (course / r["grades"]).read_bytes() == (single / r["grades"]).read_bytes()
        assert read_gradebook(Course(course), "11_embeddings") == read_gradebook(Course(single), "11_embeddings")
        assert sorted(read_gradebook(Course(course), "11_embeddings")) == sorted(STUDENTS)
        assert sorted(p.name for p in (course / "autograded").iterdir()) == sorted(STUDENTS)


def test_merged_grades_are_the_scenarios_grades(recipes_run):
    rows = _rows(recipes_run["gha"] / recipes_run["grades"])
    tests = {}
    for row in rows:
        if row["kind"] == "test":
            tests.setdefault(row["student"], {})[row["part"]] = (float(row["points"]), float(row["max_points"]))
    full = {part: m for part, (_, m) in tests["reference"].items()}
    assert {p: pts for p, (pts, _) in tests["reference"].items()} == full
    assert all(pts == 0 for pts, _ in tests["untouched"].values())
    assert {p: pts for p, (pts, _) in tests["broken-sinusoid"].items()} == {**full, "test_sinusoidal_table": 0.0}
    invalid = [row for row in rows if row["student"] == INVALID]
    assert invalid and all(row["status"] == "failed" and "not a valid student id" in row["reason"] for row in invalid)
    assert [row["student"] for row in rows] == sorted(row["student"] for row in rows)


def test_an_empty_shard_says_so_and_writes_a_header_only_csv(recipes_run):
    code, out, err = recipes_run["done"]["empty shard"]
    assert code == 0, (out, err)
    assert f"shard {recipes_run['empty']}/4: 0 of the 4 submission(s)" in out and "nothing to grade" in out, out
    assert (recipes_run["gha"] / "course-empty" / recipes_run["grades"]).read_text().splitlines() == [",".join(CSV_FIELDS)]


def test_slurm_submit_step_makes_a_run_folder_and_queues_the_array_then_a_merge_or_a_report(recipes_run):
    r = recipes_run
    assert r["submit"].returncode == 0, r["submit"]
    run = re.search(r"^run folder: (shards/\d{8}-\d{6}-\w{4})$", r["submit"].stdout, re.M)
    assert run and (r["slurm"] / run[1]).is_dir(), r["submit"].stdout
    array, merge, report = r["sbatch_calls"]
    assert array == ["--parsable", "--array=1-2", f"--output={run[1]}/grade-%a.log", str(SLURM)], array
    for job, condition, mode in ((merge, "afterok", "merge"), (report, "afternotok", "failed")):
        assert f"--dependency={condition}:4242" in job and "--kill-on-invalid-dep=yes" in job, job
        assert job[-1] == f"bash {SLURM} {mode}" and any(a.startswith("--mem=") for a in job), job
