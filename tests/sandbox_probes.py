"""Small programs a hostile submission would run, each run through `run_isolated` in the grading sandbox, and the
driver tests/test_sandbox_state.py starts (as root, or as a user who is not root):

    python sandbox_probes.py uid|root|user

`uid`: as root with a per-job user id (the same id for both runs, as one job's next submission gets it); `root`: as
root without one; `user`: as whoever runs it. Prints one JSON object: what the first run planted, what a second run
and the grading account itself found of it afterwards, and what the runs could write outside their work folder."""
import ctypes
import json
import os
import secrets
import sys
import tempfile
from pathlib import Path

# add_key, request_key, keyctl on each machine the course runs on
KEY_CALLS = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}[os.uname().machine]

PLANT = r'''
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
add_key, request_key, keyctl = KEY_CALLS
token = sys.argv[1]
def call(*a):
    r = libc.syscall(*a)
    return r if r >= 0 else -ctypes.get_errno()
out = {}
data = b"hidden-" + token.encode()
key = call(add_key, b"user", ("tt-" + token).encode(), data, len(data), -4)    # the user keyring
out["add_key"] = key
if key > 0:
    out["readable by all"] = call(keyctl, 5, key, 0x3f3f3f3f) == 0                 # KEYCTL_SETPERM
out["session keyring"] = call(keyctl, 0, -3, 0) > 0                                 # KEYCTL_GET_KEYRING_ID
ipc = int(token[-6:], 16)
out["shmget"] = libc.shmget(ipc, 1 << 20, 0o1000 | 0o666) >= 0
out["msgget"] = libc.msgget(ipc, 0o1000 | 0o666) >= 0
rt = ctypes.CDLL("librt.so.1", use_errno=True)
out["mq_open"] = rt.mq_open(("/tt" + token).encode(), os.O_CREAT | os.O_RDWR, 0o666, None) >= 0
if os.fork() == 0:                  # a process that means to outlive the run: double fork, its own session
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", SLEEP])
    os._exit(0)
os.wait()
print(json.dumps(out))
'''

LOOK = r'''
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
add_key, request_key, keyctl = KEY_CALLS
token = sys.argv[1]
out = {"keys listed": [], "key read": None}
try:
    out["keys listed"] = [l for l in open("/proc/keys") if "tt-" + token in l]
except OSError:
    pass
for line in out["keys listed"]:
    buf = ctypes.create_string_buffer(256)
    n = libc.syscall(keyctl, 11, int(line.split()[0], 16), buf, 256)                 # KEYCTL_READ
    out["key read"] = buf.raw[:n].decode() if n > 0 else None
found = libc.syscall(keyctl, 10, -4, b"user", ("tt-" + token).encode(), 0)        # KEYCTL_SEARCH
out["key found"] = found > 0
ipc = int(token[-6:], 16)
out["shm seen"] = libc.shmget(ipc, 0, 0) >= 0
out["msg seen"] = libc.msgget(ipc, 0) >= 0
rt = ctypes.CDLL("librt.so.1", use_errno=True)
out["mq seen"] = rt.mq_open(("/tt" + token).encode(), os.O_RDONLY, 0, None) >= 0
print(json.dumps(out))
'''

FILL = r'''
import json, os, sys, time
written = {}
for spec in sys.argv[1:]:           # FOLDER:MIB, in turn, 1 MiB a file
    folder, mib = spec.rsplit(":", 1)
    n = 0
    try:
        for i in range(int(mib)):
            with open(os.path.join(folder, f"fill-{i}"), "wb") as f:
                f.write(b"x" * (1 << 20))
            n += 1
    except OSError as e:
        written[folder + " stopped"] = e.strerror
    written[folder] = n
print(json.dumps(written), flush=True)
time.sleep(3)                       # the watch looks a few times a second
'''


def sleep_arg(token: str) -> str:
    "The sleeper's one argument: a duration nobody else would pick, so that it can be found in /proc."
    return f"{300 + int(token[-6:], 16) % 1000}.{int(token[:2], 16)}7"


def processes_sleeping(arg: str) -> list:
    "Pids of `sleep ARG` processes on the machine."
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")[:2] == [b"sleep", arg.encode()]:
                found.append(int(pid))
        except OSError:
            pass
    return found


def program(text: str, token: str) -> str:
    return text.replace("KEY_CALLS", repr(KEY_CALLS)).replace("SLEEP", repr(sleep_arg(token)))


def run(uid, text: str, *args, token: str = "00000000", limits=None):
    "(the CompletedProcess of `text` run in the grading sandbox with `args`, its stdout as JSON or None)."
    from tinytorch.course.isolation.sandbox import Sandbox, run_isolated
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "probe.py").write_text(program(text, token))
        done = run_isolated([sys.executable, "probe.py", *args], work, 60, uid, Sandbox(), limits=limits)
    try:
        return done, json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return done, None


def forget(token: str):
    "Invalidate every key a probe with `token` left behind (where this account may), so that nothing outlives the test."
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        for line in open("/proc/keys"):
            if "tt-" + token in line:
                libc.syscall(KEY_CALLS[2], 21, int(line.split()[0], 16))           # KEYCTL_INVALIDATE
    except OSError:
        pass


def probe(uid) -> dict:
    from tinytorch.course.isolation.limits import Limits
    token = secrets.token_hex(4)
    out = {}
    try:
        first, out["planted"] = run(uid, PLANT, token, token=token)
        out["plant stderr"] = first.stderr[-2000:]
        out["sleepers left"] = len(processes_sleeping(sleep_arg(token)))
        second, out["next run"] = run(uid, LOOK, token, token=token)
        out["look stderr"] = second.stderr[-2000:]
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "look.py").write_text(program(LOOK, token))
            import subprocess
            outside = subprocess.run([sys.executable, str(Path(tmp) / "look.py"), token], capture_output=True,
                                     text=True)
            out["outside"] = json.loads(outside.stdout)
        small = Limits(None, None, 16 << 20)
        for name, specs in {"shm": ["/dev/shm:64"], "shm and tmp": ["/tmp:12", "/dev/shm:12"],
                            "root": ["/:64"], "dev": ["/dev:64"]}.items():
            done, written = run(uid, FILL, *specs, limits=small)
            out[f"fill {name}"] = {"written": written, "over_disk": done.usage.over_disk,
                                   "returncode": done.returncode, "stderr": done.stderr[-1000:]}
    finally:
        forget(token)
        for pid in processes_sleeping(sleep_arg(token)):
            os.kill(pid, 9)
    return out


if __name__ == "__main__":
    if sys.argv[1] == "uid":
        from tinytorch.course.isolation.sandbox import claimed_uids
        with claimed_uids(1) as (job_uid,):
            print(json.dumps(probe(job_uid)))
    else:
        print(json.dumps(probe(None)))
