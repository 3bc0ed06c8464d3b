"""PaddleCraft: multi-agent, multimodal deep learning experiments on PaddlePaddle.

One namespace: ``paddlecraft.encoders`` (models as APIs), ``paddlecraft.agents`` (an
encoder with its own name scope, optimizer and device), ``paddlecraft.arenas`` (how agents
meet), ``paddlecraft.craftdata`` (bundled, generated and your own data) and
``paddlecraft.conf`` (the built-in Hydra configs). The command line is ``paddlecraft``
(`paddlecraft.cli`); in a checkout, ``python run.py`` is the same command.

How the namespace maps onto the repository: the repository keeps its top-level folders
(``agents/``, ``encoders/``, ``arenas/``, ``craftdata/``, ``conf/``); the wheel installs them
as ``paddlecraft/agents`` ... through setuptools' ``package-dir`` mapping (pyproject.toml).
In a checkout that is not installed, this package adds the repository root to its own
``__path__``, so ``paddlecraft.agents`` is ``<root>/agents`` there too. Nothing else is
installed at the top level of site-packages.
"""

from __future__ import annotations

import sys as _sys
from importlib import metadata as _metadata
from importlib import util as _util
from pathlib import Path as _Path

_here = _Path(__file__).resolve().parent
if not (_here / "agents").is_dir() and (_here.parent / "agents" / "__init__.py").is_file():
    __path__.append(str(_here.parent))  # a checkout: paddlecraft.agents is <root>/agents

try:
    __version__ = _metadata.version("paddlecraft")
except _metadata.PackageNotFoundError:  # a checkout that was never installed
    __version__ = "0.0.0+checkout"

#: what to do when no build of PaddlePaddle is installed (docs/install.md has the details)
PADDLE_MISSING = (
    "PaddlePaddle is not installed. CPU: pip install paddlepaddle  |  GPU (CUDA 12.6): "
    "pip install paddlepaddle-gpu==3.3.1 -i https://www.paddlepaddle.org.cn/packages/stable/cu126/"
    "  (other CUDA versions: docs/install.md)"
)


class PaddleMissingError(ImportError):
    """No build of PaddlePaddle (``paddlepaddle`` or ``paddlepaddle-gpu``) is installed."""


def require_paddle() -> None:
    """Raise `PaddleMissingError` (one line naming both installs) if ``paddle`` is absent.

    PaddlePaddle is not a declared dependency (a GPU user's ``paddlepaddle-gpu`` must never be
    replaced by the CPU distribution), so its absence is checked here, without importing it.
    """
    if "paddle" not in _sys.modules and _util.find_spec("paddle") is None:
        raise PaddleMissingError(PADDLE_MISSING)


__all__ = ["PADDLE_MISSING", "PaddleMissingError", "__version__", "require_paddle"]
