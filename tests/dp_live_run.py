"""A data-parallel live run for tests/test_live_dp.py (not collected: no ``test_`` prefix).

Run under ``python -m paddle.distributed.launch --nproc_per_node 2``. The digits
classifier trains ``k + 3`` steps with ``trainer.live`` on. At the end of step ``k``,
rank 0 queues, on its own live control, a ``set`` of the learning rate, an ``evaluate``
and a ``pause``; a thread resumes the run ``--pause`` seconds later. Every rank records,
per step, the learning rate its optimizer trained with and when the step ended, the steps
it evaluated at, then its final weights:
``OUT/rank<r>.json`` and ``OUT/weights_<r>.npz``; the run folder is ``OUT/run``.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
NEW_LR = 5e-4


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--k", type=int, default=4, help="the step the set and the pause apply at")
    ap.add_argument("--pause", type=float, default=3.0, help="seconds rank 0 stays paused")
    ap.add_argument("--heartbeat", type=float, default=None, help="LiveControl.heartbeat_s")
    args = ap.parse_args()

    from hydra import compose, initialize_config_dir

    from paddlecraft.agents.distributed import rank
    from paddlecraft.arenas import register_configs
    from paddlecraft.arenas.engine import Callback
    from paddlecraft.arenas.engine import app as engine_app
    from paddlecraft.arenas.engine.live.control import LiveControl

    class Probe(Callback):
        """Records the learning rate of each step and the steps evaluated at; on rank 0, sets
        the learning rate, evaluates and pauses at step k."""

        def __init__(self, live: LiveControl) -> None:
            self.live, self.steps, self.evaluations = live, [], []

        def on_step_end(self, loop, metrics) -> None:  # before the live control's step end
            lr = loop.arena.agents["classifier"].optimizer.get_lr()
            self.steps.append({"step": loop.step, "lr": lr, "time": time.monotonic()})
            if rank() == 0 and loop.step == args.k:
                self.live.submit("set", {"agents.classifier.lr": NEW_LR})
                self.live.submit("evaluate")
                self.live.submit("pause")

                def resume_later() -> None:
                    time.sleep(args.pause)
                    self.live.submit("resume")

                threading.Thread(target=resume_later, daemon=True).start()

        def on_eval_end(self, loop, metrics) -> None:
            self.evaluations.append(loop.step)

        def on_run_end(self, loop) -> None:
            agent = loop.arena.agents["classifier"]
            np.savez(
                args.out / f"weights_{rank()}.npz",
                **{p.name: p.numpy() for p in agent.parameters()},
            )
            (args.out / f"rank{rank()}.json").write_text(
                json.dumps({"steps": self.steps, "evaluations": self.evaluations})
            )

    real = engine_app.trainer_callbacks

    def with_probe(cfg, overrides=()):
        cbs = real(cfg, overrides)
        live = next(cb for cb in cbs if isinstance(cb, LiveControl))
        if args.heartbeat is not None:
            live.heartbeat_s = args.heartbeat
        return [*cbs, Probe(live)]

    engine_app.trainer_callbacks = with_probe
    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=["arena=classify", "trainer.live.enabled=true",
                                           f"trainer.max_steps={args.k + 3}",
                                           "trainer.progress=false"])  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    engine_app.run_config(cfg, args.out / "run")


if __name__ == "__main__":
    main()
