"""JupyterHub for one tinytorch course (module 11): local Unix accounts, nbgrader's exchange, the
students' package in the image, and the guarded formgrader as a hub service that only the course's
instructors reach.

Start it as root (it starts each user's server as that user): `jupyterhub -f jupyterhub_config.py`.
Every value you may need to change is read from an environment variable first, with the default
shown; the instructor guide's JupyterHub section lists the steps around it. tests/test_jupyterhub.py
runs a hub on this file."""

import os

c = get_config()  # noqa: F821 (JupyterHub's config loader defines it)

COURSE = os.environ.get("TINYTORCH_COURSE", "tt101")
# Each user and the formgrader get their own origin:
# <user>.hub.example.edu and formgrader--service.hub.example.edu
HUB_URL = os.environ.get("TINYTORCH_HUB_URL", "https://hub.example.edu")
# where the proxy listens (with TLS in front of it)
BIND_URL = os.environ.get("TINYTORCH_HUB_BIND_URL", "http://:8000")
INSTRUCTORS = os.environ.get("TINYTORCH_INSTRUCTORS", "instructor").split()
STUDENTS = os.environ.get("TINYTORCH_STUDENTS", "").split()
# The Unix account the formgrader runs as, and the graded course folder it serves (that account's)
GRADER = os.environ.get("TINYTORCH_GRADER", INSTRUCTORS[0])
GRADED = os.environ.get("TINYTORCH_GRADED", f"/srv/course/{COURSE}-graded")
# The instructor's install (`pip install 'tinytorch[course,hub]'` from the course repository) ...
INSTRUCTOR_TINYTORCH = os.environ.get(
    "TINYTORCH_INSTRUCTOR_BIN", "/opt/tinytorch-instructor/bin/tinytorch"
)
# ... and the students' image: a Python with `pip install jupyterhub jupyterlab nbgrader WHEEL`,
# WHEEL from `tinytorch release 11 --wheel DIR` (no solution in it)
IMAGE_PYTHON = os.environ.get("TINYTORCH_IMAGE_PYTHON", "/opt/course-image/bin/python")
FORMGRADER_PORT = int(os.environ.get("TINYTORCH_FORMGRADER_PORT", "9999"))
SERVICE = "formgrader"

c.JupyterHub.bind_url = BIND_URL
# JupyterHub's docs: with one origin for the hub and every user's server, a page one user opens can
# act on another's server.
c.JupyterHub.subdomain_host = HUB_URL

# Local Unix accounts, logged in with their passwords (PAM); only the course's people
c.JupyterHub.authenticator_class = "pam"
c.Authenticator.allowed_users = set(INSTRUCTORS + STUDENTS)
# a hub admin reaches every server and every service: keep instructors out
c.Authenticator.admin_users = set()

# Each user's server runs as that user, from the students' image
c.Spawner.cmd = [IMAGE_PYTHON, "-m", "jupyterhub.singleuser"]
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~"

c.JupyterHub.load_groups = {
    f"instructors-{COURSE}": {"users": INSTRUCTORS},
    f"students-{COURSE}": {"users": STUDENTS},
}
# Only the instructors' group may open the formgrader service; a student who tries gets 403.
c.JupyterHub.load_roles = [
    {
        "name": f"formgrader-{COURSE}",
        "description": f"score {COURSE}'s written answers in the formgrader",
        "groups": [f"instructors-{COURSE}"],
        "scopes": [f"access:services!service={SERVICE}"],
    }
]
c.JupyterHub.services = [
    {
        "name": SERVICE,
        "url": f"http://127.0.0.1:{FORMGRADER_PORT}",  # loopback only: through the hub's proxy
        "command": [INSTRUCTOR_TINYTORCH, "formgrade", GRADED, "--hub-service"],
        "user": GRADER,
        "cwd": GRADED,
        "oauth_no_confirm": True,
        "environment": {"PATH": os.path.dirname(INSTRUCTOR_TINYTORCH) + ":/usr/bin:/bin"},
    }
]

# more settings of your own, e.g. the proxy's command
extra = os.environ.get("TINYTORCH_HUB_EXTRA_CONFIG")
if extra:
    load_subconfig(extra)  # noqa: F821
