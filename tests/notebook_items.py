"""How the notebook-cell collector (test_notebook_cells.py) names and picks its items, decided from each cell's source."""
import ast


def _code(source: str) -> str:
    "The cell's Python, without the IPython `%magic` and `!shell` lines the runner skips too."
    return "\n".join(l for l in source.splitlines() if not l.lstrip().startswith(("%", "!")))


def _called_name(call: ast.Call):
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)


def _is_check_call(node) -> bool:
    if not isinstance(node, ast.Call):
        return False
    name = _called_name(node) or ""
    return name.startswith(("test_", "assert_")) or name == "raises"


def cell_checks(source: str) -> bool:
    "Whether a cell's code checks anything: an assert, a `test_*` function, or a call to a check helper."
    try:
        tree = ast.parse(_code(source))
    except SyntaxError:
        return True     # can't tell: it runs as a real item and its error says what is wrong
    return any(isinstance(node, ast.Assert) or _is_check_call(node)
               or (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_"))
               for node in ast.walk(tree))


def holds_code(source: str) -> bool:
    "False for a cell of nothing but `#|` directives, comments and blank lines."
    try:
        return bool(ast.parse(_code(source)).body)
    except SyntaxError:
        return True


def item_id(run, cell) -> str:
    name = f"{run.path.stem}::{cell.name}"
    return name if cell_checks(cell.source) else f"smoke-{name}"
