"""What a test needs from the machine, asked for in one way: `require(tool)`.

A missing tool skips the test and says what to install, except in CI (`CI=true`), where it fails: CI installs every
tool below, so a test that can't run there is a broken CI, not a test to leave out. `@pytest.mark.requires(tool)` asks
for it before a test runs (tests/conftest.py); `require(tool)` at the top of a test file asks for the whole file.
"""
import importlib
import os
import shutil
import sys
from pathlib import Path

import pytest

IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
DEV_EXTRA = "pip install -e '.[dev]'"
MODULES = ("nbgrader", "jsonschema", "yaml", "playwright", "sphinx", "myst_nb", "sphinx_book_theme", "nbclient")
PROGRAMS = {"bwrap": "bubblewrap is not installed (Debian: apt-get install bubblewrap)",
            "chromium": "Debian's chromium is not installed (as root: apt-get update && apt-get install -y chromium)",
            "zizmor": f"zizmor is not installed (it is in the dev extra: {DEV_EXTRA})"}


def unavailable(reason: str, what: str = "this test"):
    "Skip with `reason`; with CI=true fail instead, since CI must run `what`."
    if IN_CI:
        pytest.fail(f"CI=true, so {what} must run, but {reason}")
    pytest.skip(reason, allow_module_level=True)


def _program(name: str):
    "The program's path: the venv's own bin first (zizmor comes with the dev extra), then PATH."
    return shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)


def _user_accounts():
    "None when tests can make and remove Unix accounts and grade as them; else why not."
    if os.geteuid() != 0:
        return "creating student accounts needs root"
    for tool in ("useradd", "userdel", "runuser"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    return None if _program("bwrap") else PROGRAMS["bwrap"]


def _slurm():
    from slurm_cluster import why_not
    return why_not()


CHECKS = {"slurm": _slurm, "user accounts": _user_accounts}     # tool -> None when usable, else why not
TOOLS = (*MODULES, *PROGRAMS, *CHECKS)


def require(tool: str, what: str = "this test"):
    """The module (a Python package), the path (a program) or None (a check such as "slurm") when `tool` is here;
    else a skip that says what to install (a failure with CI=true)."""
    if tool in MODULES:
        try:
            return importlib.import_module(tool)
        except ImportError as e:
            unavailable(f"{tool} does not import ({e}; {DEV_EXTRA})", what)
    if tool in PROGRAMS:
        return _program(tool) or unavailable(PROGRAMS[tool], what)
    if tool in CHECKS:
        reason = CHECKS[tool]()
        return reason and unavailable(reason, what)
    raise ValueError(f"require({tool!r}): unknown tool; expected one of {', '.join(TOOLS)}")
