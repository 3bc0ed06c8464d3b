"""Charts (matplotlib, Agg): what is drawn is the data given, at the promised pixel size."""

from __future__ import annotations

import numpy as np
from charts import assert_chart
from matplotlib.colors import to_rgb

from paddlecraft.arenas.classify.plot import render_confusion, save_confusion
from paddlecraft.arenas.engine.plots import (
    confusion_chart,
    curves_chart,
    heatmap_chart,
    interval_chart,
    line_chart,
    save,
    to_bgr,
)
from paddlecraft.arenas.selfplay.plots import rating_history_chart, render_rating_history
from paddlecraft.arenas.selfplay.tournament import ratings_chart


def _pixel(fig, ax, x: float, y: float) -> np.ndarray:
    """The BGR pixel where data point (x, y) of ``ax`` lands in the rendered figure."""
    img = to_bgr(fig)
    px, py = ax.transData.transform((x, y))
    return img[int(round(img.shape[0] - py)), int(round(px))].astype(int)


def test_confusion_chart_shades_each_cell_by_its_share(tmp_path):
    cm = np.array([[8, 2, 0], [0, 10, 0], [5, 0, 5]])
    fig = confusion_chart(cm)
    ax = fig.axes[0]
    np.testing.assert_allclose(ax.images[0].get_array(), cm / cm.sum(1, keepdims=True))
    counts = sorted(t.get_text() for t in ax.texts)
    assert counts == sorted(str(v) for v in cm.ravel())
    full, empty, half = _pixel(fig, ax, 1, 1), _pixel(fig, ax, 2, 0), _pixel(fig, ax, 0, 2)
    assert full.sum() < half.sum() < empty.sum()  # darker = larger share
    assert empty.min() > 235  # a zero cell stays white
    path = save_confusion(cm, tmp_path / "confusion_matrix.png")
    assert_chart(path, (500, 420))
    assert render_confusion(cm).shape == (420, 500, 3)


def test_heatmap_chart_writes_and_shades_each_value(tmp_path):
    acc = np.array([[0.95, 0.40, 0.10], [0.50, 1.00, 0.00]])  # [speakers, listeners]
    fig = heatmap_chart(acc, ["s0", "s1"], ["l0", "l1", "l2"], title="cross-play")
    ax = fig.axes[0]
    np.testing.assert_allclose(ax.images[0].get_array(), acc)
    assert sorted(t.get_text() for t in ax.texts) == sorted(f"{v:.2f}" for v in acc.ravel())
    assert [t.get_text() for t in ax.get_yticklabels()] == ["s0", "s1"]
    dark, light = _pixel(fig, ax, 1.35, 1.35), _pixel(fig, ax, 2.35, 1.35)  # off the text
    assert dark.sum() < light.sum() and light.min() > 235  # 1.0 dark blue, 0.0 white
    path = save(fig, tmp_path / "crossplay.png")
    assert_chart(path, (400, 280))


def test_line_chart_draws_the_series_given(tmp_path):
    series = {"fine-tuned": [(0, 0.2), (10, 0.6), (20, 0.9)], "scratch": [(0, 0.2), (20, 0.5)]}
    fig = line_chart(series, title="acc", hlines={"target 0.85": 0.85}, ylim=(0, 1))
    ax = fig.axes[0]
    drawn = {ln.get_label(): list(zip(ln.get_xdata(), ln.get_ydata())) for ln in ax.lines}
    assert drawn["fine-tuned"] == series["fine-tuned"] and drawn["scratch"] == series["scratch"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["fine-tuned", "scratch"]
    target = [ln for ln in ax.lines if ln.get_linestyle() == "--"]
    assert len(target) == 1 and list(target[0].get_ydata()) == [0.85, 0.85]
    colour = np.array(to_rgb(ax.lines[0].get_color()))[::-1] * 255  # BGR
    assert np.abs(_pixel(fig, ax, 10, 0.6) - colour).max() < 40  # the line passes there
    assert_chart(save(fig, tmp_path / "curves.png"), (900, 520))


def test_rating_history_greys_the_snapshots(tmp_path):
    history = [
        {"step": s, "mu": {"learner": 25 + s, "random": 20.0, **({"snap_2": 26} if s else {})}}
        for s in (0, 2, 4)
    ]
    fig = rating_history_chart(history)
    ax = fig.axes[0]
    by_label = {ln.get_label(): ln for ln in ax.lines}
    assert list(by_label["learner"].get_ydata()) == [25, 27, 29]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "snapshots",
        "learner",
        "random",
    ]
    grey = [ln for ln in ax.lines if ln.get_color() == "0.78" and len(ln.get_xdata())]
    assert len(grey) == 1 and list(grey[0].get_ydata()) == [26, 26]
    assert render_rating_history(history).shape == (520, 900, 3)
    assert_chart(save(fig, tmp_path / "ratings.png"), (900, 520))
    empty = line_chart({}, title="nothing")
    assert "no data yet" in [t.get_text() for t in empty.axes[0].texts]


def test_ratings_chart_puts_each_player_on_its_row(tmp_path):
    table = [
        {"player": "minimax", "rating": 310.0, "ci95": [250.0, 370.0]},
        {"player": "net", "rating": 120.0, "ci95": [60.0, 180.0]},
        {"player": "random", "rating": 0.0, "ci95": [-40.0, 40.0]},
    ]
    fig = ratings_chart(table)
    ax = fig.axes[0]
    rows = sorted(zip(ax.get_yticks(), (t.get_text() for t in ax.get_yticklabels())))
    assert [name for _, name in rows] == ["random", "net", "minimax"]  # bottom to top
    dots = [ln for ln in ax.lines if ln.get_marker() == "o"]
    assert [(d.get_xdata()[0], d.get_ydata()[0]) for d in dots] == [(310, 2), (120, 1), (0, 0)]
    assert_chart(save(fig, tmp_path / "tournament.png"), (900, 200))
    bare = interval_chart([{"label": "a", "value": 1, "lo": 0, "hi": 2}])
    assert to_bgr(bare).shape == (140, 900, 3)


def test_every_run_draws_its_curves_from_metrics_jsonl(tmp_path):
    import json

    from toy_arenas import Regressor, ToyArena

    from paddlecraft.arenas import run_arena, standard_callbacks

    arena = ToyArena({"reg": Regressor("reg", seed=0)}, epochs=2)
    run_arena(arena, tmp_path, standard_callbacks(progress=False, log_every=2))
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert_chart(tmp_path / "curves.png", (1100, 420))
    fig = curves_chart(records, "neg_mse")
    left, right = fig.axes
    (loss,) = left.lines
    train = [r for r in records if r["kind"] == "train"]
    assert list(loss.get_xdata()) == [r["step"] for r in train] == [2, 4, 6, 8, 10, 12, 14, 16]
    assert list(loss.get_ydata()) == [r["loss"] for r in train]
    (head,) = right.lines
    assert list(head.get_xdata()) == [8, 16] and right.get_title() == "evaluation: neg_mse"
