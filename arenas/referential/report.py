"""End-of-run files of a referential game: messages.jsonl and charts (the engine's plots)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from paddlecraft.encoders.tensorio import atomic_write_bytes, atomic_write_json

from ..engine.live.panels import table_panel
from ..engine.plots import heatmap_chart, line_chart, save

if TYPE_CHECKING:
    from .arena import ReferentialArena

__all__ = ["message_panels", "write_artifacts"]


def _smooth(v: Sequence[float], window: int = 20) -> np.ndarray:
    v = np.asarray(v, np.float64)
    if v.size < window:
        return v
    return np.convolve(v, np.ones(window) / window, mode="valid")


def write_artifacts(arena: ReferentialArena, run_dir: str) -> dict[str, str]:
    """Write messages.jsonl (every evaluated object of every speaker), crossplay.{json,png}
    for populations and newcomer.png when a newcomer was taught; return their paths."""
    d = Path(run_dir)
    out: dict[str, str] = {}
    last = arena.last or {}
    if not last:
        arena.evaluate()
        last = arena.last
    lines = []
    splits = {"train": arena.world.train, "test": arena.world.test}
    several = len(arena.speakers) > 1
    for sp in arena.speakers:
        for name, split in splits.items():
            idx = last["batches"][name]["target"]
            for k, msg in zip(idx, last["messages"][sp.name][name]):
                row: dict = {
                    "meaning": split.meanings[k].tolist() if split.meanings is not None else None,
                    "message": [int(s) for s in msg],
                    "split": name,
                }
                if split.meanings is None:
                    row["index"] = int(k)
                if several:
                    row["speaker"] = sp.name
                lines.append(json.dumps(row))
    atomic_write_bytes(d / "messages.jsonl", ("\n".join(lines) + "\n").encode())
    out["messages"] = str(d / "messages.jsonl")
    acc = last["crossplay"]
    if acc["test"].size > 1:
        atomic_write_json(
            d / "crossplay.json",
            {
                "rows": [s.name for s in arena.speakers],
                "columns": [li.name for li in arena.listeners],
                "accuracy": acc["all"].tolist(),
                "train_accuracy": acc["train"].tolist(),
                "test_accuracy": acc["test"].tolist(),
            },
        )
        save(
            heatmap_chart(
                acc["all"],
                [s.name for s in arena.speakers],
                [li.name for li in arena.listeners],
                title="cross-play accuracy, all objects",
                xlabel="listener",
                ylabel="speaker",
            ),
            d / "crossplay.png",
        )
        out["crossplay"] = str(d / "crossplay.json")
        out["crossplay_heatmap"] = str(d / "crossplay.png")
    curve = getattr(arena, "snr_curve", None)
    if arena.voice is not None and curve:
        pts = list(zip(arena.cfg.eval_snrs, curve))
        fig = line_chart(
            {"training objects": pts},
            title="spoken channel: accuracy against noise",
            xlabel="SNR (dB)",
            ylabel="accuracy",
            ylim=(0.0, 1.0),
        )
        save(fig, d / "snr_curve.png")
        out["snr_curve"] = str(d / "snr_curve.png")
    if arena.newcomer_curve:
        curves = {
            "first generation": _smooth(arena.history),
            "newcomer": _smooth(arena.newcomer_curve),
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


def message_panels(arena: ReferentialArena, rows: int = 12) -> list[dict[str, Any]]:
    """The live page's tables: the last evaluation's greedy messages of the first speaker,
    ``rows`` objects per split (meaning, or object index where meanings are unknown)."""
    last = arena.last or {}
    if not last:
        return []
    sp = arena.speakers[0]
    panels = []
    for name, split in (("train", arena.world.train), ("test", arena.world.test)):
        idx = last["batches"][name]["target"][:rows]
        msgs = last["messages"][sp.name][name][:rows]
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
                f"{sp.name}'s messages, {name} objects",
                ["meaning" if known else "object", "message"],
                table,
            )
        )
    return panels
