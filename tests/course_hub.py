"""A JupyterHub on docs/recipes/jupyterhub/jupyterhub_config.py for the tests, started as root and
stopped with everything it started: two local Unix accounts (an instructor, a student) with
passwords, nbgrader's exchange at a shared root, configurable-http-proxy from npm, the students'
image as every user's server, and the formgrader as the hub's service. Users and the service each
have their own origin under `hub.localhost` (Chromium resolves every `*.localhost` name to this
machine)."""

import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "docs" / "recipes" / "jupyterhub"
COURSE_ID, ASSIGNMENT = "tt101", "11_embeddings"
PROXY = "configurable-http-proxy"
PREFIX = Path(sysconfig.get_paths()["data"])  # this environment's own Jupyter folders


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def open_the_way_to(path: Path, opened: dict):
    """The `x` bit for others on every folder above `path` (old modes noted in `opened`, to put
    back)."""
    for folder in reversed(path.absolute().parents):
        mode = folder.stat().st_mode & 0o7777
        if not mode & 0o001:
            opened[folder] = mode
            os.chmod(folder, mode | 0o001)


class Hub:
    "Where the hub is and who is on it; `as_user` runs a command as one of its Unix accounts."

    def __init__(self, base: Path, port: int, instructor: str, student: str, password: str):
        self.base, self.port, self.password = base, port, password
        self.instructor, self.student = instructor, student
        self.exchange, self.course, self.graded = (
            base / "exchange",
            base / COURSE_ID,
            base / f"{COURSE_ID}-graded",
        )
        self.config_dir = base / "jupyter-config"
        self.url = f"http://hub.localhost:{port}"
        self.formgrader = (
            f"http://formgrader--service.hub.localhost:{port}/services/formgrader/formgrader"
        )
        self.log = base / "hub" / "jupyterhub.log"

    def user_url(self, name: str) -> str:
        return f"http://{name}.hub.localhost:{self.port}/user/{name}"

    def as_user(
        self, name: str, *args, cwd=None, timeout=900, input=None
    ) -> subprocess.CompletedProcess:
        """Run ARGS as the Unix user `name` in a clean environment (their home, the course's
        nbgrader config)."""
        home = Path(pwd.getpwnam(name).pw_dir)
        env = {
            "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
            "HOME": str(home),
            "USER": name,
            "LOGNAME": name,
            "PYTHONDONTWRITEBYTECODE": "1",
            "MPLBACKEND": "Agg",
            "JUPYTER_CONFIG_PATH": str(self.config_dir),
            "TINYTORCH_CACHE": str(home / ".cache" / "tinytorch"),
        }
        return subprocess.run(
            [
                "runuser",
                "-u",
                name,
                "--",
                "env",
                "-i",
                *(f"{k}={v}" for k, v in env.items()),
                *map(str, args),
            ],
            cwd=cwd or home,
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
        )


def _wait_for(url: str, hub: subprocess.Popen, log: Path, seconds: float = 180):
    """Return once `url` answers 200 (the proxy routes to the hub); fail with the hub's log if it
    stops first."""
    deadline = time.monotonic() + seconds
    while hub.poll() is None and time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=5).close()
            return
        except (
            urllib.error.URLError,
            OSError,
        ):  # refused, or 404 until the hub's route is in the proxy
            time.sleep(0.5)
    raise AssertionError(
        f"the hub did not answer {url} (exit {hub.poll()}); its log:\n"
        f"{log.read_text(errors='replace')[-4000:]}"
    )


def _image_environment(image_python: Path) -> dict:
    """What a user's server needs beyond the image's Python here: the image borrows this
    environment's Jupyter data and config folders (JupyterLab's assets, nbgrader's server
    extensions), as `make_image` borrows its packages; in a real image they are its own."""
    prefix = Path(sysconfig.get_paths()["data"])
    return {
        "JUPYTER_PATH": str(prefix / "share" / "jupyter"),
        "JUPYTERLAB_DIR": str(prefix / "share" / "jupyter" / "lab"),
        "PATH": f"{image_python.parent}:/usr/bin:/bin",
    }


