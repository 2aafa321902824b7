"""A record of what the `tinytorch` command says and writes on a small course, for two trees to be compared
byte for byte: `python tests/record_cli.py OUT_DIR` (from a tree, with its venv's python) writes one text file
per command into OUT_DIR: its arguments, exit code, stdout, stderr and every file it created or changed, with
the folders, dates, times, durations and random names masked. `diff -r` of two such folders says whether a
change of the code changed what an instructor sees.

The class: the report's class (tests/solution_variants.report_class, one of them late) and three of the grading
scenarios (tests/course_scenarios), each handed in without the lesson's demonstrations, graded with a due date
and a late policy; then the final grades and every export, the class report, one student graded again, the
re-grade of the whole class, `collect` from an nbgrader exchange, `test` on the release, and commands given
bad input. Nothing here imports the package's modules: the CLI is the interface being recorded."""
import csv
import hashlib
import io
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
NBS = ROOT / "nbs"
SOURCE = NBS / "11_embeddings.ipynb"
CLI = Path(sys.executable).parent / "tinytorch"
ASSIGNMENT = "11_embeddings"
SCENARIOS = ("broken-sinusoid", "syntax-error", "test-edited-to-pass")
DUE = "2026-12-01T00:00+00:00"


# ------------------------------------------------------------------ masking

