"""Nothing a submission leaves behind outlives its sandbox: a small hostile program
(tests/sandbox_probes.py) run through `run_isolated`, as root with a per-job user id, as root
without one, and as a user who is not root. It stores a kernel key, SysV and POSIX IPC objects,
starts a double-forked process of its own session, and writes past the disk limit in every writable
place outside its work folder; a second run and the grading account then look for it all. And a run
that ends touches no other run's processes."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tinytorch.course.isolation.sandbox import sandbox_problem, uid_layer_available

HERE = Path(__file__).resolve().parent
NOT_ROOT = 61_234                      # a user who is not root (no account needed)
DISK = 16                              # MiB: the probes' --disk

pytestmark = pytest.mark.skipif(sandbox_problem() is not None,
                                reason="no bubblewrap sandbox on this machine")


def probe_as(who: str) -> dict:
    cmd = [sys.executable, str(HERE / "sandbox_probes.py"), "user" if who == "not root" else who]
    if who == "not root":
        cmd = ["setpriv", f"--reuid={NOT_ROOT}", f"--regid={NOT_ROOT}", "--clear-groups", *cmd]
    env = {**os.environ, "HOME": "/nonexistent", "TMPDIR": "/tmp", "PYTHONDONTWRITEBYTECODE": "1"}
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd="/")
    assert run.returncode == 0, (run.returncode, run.stdout[-3000:], run.stderr[-3000:])
    return json.loads(run.stdout)


@pytest.fixture(scope="module", params=["uid", "root", "not root"])
def seen(request):
    if request.param in ("uid", "root", "not root") and os.geteuid() != 0:
        pytest.skip("needs root (to grade as root, with a per-job user id, and as another user)")
    if request.param == "uid" and not uid_layer_available():
        pytest.skip("no per-job user id on this machine")
    return probe_as(request.param)


def test_a_kernel_key_is_never_stored(seen):
    assert seen["plant stderr"] == "" and seen["planted"] is not None, seen
    assert seen["planted"]["add_key"] < 0, seen["planted"]
    assert not seen["planted"]["session keyring"], seen["planted"]


def test_a_key_from_one_run_is_not_seen_by_the_next_nor_by_the_grading_account(seen):
    for where in ("next run", "outside"):
        got = seen[where]
        assert got["keys listed"] == [] and got["key read"] is None, (where, got)
        assert not got["key found"], (where, got)


def test_sysv_ipc_and_message_queues_are_out_of_reach(seen):
    planted = seen["planted"]
    assert not planted["shmget"] and not planted["msgget"] and not planted["mq_open"], planted
    for where in ("next run", "outside"):
        got = seen[where]
        assert not (got["shm seen"] or got["msg seen"] or got["mq seen"]), (where, got)


def test_a_double_forked_process_of_its_own_session_is_dead_when_the_run_returns(seen):
    assert seen["sleepers left"] == 0, seen


@pytest.mark.parametrize("place", ["shm", "shm and tmp"])
def test_dev_shm_counts_in_the_disk_limit(seen, place):
    fill = seen[f"fill {place}"]
    written = (sum(v for v in fill["written"].values() if isinstance(v, int))
               if fill["written"] else None)
    assert fill["over_disk"] or (written is not None and written <= DISK), fill


@pytest.mark.parametrize("place", ["root", "dev"])
def test_nothing_can_be_written_in_the_sandbox_root_or_dev(seen, place):
    fill = seen[f"fill {place}"]
    assert fill["written"] is not None, fill
    assert sum(v for v in fill["written"].values() if isinstance(v, int)) == 0, fill



def test_a_run_that_ends_never_kills_another_runs_processes(monkeypatch, tmp_path):
    """Right after a run's program ends, other sandboxes start until one gets the number the run's
    PID namespace had (the kernel gives a gone namespace's number to the next namespace made): it is
    not killed when the run ends. Three runs in turn, each followed by up to 60 other sandboxes."""
    import time
    import tinytorch.course.isolation.sandbox as sandbox

    real, others = sandbox.run_watched, []

    def namespace_of(box) -> int | None:
        for _ in range(200):
            kids = open(f"/proc/{box.pid}/task/{box.pid}/children").read().split()
            try:
                return os.stat(f"/proc/{kids[0]}/ns/pid").st_ino
            except (IndexError, OSError):
                time.sleep(0.01)
        return None

    def then_other_sandboxes(*args, **kwargs):
        run, usage = real(*args, **kwargs)
        number = int(run.stdout.split()[-1])          # the run's PID namespace, as it printed it
        (tmp_path / "other").mkdir(exist_ok=True)
        for attempt in range(60):
            box = subprocess.Popen(sandbox.Sandbox().command(tmp_path / "other") + ["sleep", "120"],
                                   start_new_session=True, stderr=subprocess.DEVNULL)
            same = namespace_of(box) == number
            if same or attempt == 59:     # the one that got the number, or the last: left running
                others.append((box, same))
                break
            os.killpg(box.pid, 9); box.wait()
            time.sleep(0.05)
        return run, usage

    monkeypatch.setattr(sandbox, "run_watched", then_other_sandboxes)
    try:
        for _ in range(3):
            says_its_namespace = "import os; print(os.stat('/proc/self/ns/pid').st_ino)"
            done = sandbox.run_isolated([sys.executable, "-c", says_its_namespace], tmp_path, 60,
                                        None, sandbox.Sandbox())
            assert done.returncode == 0, done
            box, same = others[-1]
            which = "that got the run's namespace number" if same else "started"
            assert box.poll() is None, f"another sandbox {which} as a run ended was killed"
    finally:
        for box, _ in others:
            if box.poll() is None:
                os.killpg(box.pid, 9)
            box.wait()
