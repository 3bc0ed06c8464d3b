"""The library as a maintainer reads it: no import circle between modules, no module over
~450 lines.

The import graph counts every import a module names, wherever it stands: at the top, inside
a function (a lazy import is still a dependency) or under ``if TYPE_CHECKING:`` (a type
hint that names the host class is the host object passed in). A module importing its own
parent package is not an edge: Python loads the parent first anyway.
"""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
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


#: the library's layers, lowest first: a module imports only its own layer and those below
LAYERS = (
    ("paddlecraft.errors", "paddlecraft.compat", "paddlecraft.paddle_private"),
    ("paddlecraft.encoders",),
    ("paddlecraft.craftdata",),
    ("paddlecraft.agents",),
    ("paddlecraft.arenas",),
    ("paddlecraft.cli", "paddlecraft.mistakes", "paddlecraft.__main__"),
)


def _layer(module: str) -> int | None:
    for i, names in enumerate(LAYERS):
        if any(module == n or module.startswith(n + ".") for n in names):
            return i
    return None  # the package itself and its start-up helpers


def test_packages_import_only_their_own_layer_and_below():
    """encoders < craftdata < agents < arenas < the command line: a lower layer never
    reaches up (an encoder knows no agent, an agent no arena)."""
    known = _modules()
    upward = sorted(
        f"{name} -> {target}"
        for name, path in known.items()
        for target in _imported(name, path, known)
        if _layer(name) is not None and _layer(target) is not None and _layer(target) > _layer(name)
    )
    assert upward == []


def test_no_library_module_is_over_450_lines():
    long = {
        str(path.relative_to(ROOT)): n
        for path in _modules().values()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}, f"split these by concept (one idea per module): {long}"


# a measured figure in a config comment: an accuracy-like 0.xx (not a formula's 0.95^n), a
# table row, a duration ("~4 s", "20 minutes") or a rate (steps/s, GFLOP/s)
FIGURE = re.compile(
    r"\b0\.\d{2,}\b(?!\^)|\|[^|\n]*\d[^|\n]*\||~ ?\d+(\.\d+)? ?(s|min|h)\b|"
    r"\b\d+ ?(minutes|seconds)\b|\w+/s\b"
)


def test_the_figure_pattern_catches_results_and_spares_settings():
    for text in ("best move 0.82 with 200 simulations", "| 0.79 | 0.82 |", "~4 s per update",
                 "About 20 minutes", "3.1 steps/s"):  # fmt: skip
        assert FIGURE.search(text), text
    for text in ("learns +-0.95^(plies to the deciding move)", "25 ms windows", "a tenth"):
        assert not FIGURE.search(text), text


def test_no_measured_figure_in_config_comments():
    """Figures live in docs/results.json with their command and CPU, not in conf/ comments."""
    found = [
        f"{path.relative_to(ROOT)}:{i}: {line.strip()}"
        for path in sorted((ROOT / "conf").rglob("*.yaml"))
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if "#" in line and FIGURE.search(line.split("#", 1)[1])
    ]
    assert found == []


#: a timing remark: "~4 s", "20 minutes", "3.1 steps/s", "2x faster" (a setting's unit, as
#: "25 ms windows", is no remark)
TIMING = re.compile(
    r"~ ?\d+(\.\d+)? ?(s|ms|us|min|h)\b|\b\d+(\.\d+)? ?(minutes|seconds|hours)\b|\w+/s\b|"
    r"\b\d+(\.\d+)? ?x (faster|slower)\b"
)


