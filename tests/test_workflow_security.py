"""Every GitHub Actions workflow in docs/recipes/ passes zizmor, the GitHub Actions security linter, offline and
with its strictest persona: pinned actions, no persisted credentials, least-privilege token, no template
expansion inside scripts. zizmor comes with the dev extras; with CI=true its absence fails the test."""
import subprocess
from pathlib import Path

import pytest
from requirements import require

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / "docs" / "recipes").glob("*.yml"))


def zizmor() -> str:
    return require("zizmor")


def test_there_are_workflows_to_check():
    assert [p.name for p in WORKFLOWS] == ["grade-shards.yml"]


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_zizmor_finds_nothing(workflow):
    out = subprocess.run([zizmor(), "--offline", "--persona=pedantic", "--no-progress", workflow],
                         capture_output=True, text=True, timeout=300)
    report = out.stdout + out.stderr
    assert out.returncode == 0 and "No findings to report" in report and "suppressed" not in report, report
