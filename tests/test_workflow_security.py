"""Every GitHub Actions workflow in docs/recipes/ passes zizmor, the GitHub Actions security linter, offline and
with its strictest persona: pinned actions, no persisted credentials, least-privilege token, no template
expansion inside scripts. zizmor comes with the dev extras; with CI=true its absence fails the test."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / "docs" / "recipes").glob("*.yml"))


def zizmor() -> str:
    found = shutil.which("zizmor", path=str(Path(sys.executable).parent)) or shutil.which("zizmor")
    if not found:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but zizmor is not installed (it is in the dev extras: pip install -e '.[dev]')")
        pytest.skip("zizmor is not installed (pip install -e '.[dev]')")
    return found


def test_there_are_workflows_to_check():
    assert [p.name for p in WORKFLOWS] == ["grade-shards.yml"]


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_zizmor_finds_nothing(workflow):
    out = subprocess.run([zizmor(), "--offline", "--persona=pedantic", "--no-progress", workflow],
                         capture_output=True, text=True, timeout=300)
    report = out.stdout + out.stderr
    assert out.returncode == 0 and "No findings to report" in report and "suppressed" not in report, report
