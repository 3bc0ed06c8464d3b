"""How big the recipes and their docs are: the counts issue 92's targets are held to.

Prints, as text or ``--json``:

- **settings per arena**: the leaf keys under ``arena.*`` and ``agents.*`` of each composed
  ``arena=<name>`` config (Hydra's ``_target_``-style keys left out; a list is one setting),
  and for ``arena=selfplay`` each ``game=<name>`` too;
- **the self-play recipe's settings** as issue 92 counts them: every field of
  ``SelfPlayConfig`` and its groups, the policy's own settings and the on/off switches of
  Connect Four's encoder;
- **fields of each settings dataclass**: every ``@dataclass`` whose name ends in ``Config`` under
  ``agents/``, ``arenas/`` and ``encoders/``, its own fields and those it inherits from another
  such class (read from the source, nothing imported);
- **docs lines per page** (``docs/**/*.md``) and **README lines and its longest line**.

``tests/test_recipe_counts.py`` holds the targets. Usage::

    python scripts/recipe_counts.py            # a text report
    python scripts/recipe_counts.py --json     # the same as JSON
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONF = ROOT / "conf"
CODE_DIRS = ("agents", "arenas", "encoders")


def _leaves(node: object, prefix: str) -> list[str]:
    """Dotted names of the leaf settings under ``node`` (a dict or a value)."""
    if not isinstance(node, dict):
        return [prefix]
    out = []
    for key, value in node.items():
        if str(key).startswith("_"):  # _target_, _partial_: how to build, not a setting
            continue
        out += _leaves(value, f"{prefix}.{key}")
    return out


def composed_settings(overrides: list[str]) -> list[str]:
    """The leaf settings under ``arena.*`` and ``agents.*`` of ``config`` with ``overrides``."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    from paddlecraft.arenas import register_configs

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    GlobalHydra.instance().clear()
    tree = OmegaConf.to_container(cfg, resolve=False)
    return _leaves(tree.get("arena", {}), "arena") + _leaves(tree.get("agents", {}), "agents")


def composed_values(overrides: list[str], under: str) -> dict[str, object]:
    """``{key: value}`` of the leaves directly under ``under`` in the composed config."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    from paddlecraft.arenas import register_configs

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    GlobalHydra.instance().clear()
    node = OmegaConf.to_container(OmegaConf.select(cfg, under), resolve=False)
    return {k: v for k, v in node.items() if not str(k).startswith("_") and not isinstance(v, dict)}


def settings_per_arena() -> dict[str, int]:
    """``{"classify": n, ..., "selfplay game=connect_four": n, ...}``."""
    out = {}
    for arena in sorted(p.stem for p in (CONF / "arena").glob("*.yaml")):
        out[arena] = len(composed_settings([f"arena={arena}"]))
        if arena == "selfplay":
            for game in sorted(p.stem for p in (CONF / "game").glob("*.yaml")):
                key = f"selfplay game={game}"
                out[key] = len(composed_settings([f"arena={arena}", f"game={game}"]))
    return out


def _is_dataclass(node: ast.ClassDef) -> bool:
    for d in node.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name == "dataclass":
            return True
    return False


def _own_fields(node: ast.ClassDef) -> dict[str, str]:
    """``{name: annotation}`` of the class body, ``ClassVar`` ones left out."""
    out = {}
    for item in node.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            annotation = ast.unparse(item.annotation)
            if "ClassVar" not in annotation:
                out[item.target.id] = annotation
    return out


def _config_classes(root: Path) -> dict[str, tuple[str, dict[str, str], list[str]]]:
    """``{class name: (file:class, own fields, base names)}`` of the settings dataclasses."""
    found = {}
    for folder in CODE_DIRS:
        for path in sorted((root / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and _is_dataclass(node):
                    if node.name.endswith("Config"):
                        bases = [ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases]
                        where = f"{path.relative_to(root)}:{node.name}"
                        found[node.name] = (where, _own_fields(node), bases)
    return found


def _fields(found: dict, name: str) -> dict[str, str]:
    """Every field of ``name``, its bases' first (a field redeclared counts once)."""
    _, own, bases = found[name]
    out: dict[str, str] = {}
    for base in bases:
        if base in found:
            out.update(_fields(found, base))
    out.update(own)
    return out


