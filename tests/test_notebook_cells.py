"""Every notebook's non-exported code cells, run in order against the exported package.

One item per cell that holds code. A cell that checks something (an `assert`, a `test_*` function,
or a call to a check helper such as `test_eq`, `test_fail`, `pytest.raises` or `np.testing.assert_*`) is named
`<notebook>::<test function | grade_id | cell[id]>`; a demo cell, which passes unless it raises, is a
smoke item named `smoke-<notebook>::<cell name>`. Cells holding only `#|` directives or comments run
with the next item and are not items of their own.
"""
from pathlib import Path

import pytest
from notebook_items import holds_code, item_id

from tinytorch.course.checking.nbtests import NotebookRun, check_exports

ROOT = Path(__file__).resolve().parents[1]


def _notebooks(config):
    "The lesson's notebooks (at the top of the folder), then the tooling's (in its folders)."
    folder = Path(config.getoption("--nbs-dir") or ROOT / "nbs")
    nested = (p for p in folder.glob("*/**/*.ipynb")
              if not any(part.startswith((".", "_")) for part in p.relative_to(folder).parts))
    return sorted(folder.glob("[0-9]*.ipynb")) + sorted(nested)


def pytest_generate_tests(metafunc):
    notebooks = _notebooks(metafunc.config)
    if "notebook_cell" in metafunc.fixturenames:
        runs = [NotebookRun(nb) for nb in notebooks]
        params = [pytest.param((run, cell), id=item_id(run, cell))
                  for run in runs for cell in run.runnable_cells if holds_code(cell.source)]
        metafunc.parametrize("notebook_cell", params)
    if "notebook" in metafunc.fixturenames:
        metafunc.parametrize("notebook", notebooks, ids=[nb.stem for nb in notebooks])


def test_notebook_cell(notebook_cell):
    run, cell = notebook_cell
    run.run_cell(cell)


def test_exported_names_are_in_all(notebook):
    assert check_exports(notebook) == []
