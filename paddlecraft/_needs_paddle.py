"""Importing this module raises `paddlecraft.PaddleMissingError` when no build of
PaddlePaddle is installed: one line naming the CPU and GPU installs instead of
``No module named 'paddle'`` from deep inside a subpackage. Where Paddle is not imported
yet, it is imported here without its import-time notes on settings made on purpose
(`import_paddle_quietly`: the ``OMP_NUM_THREADS`` warning, "No ccache found"), so a script
that imports the toolkit prints what the toolkit says, not those."""

from paddlecraft import require_paddle
from paddlecraft.encoders.cpu_tuning import import_paddle_quietly

require_paddle()
import_paddle_quietly()
