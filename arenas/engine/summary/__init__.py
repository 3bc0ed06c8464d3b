"""Summaries of runs and sweeps: ``summary.csv/json/md`` and ``summary.png``.

- `.runs`: run folders and what is read from each (figures judged after a run included);
- `.stats`: a group's n, mean, std, IQM and 95 % bootstrap intervals;
- `.table`: rows, seed groups, the files;
- `.plot`: the metric against the swept values;
- `.hydra_callback`: every multirun keeps its summary current;
- `.command`: ``paddlecraft summary DIR ... [--by KEY] [--metric NAME] [--mode max|min]``.
"""

from .hydra_callback import SweepSummary, share_sweep_tracking, update_summary
from .runs import RunRecord, SummaryError, find_runs, record_judgement
from .stats import GroupStats, group_stats
from .table import Summary, better_way, build_summary

__all__ = [
    "GroupStats",
    "RunRecord",
    "Summary",
    "SummaryError",
    "SweepSummary",
    "better_way",
    "build_summary",
    "find_runs",
    "group_stats",
    "record_judgement",
    "share_sweep_tracking",
    "update_summary",
]
