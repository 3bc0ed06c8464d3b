"""The `Agent` base: a named scope owning encoders/heads, its optimizer, device and seed.

One idea, an agent's life cycle (settings, build under its seed, own parameters, update,
save/load/pretrained). Beside it: the settings every agent takes (``settings``), optimizer
state (``optim``), devices, data-parallel plumbing, mixed precision (``device``,
``distributed``, ``amp``), building an encoder (``plug``), which parameters it owns
(``ownership``), its saved folder (``saved``), joint updates (``joint``) and older saves
(`paddlecraft.compat`).
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar, TypeVar  # noqa: UP035

import numpy as np
import paddle
from paddle import nn

from paddlecraft.compat import warn_noop
from paddlecraft.encoders.base import Encoder
from paddlecraft.encoders.naming import build_named, check_scope_syntax, check_unique_names
from paddlecraft.encoders.tensorio import (
    assign_by_name,
)

from .amp import Amp
from .device import place_of, resolve_device
from .distributed import allreduce_gradients, world_size
from .instantiate import safe_instantiate, to_plain
from .optim import adam_step, load_optimizer_state, optimizer_state, scheduler_rate_arg
from .ownership import borrowed_params, owned, parameter_table
from .plug import build_encoder
from .saved import read_optimizer, read_saved_class, read_weights, write_saved
from .settings import DEFAULT_OPTIMIZER, AgentConfig, ConfigError, make_settings, settings_record

A = TypeVar("A", bound="Agent")


class Agent(nn.Layer):
    """A learner (or fixed actor) with its own name scope, optimizer, device and seed.

    Every parameter the agent creates is physically named ``<name>.<...>``; the agent's
    optimizer takes exactly those (`own_parameters`), so a parameter borrowed from
    another agent is updated once, by its owner. Subclasses declare their settings once,
    as a dataclass extending `AgentConfig` assigned to ``Config`` (see
    `paddlecraft.agents.settings`), build their modules in ``__init__`` inside
    ``with self.seeded():`` using `make_encoder` / `make_head`, then call
    `finish`.

    Args:
        name: the agent's scope (``generator``, ``policy``...).
        config: extra JSON-able settings saved with the agent (for subclasses that have
            not declared a ``Config`` of their own).
        **settings: the fields of ``Config`` (device, seed, lr, optimizer, ...); ``self.cfg``
            holds them, checked and typed.
    """

    #: the settings dataclass: constructor keywords, Hydra schema and saved record
    Config: ClassVar[type] = AgentConfig

    def __init__(
        self,
        name: str,
        *,
        config: dict | None = None,
        allow_targets: Iterable[str] = (),
        **settings: Any,
    ) -> None:
        super().__init__()
        check_scope_syntax(name)
        self.name = name
        #: extra ``_target_`` names this agent's encoder configs may build (a user's classes)
        self.allow_targets = tuple(allow_targets)
        self.cfg = make_settings(self.Config, settings, who=f"agents.{name}")
        c = self.cfg
        self.device = resolve_device(c.device, setting=f"agents.{name}.device")
        self.place = place_of(self.device)
        self.amp = Amp(c.amp, c.amp_level, self.device, setting=f"agents.{name}.amp")
        #: what agent.json stores and Agent.load rebuilds from
        self.config: dict = {
            **settings_record(c),
            **{k: to_plain(v) for k, v in (config or {}).items()},
        }
        self.optimizer: paddle.optimizer.Optimizer | None = None
        self.scheduler: paddle.optimizer.lr.LRScheduler | None = None
        self.step_count = 0

    @property
    def seed(self) -> int | None:
        """``cfg.seed``: seeds the agent's initial weights (None: the global stream)."""
        return self.cfg.seed

    @property
    def lr(self) -> float:
        """``cfg.lr``: the base learning rate (a scheduler's starting value)."""
        return float(self.cfg.lr)

    # ------------------------------------------------------------------ building
    @contextmanager
    def seeded(self) -> Iterator[None]:
        """Build under this agent's own seed, leaving the global random stream untouched."""
        if self.seed is None:
            yield
            return
        saved = paddle.get_rng_state()
        paddle.seed((int(self.seed) * 1_000_003 + zlib.crc32(self.name.encode())) % (2**31))
        try:
            yield
        finally:
            paddle.set_rng_state(saved)

    def make_encoder(
        self,
        cfg: Any,
        role: str | None = None,
        *,
        slot: str = "encoder",
        inputs: Mapping[str, Any] | None = None,
        headless: bool = False,
        features: bool = False,
        forced: Mapping[str, Any] | None = None,
        takes: str | None = None,
    ) -> Any:
        """Build an encoder from a config (``_target_`` + kwargs) in scope ``<name>[.<role>]``.

        ``inputs`` are the sizes this agent knows from its data, game or chain (keywords of
        `paddlecraft.encoders.base.INPUT_KEYS`, plus ``num_classes`` for a
        classifier): each one the encoder's constructor takes is filled in when the config
        leaves it unset, and a config value that contradicts it fails naming the setting.
        ``headless`` builds it without a class head (``num_classes=None``); ``features``
        checks that it gives the feature contract (a ``pooled`` output and ``feature_dim``);
        ``forced`` keywords are set whatever the config says (when the constructor takes them).
        ``takes`` is the kind the slot holds (``"speech encoder"``, ``"text decoder"``...;
        default: told by ``inputs``): a component of another kind is refused before it is
        built. Errors the encoder raises while being built come back as one `ConfigError`
        naming ``agents.<name>.<slot>``.
        """
        return build_encoder(
            cfg,
            self.name if role is None else f"{self.name}.{role}",
            f"agents.{self.name}.{slot}",
            allow=self.allow_targets,
            inputs=inputs,
            forced=forced,
            headless=headless,
            features=features,
            takes=takes,
        )

    def make_head(self, role: str, factory: Any) -> nn.Layer:
        """Build a layer whose parameters are named ``<name>.<role>.w_0`` ..."""
        return build_named(f"{self.name}.{role}", factory)

    def finish(self) -> None:
        """Freeze ``cfg.freeze``, move to the device, create the optimizer (end of ``__init__``)."""
        if self.cfg.freeze:
            self.freeze(*self.cfg.freeze)
        if self.device != "cpu":
            self.to(device=self.place)
        self.build_optimizer()
        self.amp.decorate(self, self.optimizer)

    def __call__(self, *inputs: Any, **kwargs: Any) -> Any:
        """Run ``forward`` (under autocast when ``amp`` is on; outputs come back float32)."""
        if not self.amp.enabled:
            return super().__call__(*inputs, **kwargs)
        with self.amp.forward():
            out = super().__call__(*inputs, **kwargs)
        return self.amp.to_float32(out)

    def encoders(self) -> list[Encoder]:
        """The agent's encoders, in construction order."""
        return [m for m in self.sublayers() if isinstance(m, Encoder)]

    def freeze(self, *logical: str) -> None:
        """Freeze logical layers by name in whichever of the agent's encoders has them.

        ``agents.<name>.freeze=[stem,layer1]`` calls this at start; call
        `unfreeze` mid-training (the optimizer skips frozen parameters, no rebuild).
        """
        for name, enc in self._layers_named(logical):
            enc.freeze(name)

    def unfreeze(self, *logical: str) -> None:
        """Train logical layers frozen by `freeze` again."""
        for name, enc in self._layers_named(logical):
            enc.unfreeze(name)

    def _layers_named(self, logical: tuple[str, ...]) -> list[tuple[str, Encoder]]:
        encs = [e for e in self.encoders() if e.built]
        out = []
        for name in logical:
            hits = [(name, e) for e in encs if name in e.layers]
            if not hits:
                have = sorted({n for e in encs for n in e.layers})
                raise ConfigError(
                    f"agents.{self.name}.freeze: no logical layer {name!r} in this agent's "
                    f"encoders; they have {have}"
                )
            out += hits
        return out

    def build_optimizer(self) -> None:
        """(Re)create the optimizer over `own_parameters` (None if there are none)."""
        # frozen weights stay in the optimizer (it skips stop_gradient parameters), so
        # unfreezing mid-training needs no rebuild
        params = self.own_parameters()
        check_unique_names(
            params,
            f"agents.{self.name}'s optimizer",
            "Build each of the agent's encoders under its own role "
            "(self.make_encoder(cfg, role=...)), and each head under its own make_head role.",
        )
        #: what the optimizer steps (update() reads it instead of walking the layers each step)
        self._optimized: list = params
        if not params:  # a fixed actor (e.g. a synthesiser) has nothing to optimise
            self.optimizer = None
            return
        lr: Any = self.lr
        scheduler = to_plain(self.cfg.lr_scheduler)
        if scheduler:
            make = safe_instantiate(scheduler)
            self.scheduler = make(**{scheduler_rate_arg(make, self.name): self.lr})
            lr = self.scheduler
        factory = safe_instantiate(to_plain(self.cfg.optimizer) or dict(DEFAULT_OPTIMIZER))
        clip = nn.ClipGradByGlobalNorm(self.cfg.grad_clip) if self.cfg.grad_clip else None
        self.optimizer = factory(learning_rate=lr, parameters=params, grad_clip=clip)

    def release_scopes(self) -> None:
        """Deprecated, does nothing: agents hold no process-wide scopes any more (physical
        names are checked per optimizer, in `build_optimizer`). Kept so 0.1 code runs."""
        warn_noop("Agent.release_scopes")

    # ------------------------------------------------------------------ parameters
    def own_parameters(self) -> list:
        """Parameters this agent owns (physical name starts with ``<name>.``), deduplicated.

        A layer borrowed from another agent's encoder (`Encoder.share`) is never
        owned, even when that agent's name starts with ``<name>.`` (``team`` vs ``team.gen``).
        """
        return owned(self.name, self.parameters(), borrowed_params(self.sublayers()))

    def trainable_parameters(self) -> list:
        """Own parameters that currently receive gradients."""
        return [p for p in self.own_parameters() if not p.stop_gradient]

    def summary(self) -> str:
        """A table: physical name, shape, trainable, and which optimizer updates it."""
        opt_name = type(self.optimizer).__name__ if self.optimizer else "none"
        return parameter_table(
            f"{type(self).__name__} {self.name!r} on {self.device}",
            self.parameters(),
            {id(p) for p in self.own_parameters()},
            borrowed_params(self.sublayers()),
            f"{self.name} ({opt_name})",
        )

    # ------------------------------------------------------------------ training helpers
    def to_tensor(self, x: Any, dtype: str | None = None) -> paddle.Tensor:
        """``x`` as a tensor on this agent's device."""
        return paddle.to_tensor(
            np.asarray(x) if not isinstance(x, paddle.Tensor) else x, dtype=dtype, place=self.place
        )

    def update(
        self,
        loss: paddle.Tensor,
        batch_share: float | None = None,
        grad_norm: bool = False,
        as_tensor: bool = False,
    ) -> float | paddle.Tensor | None:
        """Backward ``loss`` and take one optimizer step on this agent's own parameters.

        Under data-parallel launch, gradients are all-reduced first, weighted by
        ``batch_share`` (this process's fraction of the global batch; default 1/world).
        ``grad_norm``: also return the global L2 norm of the (all-reduced) gradients of
        the parameters the optimizer steps, taken before the step (one host sync; with
        ``as_tensor`` a 0-d tensor instead, no sync, for callers that read several
        metrics at once); else None. A loss shared by several agents goes to
        `update_together` instead (one backward, each agent steps once).
        """
        self._require_optimizer()
        self.amp.backward(loss)  # fp16: scaled
        return self.step_gradients(batch_share, grad_norm, as_tensor)

    def _require_optimizer(self) -> None:
        if self.optimizer is None:
            raise RuntimeError(f"agent {self.name!r} has no trainable parameters to update")

    def step_gradients(
        self, batch_share: float | None = None, grad_norm: bool = False, as_tensor: bool = False
    ) -> float | paddle.Tensor | None:
        """One optimizer step on the gradients a backward already left (see `update`).

        All-reduces under data-parallel launch, applies the agent's grad clip and AMP
        step, then clears the gradients of the parameters it stepped.
        """
        self._require_optimizer()
        if world_size() > 1:
            share = batch_share if batch_share is not None else 1.0 / world_size()
            allreduce_gradients(self._optimized, share)
        norm = None
        if grad_norm:
            self.amp.unscale(self.optimizer)
            grads = [p.grad for p in self._optimized if p.grad is not None]
            norm = (
                paddle.sqrt(paddle.add_n([(g * g).sum() for g in grads]))
                if grads
                else paddle.zeros([])
            )
            if not as_tensor:
                norm = float(norm)
        if self.amp.scaler is not None or not adam_step(self.optimizer):
            self.amp.step(self.optimizer)  # anything adam_step does not cover
        self.optimizer.clear_grad(set_to_zero=False)
        self.step_count += 1
        return norm

    def scheduler_step(self) -> None:
        """Advance the LR scheduler, if any (arenas call it once per epoch)."""
        if self.scheduler is not None:
            self.scheduler.step()

    # ------------------------------------------------------------------ save / load
    def state_files(self) -> tuple[dict[str, paddle.Tensor], dict[str, paddle.Tensor], dict]:
        """(weights by physical name, optimizer tensors, JSON metadata) for a checkpoint."""
        weights = {p.name: p for p in self.parameters()}
        opt_tensors, opt_meta = optimizer_state(self.optimizer) if self.optimizer else ({}, {})
        meta = {
            "class": f"{type(self).__module__}.{type(self).__qualname__}",
            "name": self.name,
            "config": self.config,
            "step": self.step_count,
            "optimizer": opt_meta,
            "amp": self.amp.state_dict(),  # fp16 loss scale; empty otherwise
            "format": "paddlecraft-agent-1",
        }
        return weights, opt_tensors, meta

    def save(self, directory: str | os.PathLike) -> dict[str, str]:
        """Write ``weights.safetensors``, ``optimizer.safetensors`` and ``agent.json``.

        Returns ``{file name: sha256}``. Files are written atomically; never pickled.
        """
        return write_saved(directory, *self.state_files(), self.name)

    def load_state(
        self,
        directory: str | os.PathLike,
        *,
        old_name: str | None = None,
        optimizer: bool = True,
        renames: Mapping[str, str | None] | None = None,
    ) -> None:
        """Load weights (and optimizer state) written by `save` into this agent.

        ``renames`` (from `upgrade_saved`) maps saved logical prefixes under the
        agent's scope to today's (``{"prediction": "hidden_layer_3"}``); ``None`` drops them.
        """
        arrays, meta = read_weights(directory, old_name, self.name, renames)
        assign_by_name(self.parameters(), arrays, what=f"agent {self.name!r}")
        self.step_count = int(meta.get("step", 0))
        self.amp.load_state_dict(meta.get("amp", {}))
        if optimizer and self.optimizer is not None:
            tensors = read_optimizer(directory, meta, old_name, self.name, renames)
            if tensors is not None:
                load_optimizer_state(
                    self.optimizer, tensors, meta.get("optimizer", {}), self.own_parameters()
                )

    @classmethod
    def upgrade_saved(
        cls, config: dict[str, Any], shapes: Mapping[str, tuple[int, ...]], name: str
    ) -> dict[str, str | None]:
        """Bring an ``agent.json`` config saved by an older PaddleCraft up to date, in place.

        ``shapes`` are the saved weights' shapes by physical name, ``name`` the saved
        scope. Returns the weight renames `load_state` applies (saved logical prefix
        under the scope -> today's, or ``None`` to drop it). An agent class whose saved
        layout changed overrides this; the base has nothing to upgrade.
        """
        return {}

    @classmethod
    def load(
        cls: type[A],
        directory: str | os.PathLike,
        *,
        name: str | None = None,
        device: str | None = None,
        allow: Iterable[str] = (),
    ) -> A:
        """Rebuild an agent saved by `save`, ready for inference or more training.

        ``name`` loads it under another scope (e.g. a frozen opponent beside the live
        policy); ``device`` overrides the saved device. The class and every ``_target_``
        in the saved config pass the same allow-list as run configs.
        """
        klass, meta, renames = read_saved_class(directory, allow, Agent)
        config = dict(meta["config"])
        if device is not None:
            config["device"] = device
        agent = klass(name or meta["name"], allow_targets=allow, **config)
        agent.load_state(directory, old_name=meta["name"], renames=renames)
        agent.eval()
        return agent

    @classmethod
    def pretrained(cls, entry: str, *, name: str | None = None, device: str | None = None) -> Agent:
        """A trained agent from PaddleCraft's zoo, by name: ``Agent.pretrained("digits-mlp")``.

        The zoo ships inside the package (``agents/zoo/``); each entry's measured quality
        is in ``paddlecraft.agents.zoo.zoo_entries()``. ``name`` loads it under another scope.
        """
        from .zoo import zoo_path

        return Agent.load(zoo_path(entry), name=name, device=device)


def load_agent(directory: str | os.PathLike, **kwargs: Any) -> Agent:
    """Shortcut for `Agent.load`."""
    return Agent.load(directory, **kwargs)
