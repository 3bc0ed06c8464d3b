"""PaddleCraft: multi-agent, multimodal deep learning experiments on PaddlePaddle.

One namespace: ``paddlecraft.encoders`` (models as APIs), ``paddlecraft.agents`` (an
encoder with its own name scope, optimizer and device), ``paddlecraft.arenas`` (how agents
meet), ``paddlecraft.craftdata`` (bundled, generated and your own data) and
``paddlecraft.conf`` (the built-in Hydra configs). The command line is ``paddlecraft``
(:mod:`paddlecraft.cli`); in a checkout, ``python run.py`` is the same command.

How the namespace maps onto the repository: the repository keeps its top-level folders
(``agents/``, ``encoders/``, ``arenas/``, ``craftdata/``, ``conf/``); the wheel installs them
as ``paddlecraft/agents`` ... through setuptools' ``package-dir`` mapping (pyproject.toml).
In a checkout that is not installed, this package adds the repository root to its own
``__path__``, so ``paddlecraft.agents`` is ``<root>/agents`` there too. Nothing else is
installed at the top level of site-packages.
"""

from __future__ import annotations

from importlib import metadata as _metadata
from pathlib import Path as _Path

_here = _Path(__file__).resolve().parent
if not (_here / "agents").is_dir() and (_here.parent / "agents" / "__init__.py").is_file():
    __path__.append(str(_here.parent))  # a checkout: paddlecraft.agents is <root>/agents

try:
    __version__ = _metadata.version("paddlecraft")
except _metadata.PackageNotFoundError:  # a checkout that was never installed
    __version__ = "0.0.0+checkout"

__all__ = ["__version__"]
