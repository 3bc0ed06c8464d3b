"""The one ``paddlecraft`` namespace: pyproject's package map matches the folders; no code
imports the old top-level names (``agents``, ``encoders``...), which would load a second copy."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import tomllib

import paddlecraft
from paddlecraft import agents, arenas, conf, craftdata, encoders

ROOT = Path(__file__).resolve().parents[1]
MAPPED = ("agents", "arenas", "conf", "craftdata", "encoders")


def test_every_subpackage_is_in_the_wheel_and_mapped():
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {
        "paddlecraft." + str(p.parent.relative_to(ROOT)).replace("/", ".")
        for top in MAPPED
        for p in (ROOT / top).rglob("__init__.py")
    }
    assert set(tool["packages"]) == folders | {"paddlecraft"}
    assert tool["package-dir"] == {f"paddlecraft.{t}": t for t in MAPPED}


def test_the_namespace_resolves_to_the_repository_folders():
    for mod, top in zip((agents, arenas, conf, craftdata, encoders), MAPPED):
        assert Path(mod.__file__).parent == ROOT / top
    assert paddlecraft.__version__


def test_no_module_imports_a_legacy_top_level_name():
    files = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    legacy = re.compile(r"^\s*(from|import) (agents|encoders|arenas|craftdata)\b", re.M)
    offenders = [f for f in files if legacy.search((ROOT / f).read_text())]
    assert offenders == []
