"""`harness/` imports in one direction: its module graph has no cycle.

An import inside a function is an import all the same (it runs on the first call), so it counts; one
under `if TYPE_CHECKING:` never runs, so it does not. A cycle tied by function-level imports hides
which module sits on which, and breaks as soon as one of them moves to the top.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

Edge = tuple[str, str, int]
"""(importing module, imported module, line)."""


def module_names(package: Path) -> dict[str, Path]:
    names: dict[str, Path] = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(nodes: Iterable[ast.AST]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement in `nodes`, in functions too, but not in an `if TYPE_CHECKING:` body."""
    for node in nodes:
        if isinstance(node, ast.If) and _type_checking(node.test):
            yield from _imports(node.orelse)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        else:
            yield from _imports(ast.iter_child_nodes(node))


def _targets(
    module: str, is_package: bool, node: ast.Import | ast.ImportFrom, known: dict[str, Path]
) -> set[str]:
    if isinstance(node, ast.Import):
        named = [alias.name for alias in node.names]
    else:
        if node.level:
            base = module.split(".")
            base = base[: len(base) - node.level + (1 if is_package else 0)]
            source = ".".join([*base, *([node.module] if node.module else [])])
        else:
            source = node.module or ""
        # `from package import name`: the submodule when `name` is one, else the package itself.
        named = [f"{source}.{a.name}" if f"{source}.{a.name}" in known else source for a in node.names]
    found: set[str] = set()
    for name in named:
        while name not in known and "." in name:  # `import harness.x.y` runs harness.x.y
            name = name.rpartition(".")[0]
        if name in known and name != module:
            found.add(name)
    return found


def import_graph(package: Path) -> dict[str, dict[str, int]]:
    """Module → the package's modules it imports, each with the line of its first import."""
    known = module_names(package)
    graph: dict[str, dict[str, int]] = {}
    for module, path in known.items():
        edges: dict[str, int] = {}
        for node in _imports([ast.parse(path.read_text(encoding="utf-8"), filename=str(path))]):
            for target in _targets(module, path.name == "__init__.py", node, known):
                edges.setdefault(target, node.lineno)
        graph[module] = edges
    return graph


def find_cycle(graph: dict[str, dict[str, int]]) -> list[Edge] | None:
    """One cycle of `graph` as its edges, or `None` when there is none (depth-first search)."""
    done: set[str] = set()
    path: list[str] = []
    on_path: dict[str, int] = {}

    def visit(module: str) -> list[Edge] | None:
        on_path[module] = len(path)
        path.append(module)
        for target in sorted(graph[module]):
            if target in on_path:
                loop = [*path[on_path[target] :], target]
                return [(a, b, graph[a][b]) for a, b in itertools.pairwise(loop)]
            if target not in done:
                found = visit(target)
                if found:
                    return found
        path.pop()
        del on_path[module]
        done.add(module)
        return None

    for module in sorted(graph):
        if module not in done:
            found = visit(module)
            if found:
                return found
    return None


def test_the_graph_sees_function_level_imports_and_skips_type_checking_ones() -> None:
    graph = import_graph(REPO / "harness")
    # `harness.environment.backend` imports these at its top, and `EnvironmentState` only for types.
    assert {"harness.environment.adapter", "harness.environment.surface"} <= set(
        graph["harness.environment.backend"]
    )
    assert "harness.state" not in graph["harness.environment.backend"]
    # A function's import: `check_state` imports the registry when it is called.
    assert "harness.children.registry" in graph["harness.children.inline"]
    assert find_cycle({"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3}}) == [
        ("a", "b", 1),
        ("b", "c", 2),
        ("c", "a", 3),
    ]


def test_harness_has_no_import_cycle() -> None:
    package = REPO / "harness"
    cycle = find_cycle(import_graph(package))
    files = module_names(package)
    assert cycle is None, "an import cycle in harness/:\n" + "\n".join(
        f"  {a} -> {b}  ({files[a].relative_to(REPO)}:{line})" for a, b, line in cycle
    )
