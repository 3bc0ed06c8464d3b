"""``paddlecraft feed RUN_DIR PATH [--end]``: send a folder to a live ``data=stream`` run.

PATH is laid out as the file readers take it: a folder with one sub-folder per class
(``data=image_folder``; for ``arena=classify``) or a JSONL / COCO captions file
(``data=captions``; for ``arena=caption``). Samples go in order: captions in file order;
class folders by file name across the classes (name your files by arrival order,
``00001.png`` ..., or pass ``--shuffle SEED`` for a seeded random order), ties by class.

The run's ``live.json`` gives the port and token. Feed first asks the run how many samples
it already has and sends from there, so a feed cut short, or a run resumed after a kill,
is completed by running the same command again. Each image is resized (stretched) to the
run's ``data.image_size`` and channels and sent as PNG; the run acknowledges a sample once
it is on disk. ``--end`` ends the stream (alone, or after sending): the run then finishes.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from paddlecraft.errors import PaddleCraftError

__all__ = ["FeedError", "LiveRun", "caption_items", "folder_items", "main", "send"]

LIVE_FILE = "live.json"  #: port and token of a live run, in its folder
#: a stream run's sample log, in its folder (paddlecraft.arenas.stream.store.LOG_FILE)
SAMPLE_LOG = "stream/samples.log"


class FeedError(PaddleCraftError, ValueError):
    """A feed that cannot go on: the message names the file, folder or run and the fix."""


class LiveRun:
    """The HTTP API of a live run, from its ``live.json`` (``{"port", "token", "host"?}``)."""

    def __init__(self, run_dir: str | os.PathLike, timeout: float = 60.0) -> None:
        path = Path(run_dir) / LIVE_FILE
        try:
            info = json.loads(path.read_text())
            port, self.token = int(info["port"]), str(info["token"])
        except FileNotFoundError:
            if (Path(run_dir) / SAMPLE_LOG).is_file():  # a stream run that is not running
                raise FeedError(
                    f"{run_dir} is a stream run that is not running; its acknowledged samples "
                    f"are kept in {SAMPLE_LOG}: resume it with python run.py resume={run_dir}, "
                    "then feed again (it sends from where the run is)"
                ) from None
            raise FeedError(
                f"{path}: not found; is {run_dir} a live run that is still running "
                "(python run.py ... data=stream trainer.live=true)?"
            ) from None
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise FeedError(f"{path}: not a live run's file ({type(e).__name__}: {e})") from None
        host = str(info.get("host") or "127.0.0.1")
        host = f"[{host}]" if ":" in host else host
        self.base = f"http://{host}:{port}/api/arena"
        self.timeout = timeout

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """``method`` ``/api/arena/<path>`` with the token; the JSON answer. A refusal (4xx)
        raises `FeedError` with the run's message."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"{self.base}/{path}", data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            try:
                why = json.loads(e.read()).get("error", e.reason)
            except ValueError:
                why = e.reason
            raise FeedError(f"the run refused {method} {path} (HTTP {e.code}): {why}") from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise FeedError(
                f"cannot reach the run at {self.base} ({reason}); is it still running? "
                "(resume it with resume=<run dir>, then feed again: it sends from where the "
                "run is)"
            ) from None


def folder_items(path: Path, shuffle: int | None = None) -> list[tuple[Path, str]]:
    """``(image file, class name)`` of a class-folder tree, in sending order."""
    from paddlecraft.craftdata.image_folder import class_names
    from paddlecraft.craftdata.images import IMAGE_EXTENSIONS

    items: list[tuple[str, str, Path]] = []
    for name in class_names(path, "PATH"):
        for d, _, files in os.walk(path / name):
            for f in files:
                if f.lower().endswith(IMAGE_EXTENSIONS) and not f.startswith("."):
                    items.append((f, name, Path(d) / f))
    items.sort(key=lambda t: (t[0], t[1], str(t[2])))
    out = [(p, name) for _, name, p in items]
    if shuffle is not None:
        import numpy as np

        out = [out[i] for i in np.random.default_rng(shuffle).permutation(len(out))]
    return out


def caption_items(path: Path, image_root: Path | None = None) -> list[tuple[Path, str]]:
    """``(image file, caption)`` of a JSONL / COCO captions file, in file order."""
    from paddlecraft.craftdata.captions import read_caption_file

    root = image_root or path.parent
    return [(root / image, caption) for image, caption in read_caption_file(path)]


