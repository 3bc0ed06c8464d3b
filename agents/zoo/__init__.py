"""PaddleCraft's own trained agents, shipped inside the package and loaded by name.

``Agent.pretrained("digits-mlp")`` (in the manner of PaddleHub's ``hub.Module(name=...)``)
loads ``agents/zoo/<name>/``: the folder ``Agent.save`` writes, without optimizer state,
plus ``quality.json``, the figure measured when the entry was built and the command that
measures it again. ``scripts/build_zoo.py`` rebuilds every entry; ``tests/test_zoo.py``
re-checks each figure. Nothing is downloaded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ZOO_DIR = Path(__file__).resolve().parent


def zoo_entries() -> dict[str, dict[str, Any]]:
    """``{name: quality record}`` for every shipped entry, sorted by name."""
    return {
        d.name: json.loads((d / "quality.json").read_text())
        for d in sorted(ZOO_DIR.iterdir())
        if (d / "agent.json").is_file() and (d / "quality.json").is_file()
    }


def zoo_path(name: str) -> Path:
    """The folder of entry ``name``; a clear KeyError lists the entries when it is unknown."""
    d = ZOO_DIR / name
    if "/" in name or name.startswith(".") or not (d / "agent.json").is_file():
        raise KeyError(
            f"no pretrained agent named {name!r} in the zoo; available: {sorted(zoo_entries())}. "
            "For your own saved agents use Agent.load(<folder>)."
        )
    return d