def masker(base: Path):
    "text -> the text with this run's folders, the tree's paths, dates, times and durations masked."
    venv = Path(sys.executable).parent.parent
    home = Path.home()
    literal = sorted({(str(base.resolve()), "<BASE>"), (str(base), "<BASE>"), (str(ROOT), "<TREE>"),
                      (str(venv), "<VENV>"), (str(venv.resolve()), "<VENV>"), (tempfile.gettempdir(), "<TMP>"),
                      (str(home), "<HOME>")}, key=lambda kv: -len(kv[0]))
    patterns = [
        # ISO and nbgrader-style date-times (with optional fraction and zone), then dates, then clock times
        (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?( ?(Z|[+-]\d\d:?\d\d|UTC))?"), "<DATETIME>"),
        (re.compile(r"\b\d{4}-\d\d-\d\d\b"), "<DATE>"),
        (re.compile(r"\b\d\d:\d\d:\d\d(\.\d+)?\b"), "<TIME>"),
        # durations: "12.3 s", "4 s", "1.2s", "0:00:12", "3 min", elapsed/remaining of a progress line
        (re.compile(r"\b\d+(\.\d+)?\s?(s|ms|sec|seconds|min|minutes)\b"), "<DURATION>"),
        (re.compile(r"\b\d+:\d\d\b"), "<CLOCK>"),
        # random names: uuids, long hex tokens, mkdtemp's suffixes
        (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<UUID>"),
        (re.compile(r"\b[0-9a-f]{32,}\b"), "<HEX>"),
        (re.compile(r"(tmp|tinytorch-)[a-z0-9_]{8}\b"), r"\1<RANDOM>"),
        # process ids and memory addresses in messages
        (re.compile(r"\bpid \d+"), "pid <PID>"),
        (re.compile(r"0x[0-9a-f]{6,}"), "<ADDR>"),
        # a progress line's prefix, padded to the width of its (masked) times
        (re.compile(r"^\[(\d+/\d+)[^\]\n]*\]\s*", re.M), r"[\1] "),
        # columns padded to a time's width
        (re.compile(r" *<DURATION> *"), " <DURATION> "),
    ]

    def mask(text: str) -> str:
        for old, new in literal:
            text = text.replace(old, new)
        for pattern, new in patterns:
            text = pattern.sub(new, text)
        return text
    return mask


# ------------------------------------------------------------------ the files a command leaves

def snapshot(base: Path) -> dict:
    "relative path -> sha256 of every file under `base` (what a command's run is compared with)."
    return {str(p.relative_to(base)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(base.rglob("*")) if p.is_file() and not p.is_symlink()}


def sqlite_text(path: Path, mask) -> str:
    """A database as its tables' rows, masked then sorted (a gradebook's ids are random, its timestamps this
    run's, its rows in the order the jobs finished)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        out = []
        for (table,) in db.execute("select name from sqlite_master where type='table' order by name"):
            cols = [c[1] for c in db.execute(f"pragma table_info('{table}')")]
            rows = sorted(mask(repr(tuple(r))) for r in db.execute(f"select * from '{table}'"))
            out.append(f"table {table} ({', '.join(cols)}): {len(rows)} rows")
            out.extend("  " + r for r in rows)
        return "\n".join(out)
    finally:
        db.close()


def file_text(path: Path, mask) -> str:
    "What a file holds, for the record: text masked; a zip as its members; a database as its rows; else a hash."
    data = path.read_bytes()
    if path.suffix in (".db", ".sqlite"):
        return sqlite_text(path, mask)
    if zipfile.is_zipfile(path) and path.suffix in (".zip", ".whl"):
        with zipfile.ZipFile(path) as z:
            parts, package = [], []
            for info in sorted(z.infolist(), key=lambda i: i.filename):
                if "/package/tinytorch/" in f"/{info.filename}":
                    package.append(info.filename)        # the tree's own code: what a change changes
                    continue
                body = z.read(info)
                if info.filename.endswith(".db"):        # a gradebook inside: its rows, as above
                    with tempfile.TemporaryDirectory() as tmp:
                        (Path(tmp) / "member.db").write_bytes(body)
                        text = sqlite_text(Path(tmp) / "member.db", mask)
                else:
                    text = _body(body, info.filename, mask)
                parts.append(f"--- member {info.filename}\n{text}")
            if package:
                parts.append("--- members of the package's own source (tinytorch/), not recorded")
            return "\n".join(parts)
    return _body(data, path.name, mask)


def _body(data: bytes, name: str, mask) -> str:
    if name.endswith(".png") or name.endswith(".pdf"):
        return f"<image, {len(data)} bytes>"           # a plot's bytes depend on the fonts, not the code
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return f"<binary, {len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()}>"
    if name.endswith(".ipynb"):
        try:
            nb = json.loads(text)
            for cell in nb.get("cells", []):                 # the kernel's timings in each cell's metadata
                cell.get("metadata", {}).pop("execution", None)
            text = json.dumps(nb, indent=1, sort_keys=True)
        except ValueError:
            pass
    return mask(text)


IGNORED = re.compile(r"(^|/)(__pycache__|\.ipynb_checkpoints|\.cache|\.lock|\.jupyter)(/|$)|\.pyc$")


# ------------------------------------------------------------------ running a command

class Recorder:
    def __init__(self, out: Path, base: Path):
        self.out, self.base, self.n = out, base, 0
        self.mask = masker(base)
        out.mkdir(parents=True, exist_ok=True)

    def run(self, name: str, *args, cwd=None, env=None, sort_stdout=False):
        "`tinytorch ARGS` in `cwd` (default: the class's folder): its record under `name`; the CompletedProcess."
        cwd = cwd or self.base
        before = snapshot(self.base)
        full_env = {**os.environ, "MPLBACKEND": "Agg", "COLUMNS": "100", **(env or {})}
        full_env.pop("FORCE_COLOR", None)
        proc = subprocess.run([str(CLI), *map(str, args)], cwd=cwd, capture_output=True, text=True,
                              env=full_env, stdin=subprocess.DEVNULL)
        after = snapshot(self.base)
        changed = [p for p in after if before.get(p) != after[p] and not IGNORED.search(p)]
        removed = [p for p in before if p not in after and not IGNORED.search(p)]
        self.n += 1
        stdout = self.mask(proc.stdout)
        if sort_stdout:          # lines of a class graded on several jobs come in the order they finish
            stdout = "\n".join(sorted(re.sub(r"^\[\d+/\d+\] ", "[k/N] ", line)
                                       for line in stdout.splitlines()))
        lines = [f"$ tinytorch {self.mask(' '.join(map(str, args)))}",
                 f"(in {self.mask(str(cwd))})", f"exit code: {proc.returncode}",
                 "=== stdout", stdout, "=== stderr", self.mask(proc.stderr),
                 "=== files removed", *removed, "=== files written"]
        for rel in changed:
            lines += [f"--- {rel}", file_text(self.base / rel, self.mask)]
        (self.out / f"{self.n:02d}_{name}.txt").write_text("\n".join(lines) + "\n")
        print(f"{self.n:02d} {name}: exit {proc.returncode}", flush=True)
        return proc


# ------------------------------------------------------------------ the class

def write_class(base: Path, released_path: Path):
    "submissions/<student>/11_embeddings/{11_embeddings.ipynb,timestamp.txt}: nbgrader's collected layout."
    from course_scenarios import build, demo_cells, without_demos
    from payloads import MARK
    from solution_variants import report_class
    released = json.loads(released_path.read_text())
    source = json.loads(SOURCE.read_text())
    demos = demo_cells(released)
    klass = report_class(released, source, MARK)
    scen = build(released, source, {"course": str(base / "course"), "submissions": str(base / "submissions")})
    klass.update({s: scen[s] for s in SCENARIOS})
    for student, nb in sorted(klass.items()):
        folder = base / "submissions" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        (folder / f"{ASSIGNMENT}.ipynb").write_text(json.dumps(without_demos(nb, demos), indent=1))
        (folder / "timestamp.txt").write_text("2026-12-02 09:00:00 UTC" if student == "bea"
                                              else "2026-11-30 20:00:00 UTC")
    return sorted(klass)


def write_roster(base: Path, students) -> Path:
    "A Canvas gradebook export naming every student but one, and one who handed nothing in."
    roster = base / "canvas_export.csv"
    with open(roster, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Embeddings (77)"])
        w.writerow(["    Points Possible", "", "", "", "", "36"])
        for k, who in enumerate(students[:-1]):
            w.writerow([f"{who.title()}, Student", 5100 + k, f"S-{5100 + k}", who, "CS101 A", ""])
        w.writerow(["Absent, Dee", "5199", "S-5199", "dee", "CS101 A", ""])
    return roster


def exchange_course(base: Path, released_path: Path) -> Path:
    """An nbgrader course whose exchange holds two submissions, as `nbgrader submit` leaves them (one submitted
    twice): what `tinytorch collect` reads."""
    course, exchange = base / "nbcourse", base / "exchange"
    course.mkdir()
    (course / "nbgrader_config.py").write_text(
        "c = get_config()\n"
        f"c.CourseDirectory.root = {str(course)!r}\n"
        "c.CourseDirectory.course_id = 'cs101'\n"
        f"c.Exchange.root = {str(exchange)!r}\n")
    inbound = exchange / "cs101" / "inbound"
    for student, stamp in (("ana", "2026-11-30 10:00:00.000000 UTC"), ("ben", "2026-11-30 11:00:00.000000 UTC"),
                           ("ben", "2026-12-01 12:30:00.000000 UTC")):
        folder = inbound / f"{student}+{ASSIGNMENT}+{stamp}+{student}{stamp[11:13]}"
        folder.mkdir(parents=True)
        shutil.copy(released_path, folder / f"{ASSIGNMENT}.ipynb")
        (folder / "timestamp.txt").write_text(stamp)
    return course


def main(out: Path):
    base = Path(tempfile.mkdtemp(prefix="tinytorch-record-"))
    try:
        rec = Recorder(out, base)
        run = rec.run
        # the release, and the student's self-test of it
        run("release", "release", "11", "--to", "release", "--nbs", NBS)
        released = base / "release" / f"{ASSIGNMENT}.ipynb"
        if not released.exists():
            released = next((base / "release").rglob(f"{ASSIGNMENT}.ipynb"))
        run("test-release", "test", "11", "--notebook", released, "--nbs", NBS)
        run("metadata-check", "metadata", "--check", "--nbs", NBS)
        students = write_class(base, released)
        roster = write_roster(base, students)
        (base / "extensions.csv").write_text("student,days\nada,1\n")
        # grading, with a due date, a late policy, extensions and a roster
        run("grade", "grade", "11", "submissions", "--course", "course", "--nbs", NBS, "--jobs", "2",
            "--cell-timeout", "30", "--due", DUE, "--late-policy", "per-day:10", "--extensions",
            "extensions.csv", "--roster", roster, sort_stdout=True)
        # the final grades and every export
        run("grades", "grades", "11", "--course", "course")
        run("grades-canvas", "grades", "11", "--course", "course", "--format", "canvas", "--roster", roster,
            "--column", "Embeddings (77)")
        run("grades-moodle", "grades", "11", "--course", "course", "--format", "moodle", "--roster", roster)
        run("grades-nbgrader", "grades", "11", "--course", "course", "--format", "nbgrader",
            "--out", "nbgrader_export.csv")
        run("grades-canvas-no-roster", "grades", "11", "--course", "course", "--format", "canvas")
        # the class report
        run("report", "report", "11", "--course", "course", "--out", "report")
        # one student graded again alone, then the whole class again (nothing changed: the same grades)
        run("grade-only", "grade", "11", "submissions", "--course", "course", "--nbs", NBS, "--jobs", "1",
            "--cell-timeout", "30", "--due", DUE, "--late-policy", "per-day:10", "--only", "bea")
        run("grades-after-only", "grades", "11", "--course", "course")
        # collect from an nbgrader exchange
        nbcourse = exchange_course(base, released)
        run("collect", "collect", ASSIGNMENT, "--course", nbcourse)
        run("collect-update", "collect", ASSIGNMENT, "--course", nbcourse, "--update")
        # a Gradescope autograder, written (not tried: that installs a venv)
        run("autograder-gradescope", "autograder", "11", "--target", "gradescope", "--to", "autograder",
            "--nbs", NBS)
        # bad input: a clear message, exit code 2, nothing written
        run("bad-module", "grade", "99", "submissions", "--course", "course", "--nbs", NBS)
        run("bad-late-policy", "grade", "11", "submissions", "--course", "course", "--nbs", NBS,
            "--late-policy", "per-week:5")
        run("bad-due", "grade", "11", "submissions", "--course", "course", "--nbs", NBS, "--due", "tomorrow")
        run("bad-jobs", "grade", "11", "submissions", "--course", "course", "--nbs", NBS, "--jobs", "0")
        run("missing-submissions", "grade", "11", "nowhere", "--course", "course", "--nbs", NBS)
        run("grades-no-course", "grades", "11", "--course", "nocourse")
        run("grades-bad-format", "grades", "11", "--course", "course", "--format", "excel")
        run("report-no-course", "report", "11", "--course", "nocourse")
        run("collect-no-config", "collect", ASSIGNMENT, "--course", "nocourse")
        run("release-bad-nbs", "release", "11", "--nbs", "nowhere")
        run("no-command")
        run("help", "--help")
        run("unknown-command", "frobnicate")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/record_cli.py OUT_DIR")
    main(Path(sys.argv[1]).resolve())
