"""Typical wrong attempts at module 11's exercises, each put into the student release with every other
part solved: the visible tests must take the points of the right part, with a message that says what
was expected and what came back.

One release is built; each wrong attempt is then exported the way `tinytorch grade` exports a
submission (its `#| export` cells, in one file) and re-checked the way `tinytorch grade` re-checks it
(`tinytorch.course.recheck`): the release's test cells run against that file in a fresh process. One
attempt also goes through the real `tinytorch test 11` command, which runs the whole notebook in a kernel.

`--nbs-dir DIR` takes the lesson from DIR instead of nbs/ (to check another version of its tests).
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("nbgrader")

from course_scenarios import replace, solve  # noqa: E402
from tinytorch.course.assignments import graded_parts, release  # noqa: E402
from tinytorch.course.grading import exported_source  # noqa: E402
from tinytorch.course.recheck import new_token, read_results, recheck_command  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CLI = Path(sys.executable).parent / "tinytorch"

# name: (solution cell, code in the solution, the wrong code, the part that must lose its points,
#        words its message must contain, other parts allowed to fail because they use the broken code)
MISTAKES = {
    "negative ids accepted": (
        "as-ids", "if ids.min() < 0 or ids.max() >= vocab_size:", "if ids.max() >= vocab_size:",
        "test_as_token_ids", ["expected TokenIdError", "returned [-1]"], {"test_lookup_rows"}),
    "plain ValueError for a bad id": (
        "as-ids", "raise TokenIdError(f\"token id", "raise ValueError(f\"token id",
        "test_as_token_ids", ["raised ValueError", "expected TokenIdError"], {"test_lookup_rows"}),
    "only float ids refused (bool passes)": (
        "as-ids", "if ids.dtype.kind not in ('i', 'u'):", "if ids.dtype.kind == 'f':",
        "test_as_token_ids", ["as_token_ids([True, False], 5) returned", "expected TypeError: dtype bool"], set()),
    "float ids truncated instead of refused": (
        "as-ids", "if ids.dtype.kind not in ('i', 'u'):", "if ids.dtype.kind == 'f':\n        ids = ids.astype(np.int64)\n    if ids.dtype.kind not in ('i', 'u'):",
        "test_as_token_ids", ["as_token_ids([1.0, 2.0], 5) returned", "expected TypeError: dtype float64"], set()),
    "float64 table": (
        "init", "table = rng.random(shape, dtype=np.float32)", "table = rng.random(shape)",
        "test_init_embedding_table", ["expected a float32 table", "got float64"], set()),
    "lookup without the id check": (
        "lookup", "checked = as_token_ids(ids, table.shape[0])\n    return table[checked]", "return table[np.asarray(ids)]",
        "test_lookup_rows", ["expected TokenIdError", "returned"], set()),
    "lookup reads the wrong rows": (
        "lookup", "return table[checked]", "return table[np.sort(checked, axis=-1)]",
        "test_lookup_rows", ["first wrong position at [0, 0]: expected [6.0, 7.0, 8.0], got [0.0, 1.0, 2.0]"], set()),
    "duplicate ids overwrite": (
        "scatter", "np.add.at(dense, flat_ids, rows)", "dense[flat_ids] += rows",
        "test_scatter_add_rows", ["first wrong row at [3]: expected [101.0, 202.0], got [100.0, 200.0]",
                                  "id 3 occurs twice"], set()),
    "duplicate ids overwrite (row-sparse)": (
        "scatter", "np.add.at(summed, slot.reshape(-1), rows)", "summed[slot.reshape(-1)] += rows",
        "test_sum_rows_by_id", ["first wrong row at [1]: expected [101.0, 202.0], got [100.0, 200.0]", "id 3 occurs twice"],
        set()),
    "float64 scatter-add": (
        "scatter", "dense = np.zeros((num_rows,) + rows.shape[1:], dtype=rows.dtype)",
        "dense = np.zeros((num_rows,) + rows.shape[1:])",
        "test_scatter_add_rows", ["expected float32 like the rows", "got float64"], set()),
    "forward not connected to the weight": (
        "embedding", "return Tensor._from_op(rows, (weight,), grad_fn)", "return Tensor(rows)",
        "test_embedding_forward", ["not connected to embed.weight", "requires_grad is False"],
        {"test_embedding_backward", "test_embedding_sparse_gradient", "test_embedding_runs_on_its_kernels",
         "test_token_position_embedding", "test_embedding_integration"}),
    "padding row gets gradient (skip=padding_idx forgotten)": (
        "embedding", " skip=pad,", "",
        "test_embedding_backward", ["first wrong row at [0]", "padding row (id 0) must get no gradient",
                                    "skip=self.padding_idx"],
        {"test_embedding_sparse_gradient", "test_embedding_integration"}),
    "the layer's backward ignores its kernels (the library's scatter-add)": (
        "embedding", "add_rows=kernels.add_rows_at", "add_rows=library_kernels.add_rows_at",
        "test_embedding_runs_on_its_kernels", ["self.kernels.add_rows_at", "expected the calls ['lookup_rows', 'add_rows_at'], got ['lookup_rows']"],
        set()),
    "the layer's backward ignores its kernels (no scatter-add given)": (
        "embedding", ", add_rows=kernels.add_rows_at", "",
        "test_embedding_runs_on_its_kernels", ["expected the calls ['lookup_rows', 'add_rows_at'], got ['lookup_rows']"], set()),
    "the layer's forward ignores its kernels": (
        "embedding", "rows = kernels.lookup_rows(weight.data, ids)", "rows = library_kernels.lookup_rows(weight.data, ids)",
        "test_embedding_runs_on_its_kernels", ["self.kernels.lookup_rows", "expected the calls ['lookup_rows'], got []"], set()),
    "sparse flag ignored": (
        "embedding", "keep_sparse=sparse,", "keep_sparse=False,",
        "test_embedding_sparse_gradient", ["expected a RowSparseGrad, got ndarray"], {"test_embedding_runs_on_its_kernels"}),
    "odd embedding_dim": (
        "sinusoidal", "np.cos(angles[:, :embedding_dim // 2])", "np.cos(angles)",
        "test_sinusoidal_table", ["sinusoidal_table(10, 7) raised ValueError", "odd embedding_dim must work"], set()),
    "float64 sinusoidal table": (
        "sinusoidal", "return table.astype(np.float32)", "return table",
        "test_sinusoidal_table", ["expected a float32 table, got float64"], set()),
    "learned positions: no batch-sum": (
        "learned", "per_position = g.reshape(-1, seq, dim).sum(axis=0)", "per_position = g.reshape(-1, seq, dim)[0]",
        "test_learned_positional_embedding", ["first wrong row at [6]", "sum over the batch of the gradients at position p"],
        {"test_token_position_embedding"}),
    "learned positions: rows from 0 whatever start_pos": (
        "learned", "np.arange(start, start + seq)", "np.arange(seq)",
        "test_learned_positional_embedding", ["first wrong row at [0]: expected [0.0", "rows 6…9"],
        set()),
    "learned positions get no gradient": (
        "learned", "return Tensor._from_op(out, (x, W), grad_fn)", "return Tensor(out)",
        "test_learned_positional_embedding", ["not connected to the position table", "requires_grad is False"],
        {"test_token_position_embedding"}),
    "missing √d scaling": (
        "tpe-forward", "x = x * math.sqrt(self.embedding_dim)", "x = x * 1.0",
        "test_token_position_embedding", ["multiplies the token rows by √8", "expected", "got"], set()),
    "start_pos ignored by the token + position layer": (
        "tpe-forward", "self.positions(x, inplace=True, start_pos=start)", "self.positions(x, inplace=True)",
        "test_token_position_embedding", ["start_pos=2: token 3 alone must get the vector it has in the whole sequence"],
        set()),
    "RoPE pairs the two halves": (
        "rope", "a, b = x[..., 0::2], x[..., 1::2]\n    out = np.empty_like(x)\n    out[..., 0::2] = a * cos - b * sin\n"
        "    out[..., 1::2] = a * sin + b * cos",
        "h = x.shape[-1] // 2\n    a, b = x[..., :h], x[..., h:]\n    out = np.empty_like(x)\n    out[..., :h] = a * cos - b * sin\n"
        "    out[..., h:] = a * sin + b * cos",
        "test_rotate_pairs", ["expected [0.0, 1.0, 0.0, 2.0], got [0.0, 0.0, 1.0, 2.0]", "the pairs are neighbours (2i, 2i+1)"],
        set()),
    "RoPE turns the wrong way": (
        "rope", "out[..., 0::2] = a * cos - b * sin\n    out[..., 1::2] = a * sin + b * cos",
        "out[..., 0::2] = a * cos + b * sin\n    out[..., 1::2] = b * cos - a * sin",
        "test_rotate_pairs", ["expected [0.0, 1.0, 0.0, 2.0], got [0.0, -1.0, 0.0, 2.0]", "turned by −90° instead of +90°"],
        set()),
}

@pytest.fixture(scope="module")
def source_path(request):
    folder = request.config.getoption("--nbs-dir")
    return Path(folder or ROOT / "nbs") / "11_embeddings.ipynb"


@pytest.fixture(scope="module")
def solved(tmp_path_factory, source_path, request):
    "The student release of module 11 with every exercise filled in correctly."
    if source_path.parent == ROOT / "nbs":             # the session's release of nbs/, built once
        released = request.getfixturevalue("release_11")
    else:
        released = release(11, source_path.parent, tmp_path_factory.mktemp("release"))
    return solve(json.loads(released.read_text()), json.loads(source_path.read_text()))


def visible_results(nb: dict, workdir: Path) -> dict:
    "grade_id -> None (passed) or its error's first line: the notebook's test cells run against its own export."
    (workdir / "student_export.py").write_text(exported_source(nb), encoding="utf-8")
    (workdir / "11_embeddings.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    parts = [c["metadata"]["nbgrader"]["grade_id"] for c in nb["cells"]
             if c["cell_type"] == "code" and (c["metadata"].get("nbgrader") or {}).get("grade")]
    token = new_token()
    run = subprocess.run(recheck_command("11_embeddings.ipynb", "student_export.py", "results.json", 120), cwd=workdir,
                         input=token + "\n", capture_output=True, text=True, timeout=600)
    result = read_results(workdir / "results.json", token, parts)
    assert result.import_error is None, (result.import_error, run.stderr[-2000:])
    return result.errors


def mutate(solved: dict, name: str) -> dict:
    cell, right, wrong = MISTAKES[name][:3]
    return replace(solved, cell, right, wrong)


def test_the_solved_release_passes_every_visible_test(solved, source_path, tmp_path):
    results = visible_results(solved, tmp_path)
    parts = {gid for gid, kind, _ in graded_parts(source_path) if kind == "test"}
    assert set(results) == parts, (sorted(results), sorted(parts))
    assert all(error is None for error in results.values()), results


@pytest.mark.parametrize("name", list(MISTAKES))
def test_a_wrong_attempt_loses_its_part_and_says_why(solved, tmp_path, name):
    *_, part, words, may_also_fail = MISTAKES[name]
    results = visible_results(mutate(solved, name), tmp_path)
    assert part in results, f"no visible test {part} in the release"
    error = results[part]
    assert error is not None, f"{name}: {part} passed with the wrong code"
    missing = [w for w in words if w not in error]
    assert not missing, f"{name}: the message of {part} lacks {missing}: {error!r}"
    others = {p for p, e in results.items() if e is not None} - {part} - may_also_fail
    assert not others, f"{name}: other parts failed too: { {p: results[p] for p in others} }"


def test_tinytorch_test_shows_the_message(solved, tmp_path):
    "The real student command: the missing √d scaling loses exactly its part, with a message that says why."
    notebook = tmp_path / "11_embeddings.ipynb"
    notebook.write_text(json.dumps(mutate(solved, "missing √d scaling")), encoding="utf-8")
    out = subprocess.run([CLI, "test", "11", "--notebook", notebook], capture_output=True, text=True, timeout=900)
    assert out.returncode == 1, out.stdout + out.stderr
    lines = {line.split()[1]: line for line in out.stdout.splitlines() if line.strip().startswith(("PASS", "FAIL"))}
    failed = [gid for gid, line in lines.items() if line.strip().startswith("FAIL")]
    assert failed == ["test_token_position_embedding"], out.stdout
    assert "AssertionError: scale_embeddings=True multiplies the token rows by √8" in lines[failed[0]], out.stdout
    assert "expected" in lines[failed[0]] and "got" in lines[failed[0]], out.stdout
