"""Submissions for the course-pipeline tests, built from the real student release of module 11."""
import copy
import json

SOURCE_SINUSOID = "table[:, 1::2] = np.cos(angles[:, :embedding_dim // 2])"


def cells_by_id(nb):
    return {c["id"]: c for c in nb["cells"]}


def src(cell):
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


# Where a student's solution begins and ends: nbgrader's own markers never appear in a student's notebook (a
# submission holding them is held at 0 as a copy of the instructor's notebook).
MY_BEGIN, MY_END = "# my solution:", "# end of my solution"


def in_own_words(cell_source):
    """The instructor's solution cell as a student who worked it out would hand it in: the markers become the
    student's own comments, and each solution region carries a note of theirs (so it isn't the instructor's code
    unchanged, which is held at 0 as a copy)."""
    out, region = [], None
    for line in cell_source.splitlines():
        stripped = line.strip()
        if stripped == "### BEGIN SOLUTION":
            out.append(line.replace("### BEGIN SOLUTION", MY_BEGIN))
            region = []
        elif stripped == "### END SOLUTION":
            out.append(line.replace("### END SOLUTION", MY_END))
            region = None
        else:
            if region is not None and len(region) == 1:       # after the region's first line
                indent = line[:len(line) - len(line.lstrip())] or region[0][:len(region[0]) - len(region[0].lstrip())]
                out.append(f"{indent}# worked out in my own words")
            out.append(line)
            if region is not None:
                region.append(line)
    return "\n".join(out)


def solve(release, source, own_words=False):
    """The release with every solution cell replaced by the instructor's code, and written answers filled in; with
    `own_words`, that code as a student hands it in (`in_own_words`): what `tinytorch grade` grades as usual."""
    nb = copy.deepcopy(release)
    ref = cells_by_id(source)
    for cell in nb["cells"]:
        g = cell.get("metadata", {}).get("nbgrader") or {}
        if g.get("solution") and cell["cell_type"] == "code":
            cell["source"] = in_own_words(src(ref[cell["id"]])) if own_words else src(ref[cell["id"]])
        elif g.get("solution"):
            cell["source"] = "My answer: the table costs vocab x dim x 4 bytes, so ..."
    return nb


def edit(nb, cell_id, fn):
    "A copy of `nb` whose cell `cell_id` has source fn(old source)."
    nb = copy.deepcopy(nb)
    cell = cells_by_id(nb)[cell_id]
    old = src(cell)
    new = fn(old)
    assert new != old, f"edit of {cell_id} changed nothing"
    cell["source"] = new
    return nb


def replace(nb, cell_id, old, new):
    return edit(nb, cell_id, lambda s: s.replace(old, new))


def broken_sinusoid(solved):
    "Odd columns use sin instead of cos: only test_sinusoidal_table can notice."
    return replace(solved, "sinusoidal", SOURCE_SINUSOID, "table[:, 1::2] = np.sin(angles[:, :embedding_dim // 2])")


def odd_dim_cosines(solved):
    """An odd width's cosines shifted by one frequency: the visible test's odd-width checks (shape, the last sine) pass,
    the hidden test's cosine at [3, 5] does not."""
    return replace(solved, "sinusoidal", "np.cos(angles[:, :embedding_dim // 2])",
                   "np.cos(angles[:, 1:] if embedding_dim % 2 else angles)")


