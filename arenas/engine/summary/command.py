"""``paddlecraft summary DIR ... [--by KEY] [--metric NAME] [--out DIR]``.

Builds the table a sweep writes at its end from any set of run or sweep folders (runs from
different days, resumed runs, a user's own arena) and prints it as Markdown; ``--out``
also writes ``summary.csv/json/md`` and ``summary.png`` there.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from .runs import SummaryError, find_runs
from .table import build_summary

#: exit code of a refused command (a user mistake)
USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse whose mistakes are one ``error:`` line, exit 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(
            f"error: paddlecraft summary: {message}; usage: paddlecraft summary DIR ... "
            "[--by KEY] [--metric NAME] [--out DIR]\n"
        )
        raise SystemExit(USAGE)


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="paddlecraft summary",
        description="Summarise run and sweep folders: one row per run, seeds grouped "
        "(n, mean, std, IQM, 95% bootstrap CI, min, max).",
    )
    p.add_argument("dirs", nargs="+", metavar="DIR", help="run or sweep folders")
    p.add_argument("--by", action="append", default=None, metavar="KEY",
                   help="group by this setting (repeat or comma-separate for several; "
                   "default: the settings that vary, seed aside)")  # fmt: skip
    p.add_argument("--metric", default=None, metavar="NAME",
                   help="the final metric to summarise (default: the headline)")  # fmt: skip
    p.add_argument("--mode", default=None, choices=("max", "min"),
                   help="which way the metric is better (default: the runs' word for their "
                   "headline, else by its name: lower for losses, mistakes, errors, FID, "
                   "WER/CER, perplexity, regret, NLL, (R)MSE, MAE, distances, diffs; higher "
                   "otherwise)")  # fmt: skip
    p.add_argument("--out", default=None, metavar="DIR",
                   help="also write summary.csv/json/md and summary.png there")  # fmt: skip
    return p


def main(argv: Sequence[str]) -> int:
    """Print the Markdown summary of ``argv``'s folders; 0, or 2 for a mistake."""
    args = parser().parse_args(list(argv))
    by = None if args.by is None else [k for item in args.by for k in item.split(",") if k]
    if args.out and os.path.exists(args.out) and not os.path.isdir(args.out):
        sys.stderr.write(
            f"error: --out {args.out}: a file is there; --out names a folder for "
            "summary.csv/json/md and summary.png: give a new or existing folder\n"
        )
        return USAGE
    try:
        summary = build_summary(find_runs(args.dirs), metric=args.metric, by=by, mode=args.mode)
    except SummaryError as e:
        sys.stderr.write(f"error: {e}\n")
        return USAGE
    if args.out:
        summary.write(args.out)
    sys.stdout.write(summary.markdown())
    return 0
