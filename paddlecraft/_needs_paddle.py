"""Importing this module raises `paddlecraft.PaddleMissingError` when no build of
PaddlePaddle is installed: one line naming the CPU and GPU installs instead of
``No module named 'paddle'`` from deep inside a subpackage."""

from paddlecraft import require_paddle

require_paddle()
