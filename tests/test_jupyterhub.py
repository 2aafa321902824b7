"""The course on a JupyterHub. The students' package (`tinytorch release 11 --wheel DIR`): installed into a new
image with `pip install`, it runs the released notebook to its first exercise, and its leak scan finds a solution
line planted in it."""
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from requirements import require

require("nbgrader")

from jupyterhub_image import RUN_TO_FIRST_ERROR, make_image  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "nbs" / "11_embeddings.ipynb"
CLI = Path(sys.executable).parent / "tinytorch"
pytestmark = pytest.mark.course


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    "The students' wheel, written by the command an instructor runs."
    dist = tmp_path_factory.mktemp("dist")
    run = subprocess.run([CLI, "release", "11", "--wheel", dist, "--nbs", ROOT / "nbs"], capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, f"{run.stdout[-2000:]}{run.stderr[-2000:]}"
    wheels = list(dist.glob("tinytorch-*.whl"))
    assert len(wheels) == 1 and f"students' wheel written: {wheels[0]}" in run.stdout, (wheels, run.stdout)
    return wheels[0]


@pytest.fixture(scope="module")
def image(wheel, tmp_path_factory) -> Path:
    "The Python of a hub image into which the wheel was pip-installed."
    return make_image(tmp_path_factory.mktemp("image"), wheel)


def test_the_released_notebook_runs_on_the_wheel_to_its_first_exercise(image, release_11, tmp_path):
    nb = tmp_path / release_11.name
    shutil.copy(release_11, nb)
    run = subprocess.run([image, "-c", RUN_TO_FIRST_ERROR, nb, tmp_path], capture_output=True, text=True,
                         timeout=600, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen["origin"].startswith(str(image.parent.parent)), seen["origin"]     # the wheel's package
    assert seen["error"] == "NotImplementedError", seen
    first = seen["first_solution"]
    assert first is not None and len(seen["error_cells"]) == 1 and seen["error_cells"][0] > first, seen
    before = [i for i in seen["code_cells"] if i <= first]
    assert set(before) <= set(seen["ran"]), seen                 # the imports and everything up to the exercise


def test_the_wheel_holds_stubs_and_its_leak_scan_finds_a_planted_solution_line(wheel, tmp_path):
    from tinytorch.course.leaks import secret_lines
    from tinytorch.course.workspace import wheel_leaks
    solution = "np.add.at(summed, slot.reshape(-1), rows)"
    secrets = secret_lines(SOURCE)
    assert solution in secrets
    with zipfile.ZipFile(wheel) as z:
        stubs = z.read("tinytorch/core/embeddings.py").decode()
    assert "raise NotImplementedError" in stubs and solution not in stubs
    assert wheel_leaks(wheel, secrets) == []
    planted = tmp_path / wheel.name
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(planted, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename == "tinytorch/core/embeddings.py":
                data += f"\n\ndef _planted(summed, slot, rows):\n    {solution}\n".encode()
            dst.writestr(item, data)
    assert wheel_leaks(planted, secrets) == [(f"{wheel.name}!tinytorch/core/embeddings.py", solution)]
