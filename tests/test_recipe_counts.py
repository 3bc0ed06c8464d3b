"""Issue 92's targets, held by the counts ``scripts/recipe_counts.py`` prints: a lean self-play
recipe, a small search config, a self-play guide and a README that guide."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _counts():
    spec = importlib.util.spec_from_file_location(
        "recipe_counts", ROOT / "scripts" / "recipe_counts.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_counter_counts_fields_once_with_bases_and_groups(tmp_path):
    """Inherited fields count, a redeclared one once, ClassVars not, groups expand."""
    (tmp_path / "arenas").mkdir()
    (tmp_path / "arenas" / "cfg.py").write_text(
        "from dataclasses import dataclass, field\n"
        "from typing import ClassVar\n\n"
        "@dataclass\nclass BaseConfig:\n    epochs: int = 1\n\n"
        "@dataclass\nclass GroupConfig:\n    a: int = 0\n    b: float = 1.0\n\n"
        "@dataclass(frozen=True)\nclass MyConfig(BaseConfig):\n"
        "    RENAMED: ClassVar[dict] = {}\n    epochs: int = 3\n    lr: float = 0.1\n"
        "    group: GroupConfig = field(default_factory=GroupConfig)\n\n"
        "@dataclass\nclass Record:\n    x: int = 0\n"
    )
    rc = _counts()
    assert rc.settings_dataclasses(tmp_path) == {
        "arenas/cfg.py:BaseConfig": 1,
        "arenas/cfg.py:GroupConfig": 2,
        "arenas/cfg.py:MyConfig": 3,  # epochs (once), lr, group
    }
    assert rc._expanded(rc._config_classes(tmp_path), "MyConfig") == 4  # epochs, lr, a, b
    assert rc._leaves({"a": {"_target_": "x", "b": 1, "c": [1, 2]}, "d": None}, "arena") == [
        "arena.a.b",
        "arena.a.c",
        "arena.d",
    ]


def test_selfplay_recipe_has_at_most_45_settings():
    """The arena's fields, the policy's own settings and the encoder's switches (89 before
    issue 92 removed what measured as not helping)."""
    rec = _counts().selfplay_recipe_settings()
    assert rec["total"] <= 45, rec


def test_search_config_has_at_most_15_fields():
    fields = _counts().settings_dataclasses()
    assert fields["arenas/selfplay/search_config.py:SearchConfig"] <= 15


def test_selfplay_guide_is_at_most_500_lines():
    lines = _counts().docs_lines()
    guide = {page: n for page, n in lines.items() if page.startswith("docs/guide/selfplay")}
    assert "docs/guide/selfplay.md" in guide
    assert sum(guide.values()) <= 500, guide


def test_referential_guide_is_at_most_300_lines():
    """A guide, not a lab notebook: the lever histories are rows of docs/results.json."""
    lines = _counts().docs_lines()
    assert lines["docs/guide/referential.md"] <= 300, lines["docs/guide/referential.md"]


def test_readme_is_at_most_150_lines_none_over_200_characters():
    readme = _counts().readme()
    assert readme["lines"] <= 150, readme
    assert readme["longest_line"] <= 200, readme
