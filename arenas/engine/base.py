"""The `Arena` base: agents plus the rules by which they learn, from data or each other."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from paddlecraft.agents import Agent
from paddlecraft.agents.settings import ConfigError, make_settings
from paddlecraft.compat import drop_removed, settings_as_saved, upgrade_settings

from .interrupt import StepGate

log = logging.getLogger("paddlecraft")


class StepAborted(RuntimeError):
    """``train_step`` failed before it changed any state (e.g. a collection worker raised).

    Raise it (or a subclass) from ``train_step`` only when nothing of the failed step was
    applied. The engine then ends the run with status ``aborted`` and still checkpoints the
    last completed step, so ``resume=<run dir>`` retries the failed one; the command line
    prints the message as one ``error:`` line and exits 1.
    """


@dataclass
class ArenaConfig:
    """Settings every arena takes (each arena's ``Config`` extends this)."""

    epochs: int = 1  #: passes over the arena's training data


class Arena:
    """Agents and the rules that make them learn: implement four methods, get a full run.

    A subclass implements `batches` (one epoch of training inputs, a function of
    ``(seed, epoch)`` only, so resume can replay the order), `train_step` (one
    update, returns float metrics), `evaluate` (returns float metrics including
    `headline`) and, if it keeps state beyond its agents, `arena_state` /
    `load_arena_state`. The engine (`Loop`) adds progress,
    logging, checkpoints, resume, early stopping and NaN guards.

    Settings are declared once, as a dataclass extending `ArenaConfig` assigned
    to ``Config``: it is the constructor's keywords (checked and typed into ``self.cfg``),
    the Hydra schema (`paddlecraft.arenas.engine.register_schemas`) and what ``config.yaml``
    records (see `paddlecraft.agents.settings`).

    Args:
        agents: the agents by name (each owns its optimizer and device).
        seed: run seed; data order per epoch derives from it.
        **settings: the fields of ``Config`` (``epochs``...).
    """

    #: the settings dataclass: constructor keywords, Hydra schema and saved record
    Config: ClassVar[type] = ArenaConfig

    #: the metric printed, written to results.json and returned to Hydra sweepers
    headline: str = "score"
    #: whether a larger headline is better ("max") or smaller ("min")
    headline_mode: str = "max"
    #: True when ``train_step`` changes no state before its end and calls
    #: `check_interrupt` in its long loops: a stop, pause or signal then abandons the
    #: step mid-way and a resume re-runs it (`interrupt`)
    interruptible: bool = False
    #: True when the run folder keeps every input the run consumed (a stream's sample
    #: log): a resume that finds no checkpoint starts again from step 0 on those inputs,
    #: which replays the run, instead of being refused
    replays_from_start: bool = False

    def __init__(self, agents: Mapping[str, Agent], seed: int = 0, **settings: Any) -> None:
        self.cfg = make_settings(self.Config, settings, who="arena")
        if self.cfg.epochs < 1:
            raise ConfigError(f"arena.epochs must be >= 1, got {self.cfg.epochs}")
        self.agents: dict[str, Agent] = dict(agents)
        self.epochs = int(self.cfg.epochs)
        self.seed = int(seed)
        #: the run folder, for files written during training; set by `setup`
        self.run_dir: str | None = None
        #: the live run's hooks (`LiveContext`) while
        #: ``trainer.live=true``, set by the engine before the first step; None otherwise
        self.live: Any = None
        #: set by the engine's loop; `check_interrupt` polls it
        self.step_gate: StepGate | None = None

    @classmethod
    def upgrade_saved(cls, config: dict[str, Any]) -> dict[str, str]:
        """Bring the ``arena`` settings of a run saved by an older PaddleCraft (its
        ``config.yaml``) up to date, in place, before a resume; returns ``{old: new}`` key
        renames for the log.

        The base moves the keys its ``Config`` lists in ``RENAMED`` (``{old key: new dotted
        key}``, see `upgrade_settings`) and gives the settings its ``Config`` lists in
        ``AS_BEFORE`` (``{dotted key: the value before the setting existed}``) that value
        where the run saved none (`settings_as_saved`; logged); the settings its ``Config``'s
        ``REMOVED`` names as a `paddlecraft.compat.REMOVED` table leave or refuse the run
        (`drop_removed`); an arena whose saved settings changed otherwise overrides this.
        """
        moved = upgrade_settings(cls.Config, config)
        kind = getattr(cls.Config, "REMOVED", None)
        if kind:
            drop_removed(config, kind, "arena.")
        for key, value in settings_as_saved(cls.Config, config).items():
            log.info("resume: the run was saved before arena.%s existed; it keeps %r", key, value)
        return moved

    def setup(self, run_dir: str) -> None:
        """Called by the engine once per run, when its `Loop` is made:
        before a checkpoint is restored and before the first batch. ``run_dir`` is the run
        folder, for files written during training. Override to bind what depends on it (a
        file dataset records its split there, or adopts the one recorded) and call
        ``super().setup(run_dir)``. Without an engine (plain Python), ``run_dir`` stays None."""
        self.run_dir = str(run_dir)

    def check_config(self, cfg: Any) -> None:
        """Refuse (`ConfigError`) settings ``cfg`` (a ``Config``) this arena cannot run
        with: the cross-checks its constructor makes. A live ``set`` of an ``arena.*``
        setting calls it with the changed settings before applying them. Default: none."""

    def require_agents(self, *names: str) -> None:
        """Raise a clear error unless every named agent is configured."""
        missing = [n for n in names if n not in self.agents]
        if missing:
            raise ConfigError(
                f"{type(self).__name__} needs agents {list(names)}; missing {missing} "
                f"(configured: {sorted(self.agents)}). Add them under agents.<name> in the config."
            )

    def epoch_rng(self, epoch: int) -> np.random.Generator:
        """A generator that depends only on (seed, epoch): use it for data order."""
        return np.random.default_rng([self.seed, epoch])

    # ------------------------------------------------------------------ to implement
    def batches(self, epoch: int) -> Iterable[Any]:
        """Training inputs of one epoch, in a deterministic order for ``(seed, epoch)``.

        An arena may take a second argument, ``batches(epoch, start=0)``: the epoch's
        batches from number ``start`` on. The loop then resumes mid-epoch through it
        instead of drawing and dropping the first ``start`` batches (what a lazy file
        reader needs: the skipped batches are never decoded).
        """
        raise NotImplementedError

    def steps_per_epoch(self) -> int | None:
        """How many items `batches` yields (None if unknown; the bar shows no ETA)."""
        return None

    def train_step(self, batch: Any) -> dict[str, float]:
        """One training update; return float metrics (``loss``...)."""
        raise NotImplementedError

    def evaluate(self) -> dict[str, float]:
        """Evaluation metrics, including `headline`."""
        raise NotImplementedError

    def check_interrupt(self) -> None:
        """In a long ``train_step`` of an `interruptible` arena: raise
        `StepInterrupted` when the engine abandons the step (a stop,
        pause, SIGTERM or Ctrl-C). Cheap (one flag read); a no-op outside a loop."""
        if self.step_gate is not None:
            self.step_gate.check()

    def on_epoch_end(self, epoch: int) -> None:
        """Called after each full epoch (default: step the agents' LR schedulers)."""
        for agent in self.agents.values():
            agent.scheduler_step()

    def chance_level(self) -> float | None:
        """The headline a model that learned nothing scores (None: no meaningful chance
        level). A run ending at or below it is flagged in its last line and results.json."""
        return None

    def arena_state(self) -> dict:
        """JSON-able state beyond agents and RNG streams (pools, ratings...)."""
        return {}

    def load_arena_state(self, state: dict) -> None:
        """Restore `arena_state`."""

    def artifacts(self, run_dir: str) -> dict[str, str]:
        """Write end-of-run files (sample grids, sheets); return ``{name: path}``."""
        return {}

    def media(self) -> dict[str, Any]:
        """What to show at each evaluation besides metrics: ``{tag: Image | Audio | Text}``.

        Loggers (``trainer.visualdl=true``) write each item as its kind; a bare numpy
        array is an image. See `paddlecraft.arenas.engine.media`.
        """
        return {}

    def live_routes(self, live: Any) -> list[Any]:
        """Extra HTTP routes of a live run (Starlette routes under ``/api/arena/``), served
        with the token check like every data route; handlers touch agents or arena state
        only through ``live.call_soon``. Default: none."""
        return []

    def live_view(self) -> dict[str, Any]:
        """The arena's own picture of the run for the live page (JSON-able: a sample grid as
        a PNG data URL, the latest messages, the current board...); called on the training
        thread. Default: nothing."""
        return {}

    def extra_results(self) -> dict[str, Any]:
        """Entries the arena adds to ``results.json`` at the end of the run (JSON-able; a
        self-play policy's record against people). Default: none."""
        return {}

    def close(self) -> None:
        """Release what the arena started (worker processes...); safe to call twice.

        ``run.py`` calls it when a run ends; scripts can use ``with arena: ...``.
        """

    def __enter__(self) -> Arena:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
