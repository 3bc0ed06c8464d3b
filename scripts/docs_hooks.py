"""MkDocs hook: lay out the installed namespace so mkdocstrings can read the sources statically.

The repository keeps its folders (``agents/``, ``encoders/`` ...) and the wheel installs them as
``paddlecraft/agents`` ... (``[tool.setuptools.package-dir]`` in pyproject.toml). Static analysis
(griffe) only looks inside ``paddlecraft/``, so before the build this hook builds
``build/docs_src/paddlecraft/``: links to the files of ``paddlecraft/`` and to each mapped folder,
exactly the layout the wheel installs. ``mkdocs.yml`` points mkdocstrings at ``build/docs_src``.
Nothing is imported, so building the docs runs no package code.
"""

from __future__ import annotations

import os
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "build" / "docs_src"


def _link(target: Path, link: Path) -> None:
    """Point ``link`` at ``target`` (relative), replacing a stale link."""
    rel = os.path.relpath(target, link.parent)
    if link.is_symlink():
        if os.readlink(link) == rel:
            return
        link.unlink()
    tmp = link.with_name(f".{link.name}.{os.getpid()}")
    os.symlink(rel, tmp)
    os.replace(tmp, link)  # atomic: parallel builds never see a half-made tree


def namespace_tree() -> Path:
    """Build ``build/docs_src/paddlecraft`` (links into the repository); return its parent."""
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"
    ]
    pkg = SRC / "paddlecraft"
    pkg.mkdir(parents=True, exist_ok=True)
    for item in (ROOT / "paddlecraft").iterdir():
        if item.suffix == ".py":
            _link(item, pkg / item.name)
    for name, folder in mapping.items():
        sub = name.split(".", 1)[1]  # paddlecraft.agents -> agents
        _link(ROOT / folder, pkg / sub)
    return SRC


def on_startup(command: str, dirty: bool) -> None:  # noqa: ARG001 (MkDocs hook signature)
    namespace_tree()