def build(release, source, paths):
    """student -> notebook dict, for every scenario. `paths` has 'course' and 'submissions' (absolute), and
    optionally, for the vandal, 'nbs' (the source notebooks' folder), 'package' (a file of the installed package)
    and 'work' (the folder that holds the grading work folders: the temporary folder of the grading run)."""
    paths = {"nbs": "/nonexistent", "package": "/nonexistent", "work": "/nonexistent", **paths}
    solved = solve(release, source, own_words=True)
    subs = {}
    subs["reference"] = solved
    subs["untouched"] = copy.deepcopy(release)
    subs["broken-sinusoid"] = broken_sinusoid(solved)
    subs["broken-backward"] = replace(solved, "scatter", "np.add.at(dense, flat_ids, rows)",
                                      "dense[flat_ids] += rows")               # keeps one of the duplicates
    subs["test-edited-to-pass"] = edit(broken_sinusoid(solved), "sinusoidal-test",
                                       lambda s: "#| points: 3\ndef test_sinusoidal_table():\n    pass\n\ntest_sinusoidal_table()")
    # never ends, but waits: the CPU stays free for the rest of the class
    subs["infinite-loop"] = replace(solved, "sinusoidal", MY_BEGIN,
                                    MY_BEGIN + "\n    import time\n    while max_seq_length == 50:\n        time.sleep(0.1)")
    subs["syntax-error"] = replace(solved, "init", "    shape = (vocab_size, embedding_dim)", "    shape = (vocab_size, embedding_dim")
    stripped = copy.deepcopy(solved)
    for cell in stripped["cells"]:
        cell["metadata"] = {}
    subs["metadata-stripped"] = stripped
    dup = copy.deepcopy(solved)
    i = next(k for k, c in enumerate(dup["cells"]) if c["id"] == "scatter")
    twin = copy.deepcopy(dup["cells"][i])
    twin["id"] = "scatter-copy"
    dup["cells"].insert(i + 1, twin)
    subs["duplicated-cell"] = dup
    subs["vandal"] = replace(solved, "as-ids", "    " + MY_END, "    " + MY_END + "\n" + _VANDALISM.format(**paths))
    subs["snoop"] = replace(solved, "as-ids", "    " + MY_END, "    " + MY_END + "\n" + _SNOOPING.format(**paths))
    skip = broken_sinusoid(solved)
    cells_by_id(skip)["sinusoidal-test"]["metadata"]["tags"] = ["skip-execution"]
    subs["skip-tag"] = skip
    subs["input-transformer"] = replace(
        broken_sinusoid(solved), "init", "INIT_TYPES = ('uniform', 'normal', 'xavier')",
        "INIT_TYPES = ('uniform', 'normal', 'xavier')\n"
        "get_ipython().input_transformers_cleanup.append(lambda lines: ['pass\\n'])")
    tests = [c["metadata"]["nbgrader"]["grade_id"] for c in source["cells"]
             if c["cell_type"] == "code" and (c["metadata"].get("nbgrader") or {}).get("grade")]
    fake = _FAKE_RESULTS.format(passed={gid: None for gid in tests})
    subs["fake-marker"] = replace(edit(broken_sinusoid(solved), "as-ids", lambda s: s.replace(
        "    " + MY_END, "    " + MY_END + "\n" + fake + _LAST_WORD)), "sinusoidal", MY_BEGIN,
        MY_BEGIN + "\n    _say_passed()")
    subs["forged-results"] = replace(broken_sinusoid(solved), "as-ids", "    " + MY_END,
                                     "    " + MY_END + "\n" + fake + _FORGERY)
    # Named to sort first: a class is graded in the order of its folders, so this one, which runs until the wall-clock
    # limit kills it, is graded while the other job slots work through the rest of the class.
    subs["a-sigint-proof-loop"] = replace(
        solved, "sinusoidal", MY_BEGIN,
        MY_BEGIN + "\n    if max_seq_length == 50:\n        import signal\n"
        "        signal.signal(signal.SIGINT, signal.SIG_IGN)\n        import time\n        while True:\n"
        "            time.sleep(1)")   # waits, never ends, yet leaves the CPU to the rest of the class
    subs["honest-tmp"] = replace(solved, "sinusoidal", MY_BEGIN, MY_BEGIN + "\n" + _HONEST_TMP)
    # a stray import of a module the grading machine doesn't have, at the top of one export cell: in the kernel only
    # that cell fails (its function is missing); outside the notebook the whole export does not import
    subs["stray-import"] = replace(solved, "rope", "#| export\n", "#| export\nimport torch\n")
    for kind, code in RUNAWAYS.items():
        subs[f"runaway-{kind}"] = insert_cell(solved, "as-ids", f"runaway-{kind}", code)
    return subs


