"""paddlecraft.compat: every rule for old names in one module, one rename table, removed in
a stated version."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
import tomllib

from paddlecraft import compat

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ("agents", "arenas", "encoders", "craftdata", "paddlecraft")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.match(r"\d+(\.\d+)*", text).group(0).split("."))


def test_the_compatibility_module_is_removed_before_the_version_it_names():
    """Fails at the release that should have dropped paddlecraft.compat: remove it then."""
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert _version(version) < _version(compat.REMOVED_IN)


def test_no_other_library_module_defines_a_rename_rule():
    """Old-name rules (a rename table, an upgrade helper, an alias kept for an old name) live
    in paddlecraft/compat.py; classes keep only their hooks that delegate to it."""
    rule = re.compile(
        r"^(RENAMED|LEGACY\w*)\s*[:=]|^\s+RENAMED: ClassVar\[dict\[str, str\]\] = \{|"
        r"^def (upgrade_(?!saved)\w+|renamed_\w+)\(|^_\w+ = \w+\s+# .*(old|before|legacy)",
        re.M,
    )
    offenders = [
        str(path.relative_to(ROOT))
        for top in LIBRARY
        for path in sorted((ROOT / top).rglob("*.py"))
        if path.name != "compat.py" and rule.search(path.read_text())
    ]
    assert offenders == []


def test_pre_0_2_targets_are_namespaced_and_others_kept():
    assert compat.upgrade_target("encoders.ResNetEncoder") == "paddlecraft.encoders.ResNetEncoder"
    assert compat.upgrade_target("paddle.optimizer.Adam") == "paddle.optimizer.Adam"
    assert compat.upgrade_target("agents") == "agents"  # a bare word is no target
    tree = {"a": {"_target_": "agents.Policy", "x": [{"_target_": "craftdata.load_digits"}]}}
    assert compat.upgrade_targets(tree) == {
        "a": {
            "_target_": "paddlecraft.agents.Policy",
            "x": [{"_target_": "paddlecraft.craftdata.load_digits"}],
        }
    }


def test_the_selfplay_config_reads_its_renames_from_the_one_table():
    from paddlecraft.arenas.selfplay.config import SelfPlayConfig

    assert SelfPlayConfig.RENAMED is compat.RENAMED["selfplay_setting"]
    saved = {"collect_workers": 2, "gamma": 0.9, "epochs": 3}
    assert compat.upgrade_settings(SelfPlayConfig, saved) == {
        "collect_workers": "workers.count",
        "gamma": "update.gamma",
    }
    assert saved == {"epochs": 3, "workers": {"count": 2}, "update": {"gamma": 0.9}}


def test_a_run_saved_before_a_setting_existed_keeps_the_value_it_ran_with():
    class Config:  # a user's arena settings with two settings added since its first runs
        AS_BEFORE = {"search.cache": False, "search.copy": False}

    before = dict(Config.AS_BEFORE)
    saved = {"epochs": 3, "search": {"simulations": 50}}
    assert compat.settings_as_saved(Config, saved) == before
    assert saved == {"epochs": 3, "search": {"simulations": 50, "cache": False, "copy": False}}
    today = {"search": {"cache": True, "copy": True}}  # saved with them: left as is
    assert compat.settings_as_saved(Config, today) == {}
    assert today == {"search": {"cache": True, "copy": True}}
    between = {"search": {"cache": True}}  # saved after the cache, before the copy
    assert compat.settings_as_saved(Config, between) == {"search.copy": False}
    assert between == {"search": {"cache": True, "copy": False}}
    flat = {"epochs": 3}  # no group at all
    compat.settings_as_saved(Config, flat)
    assert flat == {"epochs": 3, "search": {"cache": False, "copy": False}}
    from paddlecraft.arenas.selfplay.config import SelfPlayConfig

    assert compat.settings_as_saved(SelfPlayConfig, {"epochs": 3}) == {}  # self-play has none


def test_a_renamed_attribute_still_resolves_with_a_warning_naming_the_removal():
    from paddlecraft.arenas.engine import app

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert app._user_error is app.user_error
    assert compat.REMOVED_IN in str(caught[0].message)
    with pytest.raises(AttributeError):
        app.no_such_name  # noqa: B018


def test_the_0_1_no_op_calls_warn_naming_the_removal(make_scope):
    from paddlecraft.agents import Classifier
    from paddlecraft.encoders.naming import release_scope

    mlp = {"_target_": "paddlecraft.encoders.ImageMLPEncoder", "input_size": 4, "num_classes": 2}
    agent = Classifier(make_scope("clf"), encoder=mlp)
    for call in (lambda: release_scope("x"), agent.release_scopes):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        (w,) = caught
        assert w.category is DeprecationWarning and compat.REMOVED_IN in str(w.message)


def test_only_the_compatibility_module_raises_deprecation_warnings():
    offenders = [
        str(path.relative_to(ROOT))
        for top in LIBRARY
        for path in sorted((ROOT / top).rglob("*.py"))
        if path.name != "compat.py" and "DeprecationWarning" in path.read_text()
    ]
    assert offenders == []
