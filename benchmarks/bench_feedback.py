"""Feedback pages: CPU seconds per page for `tinytorch.course.grading.feedback.render_feedback` vs stock nbconvert
(`HTMLExporter(template_name='classic', sanitize_html=True)`, a new exporter per page, its own cleaner), side by side.

    .venv/bin/python benchmarks/bench_feedback.py [--pages 5] [--rounds 2]

The notebook is the lesson (nbs/11_embeddings.ipynb) run top to bottom once, every output kept; each page is a graded
copy of it whose code cells carry their own run times in their metadata, as nbclient records them when nbgrader
grades a submission. Each round renders one warm-up page per side, then `--pages` pages per side, the order of the
sides swapped each round. Prints a table and the ratio stock / tinytorch.
"""
import argparse
import copy
import os
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from tinytorch.course.grading.feedback import render_feedback

ROOT = Path(__file__).resolve().parents[1]


def executed_lesson() -> dict:
    nb = nbformat.read(ROOT / "nbs" / "11_embeddings.ipynb", as_version=4)
    os.environ.setdefault("MPLBACKEND", "Agg")
    NotebookClient(nb, timeout=600, allow_errors=True, resources={"metadata": {"path": str(ROOT / "nbs")}}).execute()
    return nb


def graded_copy(nb: dict, student: int) -> dict:
    "`nb` with each code cell's metadata holding its own run time, different for every `student`."
    copied = copy.deepcopy(nb)
    for k, cell in enumerate(copied["cells"]):
        if cell["cell_type"] == "code":
            cell["metadata"]["execution"] = {"iopub.execute_input": f"2026-01-01T{student % 24:02d}:00:{k % 60:02d}Z"}
    return copied


def stock(nb: dict, dest: Path):
    from nbconvert import HTMLExporter
    dest.write_text(HTMLExporter(template_name="classic", sanitize_html=True).from_notebook_node(nb)[0])


def ours(nb: dict, dest: Path):
    render_feedback(nb, "# Feedback", dest)


def seconds_per_page(render, nb: dict, pages: int, first: int, folder: Path) -> float:
    render(graded_copy(nb, first), folder / "warm-up.html")
    start = time.process_time()
    for i in range(pages):
        render(graded_copy(nb, first + 1 + i), folder / f"page{i}.html")
    return (time.process_time() - start) / pages


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    nb = executed_lesson()
    sides = {"stock nbconvert": stock, "tinytorch": ours}
    print(f"{'round':>5}  {'side':<16} {'CPU s per page':>14}")
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            seen = {}
            for name in (list(sides) if r % 2 == 0 else list(sides)[::-1]):
                folder = Path(tmp) / f"{r}-{name.replace(' ', '-')}"
                folder.mkdir()
                seen[name] = seconds_per_page(sides[name], nb, args.pages, 100 * r, folder)
                print(f"{r:>5}  {name:<16} {seen[name]:>14.3f}")
            print(f"{r:>5}  ratio stock / tinytorch: {seen['stock nbconvert'] / seen['tinytorch']:.1f}x")


if __name__ == "__main__":
    main()