def insert_cell(nb, before_id, new_id, source):
    "A copy of `nb` with a new ungraded code cell `new_id` just before cell `before_id`."
    nb = copy.deepcopy(nb)
    i = next(k for k, c in enumerate(nb["cells"]) if c["id"] == before_id)
    nb["cells"].insert(i, {"cell_type": "code", "id": new_id, "metadata": {}, "execution_count": None,
                           "outputs": [], "source": source})
    return nb


# Honest code that needs a writable /tmp, threads, NumPy's BLAS threads and matplotlib, once per kernel, at the
# top of a graded function: if any of it fails, the function fails its test.
_HONEST_TMP = """    if not globals().get("_honest_checked"):
        import tempfile, concurrent.futures, matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        with open("/tmp/honest-note.txt", "w") as f:
            f.write("written by name")
        with tempfile.NamedTemporaryFile(suffix=".png") as f:
            assert f.name.startswith("/tmp/"), f.name
            plt.plot([0, 1], [1, 0]); plt.savefig(f.name); plt.close("all")
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            sums = list(pool.map(lambda k: float((np.ones((200, 200)) @ np.ones((200, 200))).sum()), range(16)))
        assert sums == [8e6] * 16
        globals()["_honest_checked"] = True
"""

# One runaway cell each, put before the student's (correct) solutions. Each stops by itself well below the size
# of a CI machine, so that a broken limit can't take the machine down, and prints how far it got.
RUNAWAYS = {
    "memory": """def _hoard():
    blocks = []
    try:
        while len(blocks) < 16:                      # 256 MiB each, written: stops by itself at 4 GiB
            blocks.append(np.ones(32 << 20))
    finally:
        print(f"RUNAWAY memory: {len(blocks) * 256} MiB")
        blocks.clear()                               # a traceback kept by the kernel would hold them
_hoard()
""",
    "processes": """import os, time
def _spawn():
    children = []
    try:
        while len(children) < 300:                   # stops by itself at 300 processes
            pid = os.fork()
            if pid == 0:
                time.sleep(2)
                os._exit(0)
            children.append(pid)
    finally:
        print(f"RUNAWAY processes: {len(children)}")
        for pid in children:
            os.waitpid(pid, 0)
_spawn()
""",
    "disk": """def _fill():
    written = 0
    try:
        for i in range(24):                          # 64 MiB files into the working folder: stops at 1.5 GiB
            with open(f"runaway-{i}.bin", "wb") as f:
                for _ in range(4):
                    f.write(bytes(16 << 20))
                    written += 16
    finally:
        print(f"RUNAWAY disk: {written} MiB")
_fill()
""",
    "tmp": """def _fill_tmp():
    written = 0
    try:
        with open("/tmp/runaway.bin", "wb") as f:    # one file in /tmp: stops by itself at 1.5 GiB
            for _ in range(96):
                f.write(bytes(16 << 20))
                f.flush()
                written += 16
    finally:
        print(f"RUNAWAY tmp: {written} MiB")
_fill_tmp()
""",
}

# Graded only by the limits test (tests/test_grading_limits.py), which names them: a class written without a
# list of students leaves them out.
LIMITS_ONLY = ("honest-tmp", *(f"runaway-{kind}" for kind in RUNAWAYS))

# Two students that land in different shards of two (tinytorch.course.grading.shards.shard_of): full marks and zero. The
# session graded once as one machine grades them (tests/conftest.py: `graded_pair`).
PAIR = ("reference", "untouched")
# graded once per run by tests/conftest.py's `graded_more`, for the platforms' graders to be compared with: one part
# wrong, a syntax error, a test edited to pass, a runaway (a cell that never ends until its time limit), and a part that
# passes its visible tests but not its hidden ones (`odd_dim_cosines`)
MORE = ("broken-sinusoid", "syntax-error", "test-edited-to-pass", "infinite-loop", "odd-dim-cosines")