def encode_png(path: Path, channels: int, image_size: int) -> str:
    """The image file as base64 PNG, resized (stretched) to the run's size and channels."""
    import cv2

    from paddlecraft.craftdata.images import decode_image

    try:
        img = decode_image(path, channels)
    except ValueError as e:
        raise FeedError(f"{path}: {e}; fix or remove the file, then feed again") from None
    if img.shape[:2] != (image_size, image_size):
        shrink = image_size < min(img.shape[:2])
        interp = cv2.INTER_AREA if shrink else cv2.INTER_LINEAR
        img = cv2.resize(img, (image_size, image_size), interpolation=interp)
    if img.ndim == 3:
        img = cv2.cvtColor(img, cv2.COLOR_RGB2BGR)
    ok, buf = cv2.imencode(".png", img)
    if not ok:
        raise FeedError(f"{path}: cannot be encoded as PNG")
    return base64.b64encode(buf.tobytes()).decode()


def send(
    run: LiveRun,
    path: Path | None,
    *,
    end: bool = False,
    shuffle: int | None = None,
    image_root: Path | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Send what the run does not have yet of ``path``, then end the stream if ``end``;
    return ``{"sent", "count", "ended"}``."""
    from tqdm import tqdm

    info = run.call("GET", "stream")
    have, sent = int(info["count"]), 0
    if path is not None:
        if not path.exists():
            raise FeedError(f"PATH={str(path)!r}: no such folder or file")
        if info["kind"] == "labels":
            if not path.is_dir():
                raise FeedError(
                    f"PATH={str(path)!r}: this run streams labelled images: give a folder "
                    "with one sub-folder per class (the data=image_folder layout)"
                )
            items = folder_items(path, shuffle)
            field = "label"
        else:
            if not path.is_file():
                raise FeedError(
                    f"PATH={str(path)!r}: this run streams captions: give a JSONL or COCO "
                    "captions file (the data=captions layout)"
                )
            items = caption_items(path, image_root)
            field = "caption"
        if have > len(items):
            raise FeedError(
                f"the run already has {have} samples but PATH holds {len(items)}: is it the "
                "folder this run was fed from?"
            )
        if have < len(items) and info["ended"]:
            raise FeedError(f"the run's stream has ended at {have} samples; nothing more is taken")
        bar = tqdm(total=len(items), initial=have, unit="sample", disable=not progress)
        for i in range(have, len(items)):
            image, target = items[i]
            png = encode_png(image, int(info["channels"]), int(info["image_size"]))
            try:
                run.call("POST", "samples", {"image": png, field: target, "index": i})
            except FeedError as e:
                raise FeedError(f"{image}: {e}") from None
            sent += 1
            bar.update(1)
        bar.close()
    out = {"sent": sent, "count": have + sent, "ended": bool(info["ended"])}
    if end:
        out.update(run.call("POST", "end"))
    return out


#: the command's arguments, as its one-line refusals repeat them
USAGE_LINE = (
    "usage: paddlecraft feed RUN_DIR [PATH] [--end] [--shuffle SEED] [--image-root DIR] "
    "[--timeout SECONDS] [--no-progress]"
)


class _Parser(argparse.ArgumentParser):
    """argparse whose mistakes are one ``error:`` line (with the usage), exit 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"error: paddlecraft feed: {message}; {USAGE_LINE}\n")
        raise SystemExit(2)


def main(argv: Sequence[str]) -> int:
    """``paddlecraft feed RUN_DIR [PATH] [--end] [--shuffle SEED] [--image-root DIR]``."""
    p = _Parser(
        prog="paddlecraft feed",
        description="Send a folder (classes) or captions file to a live data=stream run.",
    )
    p.add_argument("run_dir", help="the live run's folder (holds live.json)")
    p.add_argument("path", nargs="?", help="class folders, or a JSONL/COCO captions file")
    p.add_argument("--end", action="store_true", help="end the stream afterwards")
    p.add_argument("--shuffle", type=int, default=None, metavar="SEED", help="seeded order")
    p.add_argument("--image-root", default=None, help="caption image paths relative to this")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per request (> 0)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = p.parse_args(list(argv))
    if args.path is None and not args.end:
        p.error("give PATH to send, or --end to end the stream")
    if not 0 < args.timeout < float("inf"):
        p.error(f"--timeout {args.timeout:g}: give the seconds to wait per request, > 0 (e.g. 60)")
    try:
        run = LiveRun(args.run_dir, args.timeout)
        out = send(
            run,
            Path(args.path) if args.path else None,
            end=args.end,
            shuffle=args.shuffle,
            image_root=Path(args.image_root) if args.image_root else None,
            progress=not args.no_progress,
        )
    except PaddleCraftError as e:
        sys.stderr.write(f"error: {' '.join(str(e).split())}\n")
        return 2
    ended = " (stream ended)" if out.get("ended") else ""
    sys.stdout.write(f"sent {out['sent']} samples; the run has {out['count']}{ended}\n")
    return 0
