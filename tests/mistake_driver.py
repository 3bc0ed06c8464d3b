"""Runs many command lines through :func:`paddlecraft.cli.main` in ONE process (tests).

``python -m tests.mistake_driver cases.json out.jsonl``: each case is ``{"name", "args",
"cwd"}``; the command runs from ``cwd`` (where Hydra's default run folder lands) and
one JSON line records its exit code, stderr, stdout, an uncaught exception's traceback
and every file left under ``cwd``. Importing Paddle once for all cases keeps the mistake
table fast (each fresh interpreter costs seconds).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback
from pathlib import Path


def run_case(args: list[str], cwd: str) -> dict:
    """One command line; what it printed, returned and left on disk."""
    from paddlecraft.cli import main

    out, err = io.StringIO(), io.StringIO()
    old = os.getcwd()
    os.chdir(cwd)
    tb = ""
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(list(args)) or 0
            except SystemExit as e:
                rc = e.code if isinstance(e.code, int) else 1
            except BaseException:  # noqa: BLE001 (what the command line would have shown)
                tb = traceback.format_exc()
                rc = 1
    finally:
        os.chdir(old)
    left = sorted(str(p.relative_to(cwd)) for p in Path(cwd).rglob("*"))
    return {"rc": rc, "stderr": err.getvalue() + tb, "stdout": out.getvalue(), "left": left}


def register_once() -> None:
    """Register the built-in configs now, and make ``cli.main``'s own call a no-op after:
    a command registers them once in its process, and so does this one for all its cases
    (registering again stores the same schemas again, a quarter of a case's time)."""
    import paddlecraft.arenas as arenas

    arenas.register_configs()
    arenas.register_configs = lambda: None


def main() -> None:
    cases = json.loads(Path(sys.argv[1]).read_text())
    register_once()
    with open(sys.argv[2], "w") as f:
        for case in cases:
            record = {"name": case["name"], **run_case(case["args"], case["cwd"])}
            f.write(json.dumps(record) + "\n")
            f.flush()


if __name__ == "__main__":
    main()