# The class's students that hand in the whole lesson, demonstrations included (tests/test_course_pipeline.py): full
# marks, zero, and the one whose metadata the grader must repair cell by cell. The rest hand in short notebooks.
WHOLE_LESSON = ("reference", "untouched", "metadata-stripped")


def runaway_report(autograded_nb):
    "{kind: MiB or count} that each runaway cell printed before it stopped."
    found = {}
    for cell in autograded_nb["cells"]:
        for out in cell.get("outputs", []):
            for line in "".join(out.get("text", "")).splitlines():
                if line.startswith("RUNAWAY "):
                    kind, amount = line[len("RUNAWAY "):].split(": ")
                    found[kind] = int(amount.split()[0])
    return found


# Runs inside the student's kernel (and in the second channel): tries to read the hidden tests and the
# solutions, to damage the course and the other students' work, and to reach the network; prints a report.
_SNOOPING = '''
import os as _os, glob as _glob, shutil as _shutil, socket as _socket
_report, _stolen = [], []
for _path in ["{nbs}/11_embeddings.ipynb", "{course}/source/11_embeddings/11_embeddings.ipynb",
              "{course}/gradebook.db", "{package}"]:
    try:
        with open(_path, errors="replace") as _f:
            _stolen.append(_f.read())
        _report.append("read " + _path)
    except OSError as _e:
        _report.append("could not read " + _path)
for _target in ["{course}/gradebook.db", "{nbs}/11_embeddings.ipynb",
                "{course}/source/11_embeddings/11_embeddings.ipynb"]:
    try:
        with open(_target, "w") as _f:
            _f.write("overwritten by a student")
    except OSError:
        pass
for _victim in (_glob.glob("{submissions}/*") + _glob.glob("{course}/*") + _glob.glob("{nbs}/*")
                + _glob.glob("{work}/tinytorch-grading-*/*")):
    if "vandal" not in _victim and "snoop" not in _victim:   # its own work folder
        _shutil.rmtree(_victim, ignore_errors=True)
        try:
            _os.remove(_victim)
        except OSError:
            pass
try:
    _socket.create_connection(("pypi.org", 443), timeout=5).close()
    _report.append("network: reached pypi.org")
except OSError as _e:
    _report.append("network: " + type(_e).__name__)
print("VANDAL REPORT " + " | ".join(_report))
print("\\n".join(_stolen))         # into its own output (nbgrader keeps the first 1000 lines)
'''

# ... and also overwrites the gradebook copy its own grading uses: its grading fails, loudly.
_VANDALISM = _SNOOPING + '''
for _target in ["gradebook.db", "../../../gradebook.db"]:
    try:
        with open(_target, "w") as _f:
            _f.write("overwritten by a student")
    except OSError:
        pass
'''


# Results that say every test passed, printed by the student's code when it is imported and from inside a
# test (through a function the tests call), in the old stdout marker and in the re-check's own JSON format.
_FAKE_RESULTS = '''
import json as _json, os as _os, sys as _sys
_PASSED = {passed!r}
_FAKE_MARKER = "@@RESULTS@@" + _json.dumps(_PASSED)
_FAKE_RESULTS = _json.dumps({{"format": "tinytorch-recheck/1", "token": "0" * 32, "import_error": None, "parts": _PASSED}})
def _say_passed():
    print(_FAKE_MARKER)
    print(_FAKE_RESULTS)
    _sys.stdout.flush()
    _os.write(1, (_FAKE_MARKER + "\\n" + _FAKE_RESULTS + "\\n").encode())   # past any capture of sys.stdout
_say_passed()
'''

# ... and once more when the process ends, after whatever the grader's own code printed or wrote; in the
# re-check (its command line names the results file) also over that file.
_LAST_WORD = '''
def _last_word():
    _say_passed()
    if "--results" in _sys.argv:
        with open(_sys.argv[_sys.argv.index("--results") + 1], "w") as _f:
            _f.write(_FAKE_RESULTS)
import atexit as _atexit
_atexit.register(_last_word)
'''

