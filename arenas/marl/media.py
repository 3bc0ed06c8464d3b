"""What a MARL run leaves to look at: per-group return curves (PNG), an episode (GIF)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..engine.plots import line_chart, save

#: frames per second of episode.gif
GIF_FPS = 8


def return_curves(history: Sequence[Mapping[str, float]], groups: Sequence[str],
                  run_dir: str) -> str:  # fmt: skip
    """``returns.png``: the evaluation's episode return (summed over agents) and each
    group's, against updates."""
    series = {"all agents": [(h["update"], h["episode_return"]) for h in history]}
    for g in groups:
        series[g] = [(h["update"], h[f"return_{g}"]) for h in history if f"return_{g}" in h]
    fig = line_chart(series, title="Evaluation: mean episode return", xlabel="update",
                     ylabel="return (summed over the group's agents)")  # fmt: skip
    return str(save(fig, Path(run_dir) / "returns.png"))


def episode_frames(arena: Any, seed: int = 0, max_frames: int = 200) -> list[np.ndarray]:
    """One episode of the trained policies (greedy) rendered with ``render_mode='rgb_array'``:
    ``[H, W, 3]`` uint8 frames, the first before any action."""
    from .vector import BatchedEnv

    try:
        venv = BatchedEnv(partial_render(arena), 1, arena.groups)
    except TypeError:
        return []
    env = venv.envs[0]
    venv.reset([seed])
    frames = [np.asarray(env.render())]
    rng = np.random.default_rng(seed)
    for _ in range(max_frames):
        obs = venv.observations()
        actions = {}
        for g, pol in arena.policies.items():
            o = obs[g]
            act, _ = pol.sample(o.reshape(-1, *o.shape[2:]), rng, greedy=True)
            actions[g] = act.reshape(1, o.shape[1], *act.shape[1:])
        out = venv.step(actions)
        frame = env.render()
        if frame is not None:
            frames.append(np.asarray(frame))
        if out["ended"][0]:
            break
    venv.close()
    return [f for f in frames if f is not None and f.ndim == 3]


def partial_render(arena: Any) -> Any:
    from functools import partial

    from .envs import make_env

    e = arena.cfg.env
    return partial(make_env, e.name, dict(e.kwargs or {}), e.cls, render_mode="rgb_array")


def gif_bytes(frames: Sequence[np.ndarray]) -> bytes:
    """An animated GIF (looping, `GIF_FPS` frames per second) of ``[H, W, 3]`` uint8 frames."""
    import io

    from PIL import Image

    images = [Image.fromarray(f.astype(np.uint8)[..., :3]) for f in frames]
    buf = io.BytesIO()
    images[0].save(buf, format="GIF", save_all=True, append_images=images[1:],
                   duration=int(1000 / GIF_FPS), loop=0)  # fmt: skip
    return buf.getvalue()


def write_animation(arena: Any, run_dir: str) -> str | None:
    """``episode.gif`` in the run folder (None when the environment renders no frames)."""
    frames = episode_frames(arena)
    if not frames:
        return None
    path = Path(run_dir) / "episode.gif"
    path.write_bytes(gif_bytes(frames))
    return str(path)


def live_panels(arena: Any) -> list[dict[str, Any]]:
    """The live page's view: the last evaluation per group (a table) and an episode of the
    current policies (a GIF; rendered once per evaluation)."""
    import base64

    from ..engine.live.panels import table_panel

    panels = []
    if arena.history:
        last = arena.history[-1]
        rows = [[g, round(last.get(f"return_{g}", float("nan")), 2)] for g in arena.groups]
        rows.append(["all agents", round(last["episode_return"], 2)])
        panels.append(table_panel(f"evaluation at update {int(last['update'])}",
                                  ["group", "episode return"], rows))  # fmt: skip
    key = len(arena.history)
    if arena.cfg.animation and arena.live_gif[0] != key:
        frames = episode_frames(arena)
        src = (
            "data:image/gif;base64," + base64.b64encode(gif_bytes(frames)).decode()
            if frames
            else None
        )
        arena.live_gif = (key, src)
    src = arena.live_gif[1]
    if src:
        panels.append({"kind": "image", "label": "an episode of the current policies", "src": src})
    return panels