def _expanded(found: dict, name: str) -> int:
    """Settings of ``name`` with each field that is itself a settings dataclass expanded."""
    return sum(_expanded(found, a) if a in found else 1 for a in _fields(found, name).values())


def settings_dataclasses(root: Path = ROOT) -> dict[str, int]:
    """``{"arenas/selfplay/search_config.py:SearchConfig": fields, ...}``, inherited included."""
    found = _config_classes(root)
    return {found[name][0]: len(_fields(found, name)) for name in sorted(found)}


#: the policy's fields a run fills in from the game, and its encoder slot (counted apart)
_FROM_THE_GAME = frozenset({"encoder", "obs_shape", "num_actions"})


def selfplay_recipe_settings(root: Path = ROOT, with_encoder: bool = True) -> dict[str, int]:
    """The self-play recipe's own settings, as issue 92 counts them: the arena's (every field of
    ``SelfPlayConfig`` and its groups), the policy's own (``PolicyConfig`` less what every
    agent has and what the game fills in) and the on/off switches of Connect Four's encoder."""
    found = _config_classes(root)
    policy = set(found["PolicyConfig"][1]) - _FROM_THE_GAME
    out = {"arena": _expanded(found, "SelfPlayConfig"), "policy": len(policy)}
    if with_encoder:
        leaves = composed_values(["arena=selfplay", "game=connect_four"], "agents.policy.encoder")
        out["encoder switches"] = sum(isinstance(v, bool) for v in leaves.values())
    out["total"] = sum(out.values())
    return out


def docs_lines(root: Path = ROOT) -> dict[str, int]:
    """Lines of each page of the site, generated results page included."""
    docs = root / "docs"
    return {
        str(p.relative_to(root)): len(p.read_text().splitlines())
        for p in sorted(docs.rglob("*.md"))
    }


def readme(root: Path = ROOT) -> dict[str, int]:
    lines = (root / "README.md").read_text().splitlines()
    return {"lines": len(lines), "longest_line": max((len(line) for line in lines), default=0)}


def counts(root: Path = ROOT, with_settings: bool = True) -> dict:
    """Every count of the report (``with_settings``: compose the arenas' configs too)."""
    out = {
        "settings_dataclasses": settings_dataclasses(root),
        "docs_lines": docs_lines(root),
        "readme": readme(root),
    }
    if with_settings:
        out = {
            "settings_per_arena": settings_per_arena(),
            "selfplay_recipe_settings": selfplay_recipe_settings(root),
            **out,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print the counts as JSON")
    args = ap.parse_args(argv)
    c = counts()
    if args.json:
        print(json.dumps(c, indent=2))
        return 0
    print("settings per arena (leaf keys under arena.* and agents.*):")
    for name, n in c["settings_per_arena"].items():
        print(f"  {name:<36} {n:>4}")
    rec = c["selfplay_recipe_settings"]
    print("self-play recipe settings (the arena's fields, the policy's own, encoder switches):")
    print("  " + ", ".join(f"{k} {v}" for k, v in rec.items()))
    print("fields of each settings dataclass:")
    for name, n in c["settings_dataclasses"].items():
        print(f"  {name:<56} {n:>4}")
    print("docs lines per page:")
    for name, n in c["docs_lines"].items():
        print(f"  {name:<56} {n:>5}")
    print(f"  {'total':<56} {sum(c['docs_lines'].values()):>5}")
    r = c["readme"]
    print(f"README.md: {r['lines']} lines, longest line {r['longest_line']} characters")
    return 0


if __name__ == "__main__":
    sys.exit(main())
