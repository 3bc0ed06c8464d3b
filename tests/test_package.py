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
    # a data folder (a config group of YAML files, the live page's HTML/JS/CSS; no
    # __init__.py) is listed too, or setuptools warns once per folder and a new folder's
    # files would ride on a deprecated path
    data = [*(ROOT / "conf").rglob("*.yaml"),
            *(p for top in MAPPED for ext in ("html", "js", "css")
              for p in (ROOT / top).rglob(f"*.{ext}"))]  # fmt: skip
    groups = {"paddlecraft." + str(p.parent.relative_to(ROOT)).replace("/", ".") for p in data}
    assert set(tool["packages"]) == folders | groups | {"paddlecraft"}
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


def test_the_wheel_builds_without_a_setuptools_warning(tmp_path):
    """``pip wheel .`` as a user runs it: no warning from the build backend (the config groups
    are packages, not data smuggled in by a glob), and every YAML file of ``conf/`` is inside."""
    import shutil
    import sys
    import zipfile

    src = tmp_path / "src"  # a copy: the build leaves build/ and *.egg-info where it runs
    for top in (*MAPPED, "paddlecraft"):
        shutil.copytree(ROOT / top, src / top, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "-w", str(tmp_path / "dist"), str(src)],
        capture_output=True, text=True,
    )  # fmt: skip
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    assert "warning" not in out.lower(), out[-3000:]
    (wheel,) = (tmp_path / "dist").glob("paddlecraft-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    yamls = {f"paddlecraft/{p.relative_to(ROOT)}" for p in (ROOT / "conf").rglob("*.yaml")}
    assert yamls and yamls <= names
