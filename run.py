"""PaddleCraft command line in a checkout: ``python run.py arena=<name> [key=value ...]``.

The same command as the installed ``paddlecraft`` console script (`paddlecraft.cli`):
Hydra composes the built-in configs of ``conf/``, the arena runs, and
``python run.py export=<run dir> export.agent=<name>`` exports a trained agent.
"""

from paddlecraft.cli import run

if __name__ == "__main__":
    run()
