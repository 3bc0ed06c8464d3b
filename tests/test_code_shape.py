"""The library as a maintainer reads it: no import circle between modules, no module over
~450 lines.

The import graph counts every import a module names, wherever it stands: at the top, inside
a function (a lazy import is still a dependency) or under ``if TYPE_CHECKING:`` (a type
hint that names the host class is the host object passed in). A module importing its own
parent package is not an edge: Python loads the parent first anyway.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ("agents", "arenas", "encoders", "craftdata", "paddlecraft")
MAX_LINES = 450


def _modules() -> dict[str, Path]:
    """Dotted name (``paddlecraft.agents.base``) -> file, for every library module."""
    out = {}
    for top in LIBRARY:
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[0] != "paddlecraft":
                parts.insert(0, "paddlecraft")
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The library modules ``name`` imports anywhere in its file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            # ``from pkg import sub`` imports the module pkg.sub; ``from mod import f``, mod
            targets += [
                f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod for a in node.names
            ]
    out = set()
    for target in targets:
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name and not name.startswith(target + "."):
            out.add(target)
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_circle_and_passes_a_chain():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_import_graph_sees_relative_lazy_and_type_checking_imports():
    known = _modules()
    graph = {name: _imported(name, path, known) for name, path in known.items()}
    # spot checks that the parser resolves what the library really does
    assert "paddlecraft.arenas.games.baselines" in graph["paddlecraft.arenas.games.registry"]
    assert "paddlecraft.arenas.games.solver" in graph["paddlecraft.arenas.games.registry"]
    assert "paddlecraft.encoders.specs" in graph["paddlecraft.encoders.base"]
    assert "paddlecraft.errors" in graph["paddlecraft.encoders.specs"]


def test_no_import_circle_between_library_modules():
    known = _modules()
    graph = {name: _imported(name, path, known) for name, path in known.items()}
    assert _cycles(graph) == []


def test_no_library_module_is_over_450_lines():
    long = {
        str(path.relative_to(ROOT)): n
        for path in _modules().values()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}, f"split these by concept (one idea per module): {long}"
