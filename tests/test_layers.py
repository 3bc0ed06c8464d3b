"""The package's layers and its one user-error base.

Layers, lowest first: ``paddlecraft.errors``, ``encoders``, ``craftdata``, ``agents``,
``arenas``. A module may import its own layer and those below, never one above (the zoo's
quality measurement lives in ``arenas.zoo`` for that reason).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from paddlecraft import errors
from paddlecraft.arenas.engine.app import USER_ERRORS, main_entry

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ["encoders", "craftdata", "agents", "arenas"]


def _imports(path: Path) -> set[str]:
    """Top-level paddlecraft subpackages a module imports (relative imports stay inside)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for n in names:
            parts = n.split(".")
            if parts[0] == "paddlecraft" and len(parts) > 1:
                out.add(parts[1])
    return out


@pytest.mark.parametrize("layer", LAYERS[:-1])
def test_no_module_imports_a_layer_above_its_own(layer):
    above = set(LAYERS[LAYERS.index(layer) + 1 :])
    bad = {
        str(p.relative_to(ROOT)): sorted(_imports(p) & above)
        for p in (ROOT / layer).rglob("*.py")
        if _imports(p) & above
    }
    assert bad == {}


def test_the_layer_check_sees_an_upward_import(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from paddlecraft.arenas.games import X\n")
    assert _imports(f) == {"arenas"}


OLD_HOMES = {
    "ConfigError": "paddlecraft.agents.settings",
    "BadDataError": "paddlecraft.craftdata.badfiles",
    "UnsafeConfigError": "paddlecraft.agents.instantiate",
    "DeviceError": "paddlecraft.agents.device",
    "AmpError": "paddlecraft.agents.amp",
    "CheckpointError": "paddlecraft.encoders.tensorio",
    "ScopeError": "paddlecraft.encoders.naming",
    "EncoderInputError": "paddlecraft.encoders.base",
}


@pytest.mark.parametrize("name", sorted(OLD_HOMES))
def test_user_errors_share_one_base_and_keep_their_homes(name):
    cls = getattr(errors, name)
    assert issubclass(cls, errors.PaddleCraftError)
    assert getattr(importlib.import_module(OLD_HOMES[name]), name) is cls
    # code that caught the builtin before still catches it
    assert issubclass(cls, RuntimeError if name == "CheckpointError" else ValueError)


def test_the_export_command_error_is_a_config_error():
    from paddlecraft.arenas.engine.export import ExportConfigError

    assert issubclass(ExportConfigError, errors.ConfigError)


def test_the_command_line_reports_any_user_error_as_one_line(monkeypatch, capsys, tmp_path):
    """A user error type the app never listed (a subclass of the base) still gets the one
    ``error:`` line and exit status 2; anything else keeps its traceback."""
    assert USER_ERRORS == (errors.PaddleCraftError,)

    class MyArenaSettingError(errors.PaddleCraftError):
        pass

    import paddlecraft.arenas.engine.app as app

    def fail(exc):
        def run(*a, **k):
            raise exc

        return run

    monkeypatch.setattr(app, "run_config", fail(MyArenaSettingError("arena.k must be > 0")))
    with pytest.raises(SystemExit) as e:
        main_entry(OmegaConf.create({}), tmp_path)
    assert e.value.code == 2
    assert capsys.readouterr().err == "error: arena.k must be > 0\n"

    monkeypatch.setattr(app, "run_config", fail(KeyError("a bug")))
    with pytest.raises(KeyError):
        main_entry(OmegaConf.create({}), tmp_path)
