"""A one-node Slurm cluster for the tests: munged, slurmctld and slurmd started directly (no systemd), every
file of theirs (configuration, sockets, state, logs) in one temporary folder, and everything stopped after.

Needs Debian's `slurmctld slurmd slurm-client munge` (`.ci/run` installs them) and root: the daemons run as
root and so do the jobs. `why_not()` says, in one sentence, what is missing here."""
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "sinfo")
MUNGE_KEY = Path("/etc/munge/munge.key")


def why_not():
    "None when a cluster can be started here; else the reason in one sentence."
    missing = [name for name in DAEMONS if not shutil.which(name)]
    if missing:
        return (f"Slurm is not installed ({', '.join(missing)} missing; Debian: apt-get install slurmctld slurmd "
                "slurm-client munge)")
    if os.geteuid() != 0:
        return "the test cluster's daemons and jobs run as root, and these tests don't run as root"
    if not MUNGE_KEY.exists():
        return f"{MUNGE_KEY} is missing (the munge package creates it)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _node_line() -> str:
    "This machine as slurmd sees it (CPUs, sockets, cores, memory), reached at 127.0.0.1."
    line = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
    return f"{line} NodeAddr=127.0.0.1 State=UNKNOWN"


def write_config(folder: Path) -> Path:
    node = _node_line()
    name = re.match(r"NodeName=(\S+)", node)[1]
    conf = folder / "slurm.conf"
    conf.write_text(f"""ClusterName=tinytorch-test
SlurmctldHost={name}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={folder}/munge.socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
PlugStackConfig={folder}/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
{node}
PartitionName=test Nodes={name} Default=YES MaxTime=INFINITE State=UP
""")
    (folder / "plugstack.conf").write_text("")
    for sub in ("state", "spool"):
        (folder / sub).mkdir()
    return conf


class Cluster:
    def __init__(self, folder: Path):
        self.folder = folder
        self.conf = write_config(folder)
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.daemons = {}

    def start(self, name, args):
        log = open(self.folder / f"{name}.out", "w")
        self.daemons[name] = subprocess.Popen(args, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                              start_new_session=True)

    def run(self, *args, check=True, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(list(args), env=self.env, capture_output=True, text=True, check=check, **kw)

    def wait_for(self, what, test, timeout=120):
        deadline = time.monotonic() + timeout             # a hang guard only; the daemons usually take a second
        while time.monotonic() < deadline:
            for name, p in self.daemons.items():
                if p.poll() is not None:
                    raise RuntimeError(f"{name} exited ({p.returncode}) while waiting for {what}:\n{self.logs()}")
            if test():
                return
            time.sleep(0.5)
        raise RuntimeError(f"no {what} after {timeout} s:\n{self.logs()}")

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(self.folder.glob("*.log"))
                         + sorted(self.folder.glob("*.out")))

    def node_idle(self) -> bool:
        out = self.run("sinfo", "-h", "-o", "%t", check=False).stdout.split()
        return out == ["idle"]

    def queue_empty(self) -> bool:
        "True when no job is left; AssertionError when one that can never start stays queued (it would wait for ever)."
        left = self.run("squeue", "-h", "-o", "%i %T %r", check=False).stdout.strip()
        stuck = {line for line in left.splitlines() if line.endswith("DependencyNeverSatisfied")}
        if stuck:                     # --kill-on-invalid-dep cancels such a job on the controller's next pass
            self.stuck_since = getattr(self, "stuck_since", None) or time.monotonic()
            assert time.monotonic() - self.stuck_since < 120, f"jobs that can never start stay queued: {stuck}"
        else:
            self.stuck_since = None
        return left == ""

    def jobs(self, job_id) -> dict:
        "job id (array tasks as ID_K) -> (state, exit code), from the controller's memory of finished jobs."
        out = self.run("scontrol", "show", "job", "-o", str(job_id), check=False).stdout
        found = {}
        for line in out.splitlines():
            fields = dict(re.findall(r"(\w+)=(\S*)", line))
            key = fields["JobId"] if "ArrayTaskId" not in fields else f"{fields['ArrayJobId']}_{fields['ArrayTaskId']}"
            found[key] = (fields.get("JobState"), fields.get("ExitCode"), fields.get("Reason"))
        return found

    def stop(self):
        for name in ("slurmd", "slurmctld", "munged"):
            p = self.daemons.get(name)
            if p and p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()


@contextmanager
def cluster(folder: Path):
    "A running one-node cluster (munged, slurmctld, slurmd); every daemon stopped on the way out."
    c = Cluster(folder)
    try:
        c.start("munged", ["munged", "--foreground", "--force", f"--socket={folder}/munge.socket",
                           f"--key-file={MUNGE_KEY}", f"--pid-file={folder}/munged.pid",
                           f"--log-file={folder}/munged.log", f"--seed-file={folder}/munged.seed"])
        c.wait_for("munge socket", lambda: (folder / "munge.socket").exists())
        c.start("slurmctld", ["slurmctld", "-D", "-c", "-f", str(c.conf)])
        c.wait_for("slurmctld answering", lambda: c.run("scontrol", "ping", check=False).returncode == 0)
        c.start("slurmd", ["slurmd", "-D", "-f", str(c.conf), "-N", re.search(r"NodeName=(\S+)", c.conf.read_text())[1]])
        c.wait_for("the node idle", c.node_idle)
        yield c
    finally:
        c.stop()
