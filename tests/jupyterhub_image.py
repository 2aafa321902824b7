"""A JupyterHub image for the tests, in seconds: a new virtual environment into which the students'
wheel is installed with `pip install --no-index` (the one step a hub image needs), its other
requirements already there.

Installing them from the package index takes minutes, so the image's base layer is this
environment's own site-packages, seen through a folder of links that leaves out tinytorch (the
instructor's install, with every solution), pip and every `.pth` file: `import tinytorch` in the
image finds the wheel's package or nothing."""

import subprocess
import sys
import sysconfig
from pathlib import Path

LEFT_OUT = ("tinytorch", "__editable__", "pip")


def _left_out(name: str) -> bool:
    return name.endswith(".pth") or any(
        name == p or name.startswith((f"{p}-", f"{p}.", f"{p}_")) for p in LEFT_OUT
    )


def make_image(folder: Path, wheel: Path) -> Path:
    "A virtual environment in `folder` with `wheel` installed on the base layer; its Python."
    folder.mkdir(parents=True, exist_ok=True)
    base = folder / "base-layer"
    base.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not _left_out(entry.name):
            (base / entry.name).symlink_to(entry)
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(purelib) / "course-image-base.pth").write_text(f"{base}\n")
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--no-index", wheel],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, (
        f"pip install {wheel.name} failed:\n{install.stdout[-2000:]}{install.stderr[-2000:]}"
    )
    return python


# Run by the image's Python: the notebook with a first cell that says where tinytorch comes from,
# top to bottom,
# stopping at the first error; prints JSON {origin, error, error_cell, first_solution}.
RUN_TO_FIRST_ERROR = r"""
import json, sys
import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
nb = nbformat.read(sys.argv[1], as_version=4)
nb.cells.insert(0, nbformat.v4.new_code_cell("import tinytorch; print(tinytorch.__file__)"))
solutions = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"
             and c.get("metadata", {}).get("nbgrader", {}).get("solution")]
client = NotebookClient(nb, timeout=120, kernel_name="python3",
                        resources={"metadata": {"path": sys.argv[2]}})
error = None
try:
    client.execute()
except CellExecutionError as e:
    error = e.ename
ran = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.get("execution_count")]
failed = [i for i, c in enumerate(nb.cells)
          if any(o.get("output_type") == "error" for o in c.get("outputs", []))]
print(json.dumps({"origin": nb.cells[0].outputs[0]["text"].strip(), "error": error, "ran": ran,
                  "error_cells": failed, "first_solution": solutions[0] if solutions else None,
                  "code_cells": [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]}))
"""