def _comments(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of every ``#`` comment of a Python source."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [(t.start[0], t.string) for t in tokens if t.type == tokenize.COMMENT]


def test_no_timing_remark_in_library_code_comments():
    """Issue 35: timing remarks in code go stale with the next run; figures live in
    docs/results.json with their command and CPU."""
    for text in ("# ~4 s per update", "# took 20 minutes", "# 3.1 steps/s", "# 2x faster here"):
        assert TIMING.search(text), text
    for text in ("# 25 ms windows", "# 40 ms", "# every 2 steps"):
        assert not TIMING.search(text), text
    found = [
        f"{path.relative_to(ROOT)}:{line}: {text.strip()}"
        for path in _modules().values()
        for line, text in _comments(path.read_text())
        if TIMING.search(text)
    ]
    assert found == []


def _library_lines() -> list[tuple[str, int, str]]:
    return [
        (str(path.relative_to(ROOT)), i, line)
        for path in _modules().values()
        for i, line in enumerate(path.read_text().splitlines(), 1)
    ]


def test_no_module_defends_its_size_in_a_comment():
    """A module that needs its length explained is two ideas: split it instead."""
    defence = re.compile(r"~\d+ lines|\d+ lines:")
    assert [f"{p}:{i}" for p, i, line in _library_lines() if defence.search(line)] == []


#: a stream id written as a number where a random stream is made: ``default_rng([seed, 7])``,
#: ``seed=[seed, 11, update]``, ``self.stream(13)``, ``held_out(..., 0xA7A)``
INLINE_STREAM = re.compile(
    r"(default_rng\(|seed=)\[[^\]]*[\[,(+]\s*(0x[0-9A-Fa-f]+|\d+)\s*[,\])+]|"
    r"\[[^\]]*seed[^\]]*\b0x[0-9A-Fa-f]+\]|held_out\(.*\b0x|\.stream\(\d+\)"
)


def test_the_stream_pattern_catches_numbers_and_spares_names():
    for text in ("default_rng([seed, 7])", "default_rng([self.seed, 1000 + stream])",
                 "seed=[self.seed, 11, updates]", "self.stream(13)", "default_rng([s, 0xA7A, n])"):  # fmt: skip
        assert INLINE_STREAM.search(text), text
    for text in ("default_rng([seed, EVAL_STREAM, n])", "default_rng([seed, i, j])",
                 "default_rng(seed)", "self.stream(COLLECT_STREAM)"):  # fmt: skip
        assert not INLINE_STREAM.search(text), text


def test_random_stream_ids_are_named_constants():
    """``default_rng([seed, 7])`` hides which stream it is (and two files that must draw the
    same one cannot say so): name it (``EVAL_STREAM``), hex or decimal."""
    assert [
        f"{p}:{i}: {line.strip()}" for p, i, line in _library_lines() if INLINE_STREAM.search(line)
    ] == []


def _private_names(tree: ast.AST) -> set[str]:
    """Private names a module defines: ``def _x`` (functions, methods) and ``self._x = ...``."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                out.add(node.attr)
    return {n for n in out if n.startswith("_") and not n.startswith("__")}


#: where a library module reads another package's private names on purpose, and why; every
#: other ``obj._x`` of a name no library module defines is a new dependency on a private API
THIRD_PARTY_PRIVATE: dict[str, tuple[frozenset[str] | None, str]] = {
    "paddlecraft.paddle_private": (None, "Paddle's private API, version-checked (issue 35)"),
    "paddlecraft.agents.instantiate": (
        frozenset({"_is_interpolation", "_dereference_node", "_value", "_is_none", "_is_missing"}),
        "OmegaConf's node API: walk a config's targets without resolving it",
    ),
    "paddlecraft.mistakes": (frozenset({"_get_node"}), "OmegaConf: a key's node, unresolved"),
    "paddlecraft.arenas.engine.summary.hydra_callback": (
        frozenset({"_return_value"}),
        "Hydra's JobReturn: a failed job's exception without re-raising it",
    ),
    "paddlecraft.arenas.engine.loop": (frozenset({"_exit"}), "os._exit: documented stdlib"),
}


def _private_reads(trees: dict[str, ast.AST]) -> list[tuple[str, int, str, str, bool]]:
    """``(module, line, obj._x, _x, whether _x is the library's own)`` for every read of a
    private name ``_x`` that the reading module does not define itself, ``obj`` being
    anything but ``self``, ``cls`` or ``super()``: a helper reaching into another object."""
    defined = {name: _private_names(tree) for name, tree in trees.items()}
    library = set().union(*defined.values())
    found = []
    for name, tree in trees.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
                continue
            if node.attr.startswith("__") or node.attr.endswith("_"):  # dunders, _target_
                continue
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            if isinstance(owner, ast.Call) and getattr(owner.func, "id", "") == "super":
                continue
            if node.attr not in defined[name]:
                own = node.attr in library
                found.append((name, node.lineno, ast.unparse(node), node.attr, own))
    return found


def _allowed(module: str, attr: str, anything: bool = True) -> bool:
    """Whether `THIRD_PARTY_PRIVATE` lets ``module`` read ``attr`` (``anything``: also where
    it lets the module read any private name)."""
    names, _ = THIRD_PARTY_PRIVATE.get(module, (frozenset(), ""))
    return anything if names is None else attr in names


def test_the_private_read_finder_flags_a_reach_and_spares_self_and_super():
    host = "class Host:\n    def __init__(self):\n        self._state = 1\n    def _peek(self): ..."
    helper = (
        "def helper(host, opt):\n    return host._state, opt._lr\n"
        "class Child(Host):\n    def f(self):\n        return self._state, super()._peek()"
    )
    trees = {"paddlecraft.host": ast.parse(host), "paddlecraft.helper": ast.parse(helper)}
    assert _private_reads(trees) == [
        ("paddlecraft.helper", 2, "host._state", "_state", True),  # the library's own
        ("paddlecraft.helper", 2, "opt._lr", "_lr", False),  # a third party's
    ]


@functools.cache
def _library_trees() -> dict[str, ast.AST]:
    return {name: ast.parse(path.read_text()) for name, path in _modules().items()}


def test_no_module_reads_a_private_name_of_another_library_module():
    """Issue 35: a helper gets data or a named public accessor, never its host's private
    state (``agents/ownership`` read ``Encoder._borrowed``; it reads ``Encoder.borrowed``)."""
    reads = _private_reads(_library_trees())
    found = [
        f"{m}:{line}: {text}"
        for m, line, text, attr, own in reads
        if own and not _allowed(m, attr, anything=False)
    ]
    assert found == []


def test_another_packages_private_names_are_read_only_where_listed():
    """Paddle's private API lives in paddle_private.py (issue 35); any other private name of
    another package (OmegaConf, Hydra) is read only where `THIRD_PARTY_PRIVATE` says why."""
    reads = _private_reads(_library_trees())
    found = [
        f"{m}:{line}: {text}"
        for m, line, text, attr, own in reads
        if not own and not _allowed(m, attr)
    ]
    assert found == []
    used = {(m, attr) for m, _, _, attr, _ in reads}
    stale = [
        f"{m}: {sorted(names - {a for mm, a in used if mm == m})}"
        for m, (names, _) in THIRD_PARTY_PRIVATE.items()
        if names is not None and names - {a for mm, a in used if mm == m}
    ]
    assert stale == []  # the list names nothing the code no longer reads
