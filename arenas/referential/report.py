"""End-of-run files of a referential game: messages.jsonl and charts (the engine's plots)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from paddlecraft.encoders.tensorio import atomic_write_bytes, atomic_write_json

from ..engine.live.panels import table_panel
from ..engine.plots import heatmap_chart, line_chart, save

__all__ = ["message_panels", "write_artifacts"]


def _smooth(v: Sequence[float], window: int = 20) -> np.ndarray:
    v = np.asarray(v, np.float64)
    if v.size < window:
        return v
    return np.convolve(v, np.ones(window) / window, mode="valid")


def write_artifacts(
    run_dir: str,
    last: dict[str, Any],
    splits: dict[str, Any],
    speakers: Sequence[str],
    listeners: Sequence[str],
    history: Sequence[float],
    newcomer_curve: Sequence[float],
    snr_points: Sequence[tuple[float, float]] = (),
) -> dict[str, str]:
    """Write messages.jsonl (every evaluated object of every speaker), crossplay.{json,png}
    for populations, snr_curve.png for a spoken channel and newcomer.png when a newcomer
    was taught; return their paths.

    ``last``: the last evaluation's ``messages`` (by speaker name, then split), ``batches``
    and ``crossplay`` matrices; ``splits``: the world's ``train`` and ``test`` objects;
    ``snr_points``: (SNR in dB, accuracy) pairs of the spoken channel, if any.
    """
    d = Path(run_dir)
    out: dict[str, str] = {}
    lines = []
    several = len(speakers) > 1
    for sp in speakers:
        for name, split in splits.items():
            idx = last["batches"][name]["target"]
            for k, msg in zip(idx, last["messages"][sp][name]):
                row: dict = {
                    "meaning": split.meanings[k].tolist() if split.meanings is not None else None,
                    "message": [int(s) for s in msg],
                    "split": name,
                }
                if split.meanings is None:
                    row["index"] = int(k)
                if several:
                    row["speaker"] = sp
                lines.append(json.dumps(row))
    atomic_write_bytes(d / "messages.jsonl", ("\n".join(lines) + "\n").encode())
    out["messages"] = str(d / "messages.jsonl")
    acc = last["crossplay"]
    if acc["test"].size > 1:
        atomic_write_json(
            d / "crossplay.json",
            {
                "rows": list(speakers),
                "columns": list(listeners),
                "accuracy": acc["all"].tolist(),
                "train_accuracy": acc["train"].tolist(),
                "test_accuracy": acc["test"].tolist(),
            },
        )
        save(
            heatmap_chart(
                acc["all"],
                list(speakers),
                list(listeners),
                title="cross-play accuracy, all objects",
                xlabel="listener",
                ylabel="speaker",
            ),
            d / "crossplay.png",
        )
        out["crossplay"] = str(d / "crossplay.json")
        out["crossplay_heatmap"] = str(d / "crossplay.png")
    if snr_points:
        fig = line_chart(
            {"training objects": list(snr_points)},
            title="spoken channel: accuracy against noise",
            xlabel="SNR (dB)",
            ylabel="accuracy",
            ylim=(0.0, 1.0),
        )
        save(fig, d / "snr_curve.png")
        out["snr_curve"] = str(d / "snr_curve.png")
    if newcomer_curve:
        curves = {
            "first generation": _smooth(history),
            "newcomer": _smooth(newcomer_curve),
        }
        n = min(len(v) for v in curves.values())
        series = {k: list(enumerate(v[:n].tolist())) for k, v in curves.items()}
        fig = line_chart(
            series,
            title="ease of teaching (batch accuracy, moving average)",
            xlabel="step",
            ylabel="accuracy",
        )
        save(fig, d / "newcomer.png")
        out["newcomer_curve"] = str(d / "newcomer.png")
    return out


def message_panels(
    last: dict[str, Any], splits: dict[str, Any], speaker: str, rows: int = 12
) -> list[dict[str, Any]]:
    """The live page's tables: the last evaluation's (``last``) greedy messages of
    ``speaker``, ``rows`` objects of each of ``splits`` (meaning, or object index where
    meanings are unknown)."""
    if not last:
        return []
    panels = []
    for name, split in splits.items():
        idx = last["batches"][name]["target"][:rows]
        msgs = last["messages"][speaker][name][:rows]
        known = split.meanings is not None
        table = [
            [
                " ".join(map(str, split.meanings[k].tolist())) if known else int(k),
                " ".join(str(int(s)) for s in msg),
            ]
            for k, msg in zip(idx, msgs)
        ]
        panels.append(
            table_panel(
                f"{speaker}'s messages, {name} objects",
                ["meaning" if known else "object", "message"],
                table,
            )
        )
    return panels