@contextmanager
def course_hub(image_python: Path):
    """A running hub with a new instructor and student (passwords set), the course's folders made
    and owned as on a real hub; everything stopped and removed afterwards."""
    proxy = shutil.which(PROXY)
    tag = secrets.token_hex(3)
    instructor, student, password = f"ttinst{tag}", f"ttstu{tag}", secrets.token_urlsafe(12)
    base = Path(tempfile.mkdtemp(prefix="tinytorch-hub-"))
    os.chmod(base, 0o755)
    made, opened, hub_proc = [], {}, None
    try:
        for name in (instructor, student):
            subprocess.run(
                ["useradd", "-m", "-s", "/bin/sh", name], check=True, capture_output=True
            )
            made.append(name)
        subprocess.run(
            ["chpasswd"],
            input=f"{instructor}:{password}\n{student}:{password}\n",
            text=True,
            check=True,
            capture_output=True,
        )
        open_the_way_to(Path(sys.executable), opened)
        hub = Hub(base, free_port(), instructor, student, password)
        hub.exchange.mkdir()
        os.chmod(hub.exchange, 0o1777)  # nbgrader's exchange: everyone writes, sticky
        hub.config_dir.mkdir()
        config = (
            (RECIPE / "nbgrader_config.py")
            .read_text()
            .replace("/srv/nbgrader/exchange", str(hub.exchange))
        )
        (hub.config_dir / "nbgrader_config.py").write_text(config)
        uid = pwd.getpwnam(instructor)
        for folder in (hub.course, hub.graded):
            folder.mkdir()
            os.chown(folder, uid.pw_uid, uid.pw_gid)
        (base / "hub").mkdir()
        extra = base / "hub" / "test_config.py"
        environment = {
            **_image_environment(image_python),
            "JUPYTER_CONFIG_PATH": f"{hub.config_dir}:{PREFIX / 'etc' / 'jupyter'}",
        }
        extra.write_text(
            "c = get_config()  # noqa\n"
            f"c.ConfigurableHTTPProxy.command = [{proxy!r}]\n"
            f"c.ConfigurableHTTPProxy.api_url = 'http://127.0.0.1:{free_port()}'\n"
            f"c.JupyterHub.hub_bind_url = 'http://127.0.0.1:{free_port()}'\n"
            f"c.Spawner.environment = {environment!r}\n"
            "c.Spawner.start_timeout = 180\nc.Spawner.http_timeout = 180\n"
            "c.JupyterHub.cleanup_servers = True\nc.JupyterHub.cleanup_proxy = True\n"
        )
        env = {
            **os.environ,
            "TINYTORCH_COURSE": COURSE_ID,
            "TINYTORCH_HUB_URL": hub.url,
            "TINYTORCH_HUB_BIND_URL": f"http://127.0.0.1:{hub.port}",
            "TINYTORCH_INSTRUCTORS": instructor,
            "TINYTORCH_STUDENTS": student,
            "TINYTORCH_GRADED": str(hub.graded),
            "TINYTORCH_INSTRUCTOR_BIN": str(Path(sys.executable).parent / "tinytorch"),
            "TINYTORCH_IMAGE_PYTHON": str(image_python),
            "TINYTORCH_FORMGRADER_PORT": str(free_port()),
            "TINYTORCH_HUB_EXTRA_CONFIG": str(extra),
        }
        with open(hub.log, "w") as sink:
            hub_proc = subprocess.Popen(
                [sys.executable, "-m", "jupyterhub", "-f", RECIPE / "jupyterhub_config.py"],
                cwd=base / "hub",
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        _wait_for(f"http://127.0.0.1:{hub.port}/hub/health", hub_proc, hub.log)
        hub.process = hub_proc
        yield hub
    finally:
        if hub_proc is not None:
            _stop(hub_proc, base / "hub" / "jupyterhub-proxy.pid")
        for name in made:  # anything still running as the accounts made here (servers, kernels)
            subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
        for name in made:
            subprocess.run(["userdel", "-r", "-f", name], capture_output=True)
        for folder, mode in opened.items():
            os.chmod(folder, mode)
        shutil.rmtree(base, ignore_errors=True)


def _stop(process: subprocess.Popen, proxy_pid_file: Path):
    """SIGTERM to the hub (it stops users' servers, its service and its proxy), then its whole
    process group, and its proxy (in a session of its own) if a hub that died left it running."""
    process.terminate()
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()
    try:
        pid = int(proxy_pid_file.read_text().strip())
        if PROXY in Path(f"/proc/{pid}/cmdline").read_text():
            os.kill(pid, signal.SIGKILL)
    except (OSError, ValueError):
        pass
