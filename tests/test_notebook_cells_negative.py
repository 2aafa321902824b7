"""The notebook-cell collector must catch what nbdev-test cannot: package code that calls a helper
defined only in a non-exported cell (the upstream `EmbeddingLayer(pos_encoding='sinusoidal')` bug)."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from notebook_items import cell_checks, holds_code

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _notebook(helper_exported: bool) -> dict:
    def code(cid, src):
        return {"cell_type": "code", "execution_count": None, "id": cid, "metadata": {}, "outputs": [], "source": src}
    helper_prefix = "#| export\n" if helper_exported else ""
    return {"nbformat": 4, "nbformat_minor": 5,
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
            "cells": [
                code("exp", "#| default_exp core.probe"),
                code("helper", helper_prefix + "def _scale(x):\n    return 2 * x"),
                code("api", "#| export\ndef doubled(x):\n    \"Twice x.\"\n    return _scale(x)"),
                code("test", "#| points: 1\ndef test_doubled():\n    assert doubled(3) == 6\n\ntest_doubled()"),
                code("demo", "doubled(21)"),
            ]}


def _project(tmp_path, helper_exported):
    proj = tmp_path / ("ok" if helper_exported else "broken")
    (proj / "nbs").mkdir(parents=True)
    shutil.copy(ROOT / "pyproject.toml", proj / "pyproject.toml")
    shutil.copytree(ROOT / "tinytorch", proj / "tinytorch", ignore=shutil.ignore_patterns("__pycache__"))
    (proj / "nbs" / "50_probe.ipynb").write_text(json.dumps(_notebook(helper_exported)))
    subprocess.run([BIN / "nbdev-export"], cwd=proj, check=True, capture_output=True)
    return proj


def _collector(proj):
    return subprocess.run(
        [sys.executable, "-m", "pytest", str(ROOT / "tests" / "test_notebook_cells.py"), "-o", "addopts=", "-q", "-p", "no:cacheprovider",
         "-rA", "--nb-package-root", str(proj), "--nbs-dir", str(proj / "nbs")],
        cwd=ROOT, capture_output=True, text=True)


@pytest.mark.skipif(not (BIN / "nbdev-export").exists(), reason="needs nbdev (the dev extra)")
def test_collector_fails_where_nbdev_test_passes(tmp_path):
    proj = _project(tmp_path, helper_exported=False)
    nbdev = subprocess.run([BIN / "nbdev-test", "nbs/50_probe.ipynb"], cwd=proj, capture_output=True, text=True)
    assert nbdev.returncode == 0, f"nbdev-test should pass on the notebook itself:\n{nbdev.stdout}\n{nbdev.stderr}"
    result = _collector(proj)
    assert result.returncode == 1, result.stdout[-3000:]
    assert "50_probe::test_doubled" in result.stdout and "NON-exported cell" in result.stdout, result.stdout[-3000:]


@pytest.mark.skipif(not (BIN / "nbdev-export").exists(), reason="needs nbdev (the dev extra)")
def test_collector_passes_once_the_helper_is_exported(tmp_path):
    result = _collector(_project(tmp_path, helper_exported=True))
    assert result.returncode == 0, result.stdout[-3000:]
    # the directive-only cell runs with the next item; the test cell is a checked item, the demo a smoke item
    assert "3 passed" in result.stdout, result.stdout[-500:]
    for item in ("50_probe::test_doubled", "smoke-50_probe::cell[demo]"):
        assert f"PASSED tests/test_notebook_cells.py::test_notebook_cell[{item}]" in result.stdout, result.stdout[-1500:]


@pytest.mark.parametrize("source, checks", [
    ("assert x == 1", True),
    ("def test_x():\n    pass", True),
    ("test_eq(f(2), 4)", True),
    ("test_fail(lambda: f(-1), contains='negative')", True),
    ("np.testing.assert_allclose(a, b)", True),
    ("for i in range(3):\n    if i:\n        assert i > 0", True),
    ("print(f(2))", False),
    ("x = f(2)\nx", False),
    ("%timeit f(2)\nassert_like = 3", False),
    ("with pytest.raises(ValueError):\n    f(-1)", True),
])
def test_cell_checks_decides_from_the_source(source, checks):
    assert cell_checks(source) is checks


@pytest.mark.parametrize("source, code", [
    ("#| default_exp core.x", False), ("#| hide\n# a note\n\n", False), ("#| hide\nx = 1", True), ("%load_ext x", False),
])
def test_directive_only_cells_hold_no_code(source, code):
    assert holds_code(source) is code
