"""``python -m paddlecraft ...`` is the ``paddlecraft`` command."""

from paddlecraft.cli import run

run()