# ... or, in the re-check only, writes its results file first and ends the process before the re-check can.
_FORGERY = '''
if "--results" in _sys.argv:
    with open(_sys.argv[_sys.argv.index("--results") + 1], "w") as _f:
        _f.write(_FAKE_RESULTS)
    _sys.stdout.flush()
    _os._exit(0)
'''


def vandal_report(autograded_nb):
    "The report line the vandal printed in its kernel, split into its items (None if it never printed one)."
    for cell in autograded_nb["cells"]:
        for out in cell.get("outputs", []):
            for line in "".join(out.get("text", "")).splitlines():
                if line.startswith("VANDAL REPORT "):
                    return line[len("VANDAL REPORT "):].split(" | ")
    return None


def demo_cells(release):
    """Ids of the release's demonstration cells: code that is neither graded, locked, exported nor the module's
    `#| default_exp` (measurements, plots, training runs). They earn no points and cost seconds of CPU in every
    submission graded."""
    return {c["id"] for c in release["cells"] if c["cell_type"] == "code" and not c["metadata"].get("nbgrader")
            and not src(c).lstrip().startswith(("#| export", "#| default_exp"))}


def without_demos(nb, demos):
    "A copy of `nb` without the cells whose ids are in `demos` (`demo_cells`: a student may delete them)."
    return dict(nb, cells=[c for c in nb["cells"] if c.get("id") not in demos])


def write_submissions(folder, release, source, students=None, paths=None, whole_lesson=None):
    """Write SUBMISSIONS/<student>/<notebook> for the chosen scenarios; returns the folder. Given `whole_lesson` (names),
    every other student hands in the notebook without the lesson's demonstration cells (`without_demos`): what a
    scenario tests is in its graded and exported cells. tests/test_course_pipeline.py keeps `WHOLE_LESSON` whole, and
    tests/test_grading_limits.py its honest students."""
    from pathlib import Path
    folder = Path(folder)
    paths = paths or {"course": str(folder.parent / "course"), "submissions": str(folder)}
    subs = build(release, source, paths)
    demos = demo_cells(release)
    for student in students or [s for s in subs if s not in LIMITS_ONLY]:
        dest = folder / student / "11_embeddings.ipynb"
        dest.parent.mkdir(parents=True, exist_ok=True)
        whole = whole_lesson is None or student in whole_lesson
        nb = subs[student] if whole else without_demos(subs[student], demos)
        dest.write_text(json.dumps(nb, indent=1))
    return folder


if __name__ == "__main__":
    # python tests/course_scenarios.py OUT_DIR: example submissions for `tinytorch grade 11 OUT_DIR/submissions`
    import sys
    import tempfile
    from pathlib import Path

    from tinytorch.course.authoring.assignments import release as make_release

    out = Path(sys.argv[1]).resolve()
    nbs = Path(__file__).resolve().parents[1] / "nbs"
    with tempfile.TemporaryDirectory() as tmp:
        released = json.loads(make_release(11, nbs, tmp).read_text())
    source = json.loads((nbs / "11_embeddings.ipynb").read_text())
    print(write_submissions(out / "submissions", released, source))


def grade_submissions(base, subs, name, cli, nbs):
    """`tinytorch grade 11 submissions --jobs 2` in `base` on `subs` ({student: notebook}, saved as `name`), as an
    instructor grades; the finished run."""
    import subprocess
    for student, nb in subs.items():
        (base / "submissions" / student).mkdir(parents=True)
        (base / "submissions" / student / name).write_text(json.dumps(nb, indent=1))
    run = subprocess.run(["nice", "-n", "10", *cli, "grade", "11", "submissions", "--course", "course", "--nbs",
                          str(nbs), "--jobs", "2", "--cell-timeout", "30"], cwd=base, capture_output=True,
                         text=True, timeout=1800)
    assert run.returncode in (0, 3), run.stdout[-3000:] + run.stderr[-3000:]
    return run
