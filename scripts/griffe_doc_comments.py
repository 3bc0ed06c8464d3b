"""Griffe extension: an attribute's ``#:`` doc comment is its docstring in the API reference.

The library documents settings fields and class attributes with ``#:`` comments, on the
line itself (``epochs: int = 1  #: passes over the data``) or on the lines just above.
Griffe reads only docstrings under an attribute, so without this the reference would list
none of them (``Arena.headline_mode``, every ``Config`` field). ``mkdocs.yml`` loads it
(mkdocstrings' ``extensions`` option); nothing of the package is imported.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import griffe

#: a trailing doc comment, up to a following lint or type-checker comment
_TRAILING = re.compile(r"\s#:\s?(?P<text>.*?)(?:\s+#\s*(?:noqa|type:|fmt:).*)?$")


class DocComments(griffe.Extension):
    """Set an undocumented attribute's docstring from its ``#:`` comment lines."""

    def __init__(self) -> None:
        super().__init__()
        self._lines: dict[Path, list[str]] = {}

    def _source(self, path: Path) -> list[str]:
        if path not in self._lines:
            self._lines[path] = path.read_text(encoding="utf-8").splitlines()
        return self._lines[path]

    def on_attribute_instance(self, *, attr: griffe.Attribute, **kwargs: Any) -> None:  # noqa: ARG002
        """Griffe calls this for every attribute it finds."""
        if attr.docstring is not None or not attr.lineno or not isinstance(attr.filepath, Path):
            return
        lines = self._source(attr.filepath)
        first = attr.lineno - 1
        above: list[str] = []
        i = first - 1
        while i >= 0 and lines[i].strip().startswith("#:"):
            above.insert(0, lines[i].strip()[2:].strip())
            i -= 1
        text = " ".join(above)
        if not text:
            last = (attr.endlineno or attr.lineno) - 1
            for line in (lines[first], lines[last]):
                m = _TRAILING.search(line)
                if m and m.group("text").strip():
                    text = m.group("text").strip()
                    break
        if text:
            attr.docstring = griffe.Docstring(text, lineno=attr.lineno, parent=attr)
