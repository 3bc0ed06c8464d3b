"""One docstring style, the one the API reference renders: Google sections and Markdown.

mkdocstrings renders docstrings as Markdown (``docstring_style: google`` in mkdocs.yml), so a
reST role (``:class:`X```) or a reST literal-block marker (``text::``) shows as literal text.
Names are written in backticks (`` `Loop` ``); attribute docs are ``#:`` comments, which
``scripts/griffe_doc_comments.py`` hands to the reference."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
#: a reST role such as :class:`X`, :meth:`~a.b`, :py:func:`f`
ROLE = re.compile(r":(?:py:)?[a-z]+:`[^`]*`")
#: a reST literal-block marker: a line of prose ending in "::"
LITERAL = re.compile(r"^\s*[^\s#\[\]:].*[^\s:\[]::\s*$", re.M)


def library_files() -> list[Path]:
    """Every Python file of the installed package: paddlecraft/ and the mapped folders."""
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"
    ]
    folders = [ROOT / "paddlecraft", *(ROOT / f for f in mapping.values())]
    return sorted(p for d in folders for p in d.rglob("*.py"))


def test_the_scan_sees_the_whole_library():
    files = {p.relative_to(ROOT).as_posix() for p in library_files()}
    for known in ("paddlecraft/cli.py", "agents/base.py", "arenas/engine/base.py"):
        assert known in files
    assert len(files) > 100


def test_the_patterns_catch_what_they_name():
    assert ROLE.findall("see :class:`~arenas.Loop` and :py:meth:`a.b`") == [
        ":class:`~arenas.Loop`",
        ":py:meth:`a.b`",
    ]
    assert LITERAL.findall('"""Run it like this::\n\n    x = 1\n"""')
    assert not LITERAL.findall("x = y[1::]\nrows ``rank::world``, cut\n")


def test_no_rest_roles_or_literal_markers_in_library_docstrings():
    found = []
    for p in library_files():
        text = p.read_text()
        rel = p.relative_to(ROOT).as_posix()
        found += [f"{rel}: {m}" for m in ROLE.findall(text)]
        found += [f"{rel}: {m.strip()}" for m in LITERAL.findall(text)]
    assert found == [], "write `Name` (Markdown), not reST:\n" + "\n".join(found[:40])
