"""``paddlecraft live RUN_DIR status|pause|resume|checkpoint|evaluate|stop|set k=v|open``.

A client of a live run's endpoint (``trainer.live=true``, docs/live.md): it reads the port
and token from the run folder's ``live.json`` and speaks HTTP to 127.0.0.1 (standard
library only, no Paddle import, so it answers at once). A run that is not live, has ended
or is gone gives one ``error:`` line and exit code 2.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from paddlecraft.errors import PaddleCraftError

#: what ``paddlecraft live RUN_DIR <command>`` takes
ACTIONS = ("status", "pause", "resume", "checkpoint", "evaluate", "stop", "set", "open")
USAGE = (
    "usage: paddlecraft live RUN_DIR status|pause|resume|checkpoint|evaluate|stop|open\n"
    "       paddlecraft live RUN_DIR set key=value [key=value ...]   (e.g. agents.classifier.lr=1e-4)\n"
    "       add --json to print the endpoint's answer as JSON"
)
#: seconds to wait for an answer (a command waits for the next step boundary)
TIMEOUT = 30.0


class LiveClientError(PaddleCraftError):
    """The run is not live, has ended, or refused the command: one ``error:`` line."""


def endpoint(run_dir: Path) -> dict[str, Any]:
    """``live.json`` of a live run (host, port, token), or a one-line `LiveClientError`."""
    if not run_dir.is_dir():
        raise LiveClientError(f"{run_dir}: no such run folder; give the folder a run writes to")
    info = run_dir / "live.json"
    if not info.is_file():
        ended = run_dir / "results.json"
        if ended.is_file():
            status = json.loads(ended.read_text()).get("status", "ended")
            raise LiveClientError(
                f"{run_dir} is not live: the run has ended (status {status}); resume it with "
                f"paddlecraft resume={run_dir} trainer.live=true"
            )
        raise LiveClientError(
            f"{run_dir} is not live: no live.json there (start the run with trainer.live=true)"
        )
    try:
        return json.loads(info.read_text())
    except (OSError, ValueError) as e:
        raise LiveClientError(f"{info} is unreadable ({e}); is the run still starting?") from e


def call(
    info: dict[str, Any], method: str, path: str, body: Any = None, timeout: float = TIMEOUT
) -> tuple[int, Any]:
    """``(status code, JSON answer)`` of one request to the live endpoint."""
    url = f"http://{info['host']}:{info['port']}{path}"
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Authorization", f"Bearer {info['token']}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        try:
            answer = json.loads(e.read() or b"null")
        except ValueError:
            answer = {"error": e.reason}
        return e.code, answer
    except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
        reason = getattr(e, "reason", e)
        raise LiveClientError(
            f"the live run does not answer at {info['host']}:{info['port']} ({reason}); it has "
            "ended or was killed (a stale live.json): resume it with resume=<run> trainer.live=true"
        ) from e


def parse_settings(pairs: Sequence[str]) -> dict[str, Any]:
    """``["agents.x.lr=1e-4", "arena.epochs=3"]`` -> ``{key: typed value}`` (YAML typing,
    as Hydra reads a command line)."""
    import yaml

    out: dict[str, Any] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise LiveClientError(
                f"set: {pair!r} is not key=value (e.g. agents.classifier.lr=1e-4)"
            )
        try:
            out[key] = yaml.safe_load(value) if value else None
        except yaml.YAMLError:
            out[key] = value
        if isinstance(out[key], str):  # YAML reads 1e-4 as a string; Hydra as a float
            try:
                out[key] = float(out[key])
            except ValueError:
                pass
    if not out:
        raise LiveClientError("set: give at least one key=value (e.g. agents.classifier.lr=1e-4)")
    return out


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def format_status(s: dict[str, Any]) -> str:
    """The status answer as a few lines for a person."""
    total = f"/{s['total_steps']}" if s.get("total_steps") else ""
    eta = f"  ETA {_clock(s['eta_s'])}" if s.get("eta_s") is not None else ""
    lines = [
        f"{s.get('arena')}: {s['state']}  step {s['step']}{total} (epoch {s['epoch']})  "
        f"{s.get('steps_per_s', 0):.3g} steps/s{eta}"
    ]
    if s.get("last_metrics"):
        lines.append("train: " + _fmt(s["last_metrics"]))
    if s.get("last_eval"):
        lines.append("eval:  " + _fmt(s["last_eval"]))
    return "\n".join(lines)


def _fmt(metrics: dict[str, Any]) -> str:
    return "  ".join(
        f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in metrics.items()
    )


def run_command(run_dir: Path, action: str, rest: Sequence[str], as_json: bool) -> str:
    """Do ``action`` against the live run in ``run_dir``; the text to print."""
    info = endpoint(run_dir)
    if action == "open":
        return f"http://{info['host']}:{info['port']}/#token={info['token']}"
    if action == "status":
        code, answer = call(info, "GET", "/api/status")
    else:
        body = parse_settings(rest) if action == "set" else None
        code, answer = call(info, "POST", f"/api/{action}", body)
    if code == 401:
        raise LiveClientError(f"the live run refused the token in {run_dir}/live.json")
    if code >= 400:
        message = answer.get("error") if isinstance(answer, dict) else answer
        raise LiveClientError(str(message))
    if as_json:
        return json.dumps(answer)
    if action == "status":
        return format_status(answer)
    if code == 202:
        return f"{action}: queued at step {answer['step']}; applied at the next step boundary"
    line = f"{action}: applied at step {answer['step']} (state {answer['state']})"
    if answer.get("path"):
        line += f": {run_dir / answer['path']}"
    if answer.get("metrics"):
        line += ": " + _fmt(answer["metrics"])
    for key, change in (answer.get("changes") or {}).items():
        line += f"\n  {key}: {change['from']!r} -> {change['to']!r}"
    return line


def main(argv: Sequence[str]) -> int:
    """``paddlecraft live ...``; returns the exit code (2: one ``error:`` line)."""
    args = [a for a in argv if a != "--json"]
    as_json = len(args) != len(argv)
    if args[:1] in (["-h"], ["--help"]) or len(args) < 2:
        if args[:1] in (["-h"], ["--help"]):
            sys.stdout.write(USAGE + "\n")
            return 0
        missing = "RUN_DIR and a command" if not args else f"a command after {args[0]}"
        sys.stderr.write(f"error: paddlecraft live: give {missing} ({', '.join(ACTIONS)})\n")
        sys.stderr.write(USAGE + "\n")
        return 2
    run_dir, action, rest = Path(args[0]), args[1], args[2:]
    if action not in ACTIONS:
        sys.stderr.write(f"error: unknown live command {action!r}; one of {', '.join(ACTIONS)}\n")
        return 2
    if rest and action != "set":
        sys.stderr.write(f"error: {action} takes no arguments (got {' '.join(rest)})\n")
        return 2
    try:
        sys.stdout.write(run_command(run_dir, action, rest, as_json) + "\n")
    except LiveClientError as e:
        sys.stderr.write(f"error: {' '.join(str(e).split())}\n")
        return 2
    return 0
