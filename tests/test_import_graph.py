"""The package's modules import each other without cycles: every `import` counts, at the top of a module or
inside a function (a cycle hidden in a function is still two modules that can't be understood one at a time).
One kind of import is not a dependency: a module-level `__getattr__` (PEP 562) that hands out a name under an
old address, as `tinytorch.core.embeddings.EmbeddingProfiler` does for code written against the module as first
published. It forwards the name; the module itself never uses what it forwards."""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tinytorch"


def module_name(path: Path, root: Path) -> str:
    "`tinytorch/course/grading/grading.py` -> `tinytorch.course.grading.grading` (a package's `__init__.py` -> the package)."
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, root: Path, known: set) -> set:
    "The modules of the package under `root` that the file at `path` imports."
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    forwards = {id(n) for top in tree.body if isinstance(top, ast.FunctionDef) and top.name == "__getattr__"
                for n in ast.walk(top)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in forwards:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        found |= {t for t in targets if t in known and t != name}
    return found


def import_graph(root: Path) -> dict:
    "module -> the package's modules it imports, for every `.py` file under `root`."
    files = {module_name(p, root): p for p in root.rglob("*.py") if "__pycache__" not in p.parts}
    return {m: imported_modules(p, root, set(files)) for m, p in files.items()}


def import_cycles(graph: dict) -> list:
    "Each cycle of `graph` once, as a list of modules starting and ending at the same one."
    cycles, state, stack = set(), {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == "open":
                loop = stack[stack.index(n):]
                k = loop.index(min(loop))
                cycles.add(tuple(loop[k:] + loop[:k]))
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m)
    return [list(c) + [c[0]] for c in sorted(cycles)]


def test_the_package_has_no_import_cycles():
    graph = import_graph(PACKAGE)
    assert "tinytorch.course.grading.grading" in graph and graph["tinytorch.course.grading.grading"], "the graph was not read"
    assert import_cycles(graph) == []


def test_a_planted_cycle_is_found(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text("from .b import f\n")                       # relative, at the top
    (pkg / "sub" / "b.py").write_text("def f():\n    from pkg.sub import c\n")     # absolute, inside a function
    (pkg / "sub" / "c.py").write_text("import pkg.sub.a\n")
    (pkg / "d.py").write_text("from pkg.sub.a import f\n"                           # imports into the cycle, not part of it
                              "def __getattr__(name):\n    from pkg import e\n    return e.g\n")  # forwards a name
    (pkg / "e.py").write_text("def g():\n    import pkg.d\n")                       # uses d: no cycle through the forward
    graph = import_graph(pkg)
    assert graph["pkg.sub.b"] == {"pkg.sub.c"} and graph["pkg.d"] == {"pkg.sub.a"}, graph
    assert graph["pkg.e"] == {"pkg.d"}, graph
    assert import_cycles(graph) == [["pkg.sub.a", "pkg.sub.b", "pkg.sub.c", "pkg.sub.a"]]


# The stages of a term, in the order they may import each other: a stage imports only the stages before it
# (and itself). The `tinytorch` command (tinytorch.cli, tinytorch.commands.*, tinytorch.demo) comes after all of them.
STAGES = ("basics", "authoring", "isolation", "checking", "pages", "grading", "platforms", "results", "site")


def stage_of(module: str):
    "`tinytorch.course.grading.late` -> 'grading'; None for a module outside the stages."
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["tinytorch", "course"] else None


def later_imports(graph: dict, stages=STAGES) -> list:
    "(module, imported module) of every import of a later stage, or of a module outside any stage, by a stage."
    order = {s: k for k, s in enumerate(stages)}
    bad = []
    for module, imported in sorted(graph.items()):
        own = stage_of(module)
        if own not in order:    # the commands and the old addresses come after every stage
            continue
        for other in sorted(imported):
            theirs = stage_of(other)
            if other.startswith("tinytorch.") and not other.startswith("tinytorch.core") and (
                    theirs not in order or order[theirs] > order[own]):
                bad.append((module, other))
    return bad


def test_every_course_module_is_in_a_stage():
    graph = import_graph(PACKAGE)
    course = [m for m in graph if m.startswith("tinytorch.course.")]
    assert len(course) > 30, course
    outside = [m for m in course if stage_of(m) not in STAGES]
    # the old addresses that graders and course configs written by earlier releases name
    assert sorted(outside) == ["tinytorch.course.autograder", "tinytorch.course.collect",
                               "tinytorch.course.nbgrader_export"], outside


def test_no_stage_imports_a_later_one():
    graph = import_graph(PACKAGE)
    assert "tinytorch.course.grading.grading" in graph, "the stages were not read"
    assert later_imports(graph) == []


def test_a_planted_import_of_a_later_stage_is_found():
    graph = {"tinytorch.course.basics.errors": {"tinytorch.course.grading.late"},
             "tinytorch.course.grading.late": {"tinytorch.course.basics.errors", "tinytorch.core.tensor"},
             "tinytorch.course.site.docs": {"tinytorch.course.grading.late", "tinytorch.cli"},
             "tinytorch.cli": {"tinytorch.course.site.docs"}}
    assert later_imports(graph) == [("tinytorch.course.basics.errors", "tinytorch.course.grading.late"),
                                    ("tinytorch.course.site.docs", "tinytorch.cli")]
