"""GanArena: a generator agent against a discriminator agent (``python run.py arena=gan``).

Two agents, each with its own scope, optimizer and device. One training step is
``n_critic`` discriminator updates on real vs fake images, then one generator update
through the discriminator. The last discriminator update and the generator update share
one batch of fakes (DCGAN's schedule: one generator forward per step, the discriminator
sees it detached); extra critic updates (``n_critic`` > 1) draw their own. The two
agents' updates never touch each other:

- the discriminator's step gets fakes without gradient (when it draws its own, under
  ``no_grad``, restoring the generator's batch-norm running statistics afterwards), and
  its optimizer holds only its own parameters;
- the generator's step marks the discriminator's parameters ``stop_gradient`` for its
  forward and backward (no gradient is computed for them, so none is left behind for the
  discriminator's next step) and restores any batch-norm statistics the discriminator's
  forward moved. ``tests/test_gan.py`` checks both bit for bit.

Losses: `.losses`. ``conditional=True`` gives both agents the class labels (the
``gan_conditional`` config: the ImageDecoder's label embedding, a projection
discriminator).

Data (`.data`): arrays, or image files decoded lazily by loader workers (for the
metrics, a seeded sample of at most ``eval_images`` files per split is decoded once).

Evaluation (each epoch and at the end) generates ``eval_samples`` images from fixed noise
and measures them with a feature net trained on the real training split (`.featnet`,
`.metrics`): classifier-FID (headline, lower is better) against ``ref_samples`` real
training images, classifier Inception Score, precision / recall / density / coverage, the
class histogram and its normalised entropy, and for the conditional GAN how often the
feature net agrees with the requested class. ``fid_untrained`` is the FID of the generator
as it was built (before any training) under the same feature net, ``fid_real`` the FID of
the held-out real test split (the floor sampling noise allows).

Step cost: what a step needs from the agents (parameter lists, batch-norm buffers,
devices, world size) is looked up once, at construction; a step's metrics stay tensors
until one host read at its end.

This module is the one class that orders the two agents' updates so
they never touch each other; losses, data, the feature net, metrics, rendering and the
config checks live in `.losses`, `.data`, `.featnet`, `.metrics`,
`.render` and `.checks`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional  # noqa: UP035 (OmegaConf needs typing forms)

import numpy as np
import paddle

from paddlecraft.agents import Agent
from paddlecraft.agents.distributed import rank, world_size
from paddlecraft.agents.gan import (
    Discriminator,
    Generator,
    keep_running_stats,
    no_param_grads,
    running_stats,
)
from paddlecraft.agents.instantiate import built
from paddlecraft.agents.settings import ConfigError
from paddlecraft.arenas.engine import Arena, ArenaConfig

from . import metrics as gm
from .checks import check_agents, check_classes, check_data
from .data import GanData
from .featnet import FeatureNet, FeatureNetCache, FeatureNetConfig
from .losses import GanLoss, discriminator_loss, generator_loss, gradient_penalty
from .render import render_grid, save_npy, write_png

log = logging.getLogger("paddlecraft")

__all__ = ["GanArena", "GanConfig"]

#: random-stream ids of the fixed noise: ``[seed, NOISE_STREAM + k]``, k = 1 evaluation,
#: 2 the picture grid, 3 the final evaluation
NOISE_STREAM = 1000

Metrics = dict[str, paddle.Tensor]


@dataclass
class GanConfig(ArenaConfig):
    """paddlecraft.arenas.GanArena settings."""

    epochs: int = 30  #: passes over the training split (each real image feeds D once per epoch)
    batch_size: int = 32  #: images per discriminator update and per generator update
    loss: GanLoss = GanLoss.lsgan  #: vanilla | lsgan | wgan_gp (see arenas.gan.losses)
    n_critic: int = 1  #: discriminator updates per generator update
    gp_weight: float = 10.0  #: WGAN-GP penalty weight (lambda)
    real_label: float = 1.0  #: vanilla loss target for real images (0.9: one-sided smoothing)
    conditional: bool = False  #: class labels to both agents (both built conditional)
    eval_samples: int = 1500  #: generated images per evaluation
    ref_samples: int = 5000  #: real training images the metrics compare against
    #: image files: at most this many per split are decoded (once) for the metrics; null: all
    eval_images: Optional[int] = 10000  # noqa: UP045
    final_samples: int = 2000  #: images written to samples.npy at the end
    grid_rows: int = 10  #: the sample grid is rows x rows (conditional: one class per row)
    featnet: FeatureNetConfig = field(default_factory=FeatureNetConfig)  #: metrics' feature net
    collapse_coverage: float = 0.1  #: warn of mode collapse below this coverage
    collapse_entropy: float = 0.8  #: ... or below this normalised class entropy
    run_dir: Optional[str] = None  #: grids folder; None: the run directory  # noqa: UP045


class GanArena(Arena):
    """A `Generator` against a `Discriminator`.

    Args:
        agents: ``generator`` and ``discriminator``.
        data: a dataset (or its loader config; the engine builds it) whose splits hold images float32
            [N, C, H, W] in [0, 1] and integer labels (digits, MNIST, shapes...), or
            image files read lazily (``paddlecraft.craftdata.load_image_folder``).
        seed: run seed (data order, fixed noise).
        **settings: `GanConfig` fields.
    """

    Config = GanConfig
    headline = "fid"
    headline_mode = "min"

    def __init__(
        self, agents: Mapping[str, Agent], data: Any, seed: int = 0, **settings: Any
    ) -> None:
        super().__init__(agents, seed=seed, **settings)
        c = self.cfg
        self.require_agents("generator", "discriminator")
        self.generator: Generator = self.agents["generator"]  # type: ignore[assignment]
        self.discriminator: Discriminator = self.agents["discriminator"]  # type: ignore[assignment]
        self.loss = GanLoss(getattr(c.loss, "value", c.loss))
        self.n_critic, self.gp_weight, self.real_label = int(c.n_critic), c.gp_weight, c.real_label
        self.batch_size = int(c.batch_size)
        self.conditional = bool(c.conditional)
        self.eval_samples, self.final_samples = int(c.eval_samples), int(c.final_samples)
        self.grid_rows = int(c.grid_rows)
        self.collapse_coverage, self.collapse_entropy = c.collapse_coverage, c.collapse_entropy
        self.run_dir = c.run_dir
        self._share = 1.0  # this process's fraction of a global batch (data-parallel)
        check_agents(self.generator, self.discriminator, self.conditional, self.loss)
        if self.n_critic < 1:
            raise ConfigError(f"arena.n_critic must be >= 1, got {self.n_critic}")
        self.data = built(data)
        self._world, self._rank = world_size(), rank()
        # data-parallel: the loader gives each process its rows of every critic minibatch
        self.real = GanData(self.data, self.seed, self.batch_size, self.n_critic,
                            c.eval_images, shard=(self._rank, self._world))  # fmt: skip
        check_data(self.data, self.real.image_shape, self.real.lazy, self.generator)
        self.num_classes = int(self.data.num_classes)
        if self.conditional:
            check_classes((self.generator, self.discriminator), self.num_classes)
        # looked up once: the agents' structure and devices do not change during a run
        g, d = self.generator, self.discriminator
        self._d_params = d.parameters()
        self._g_stats, self._d_stats = running_stats(g), running_stats(d)
        self._same_place = str(g.place) == str(d.place)
        # fixed noise (from the seed, so nothing to checkpoint) for metrics, grids, samples.npy
        self._eval_z, self._eval_labels = self._noise(self.eval_samples, 1)
        self._grid_z, self._grid_labels = self._noise(self.grid_rows**2, 2, per_row=True)
        self._untrained = self.generator.generate(self._eval_z, self._eval_labels)
        self._featnets = FeatureNetCache()  # forgotten by close()
        self._ref: dict[str, Any] = {}
        self._baseline: dict[str, float] = {}
        self.steps_done = 0
        self.epochs_done = 0
        self._pending_grids: dict[str, np.ndarray] = {}
        self._last_eval: tuple[int, dict[str, float]] | None = None
        self.last_grid: np.ndarray | None = None

    def _noise(self, n: int, stream: int, per_row: bool = False):
        rng = np.random.default_rng([self.seed, NOISE_STREAM + stream])
        z = rng.standard_normal((n, self.generator.latent_dim)).astype(np.float32)
        if not self.conditional:
            return z, None
        if per_row:  # grid: row r shows class r % K
            labels = (np.arange(n) // self.grid_rows) % self.num_classes
        else:
            labels = np.arange(n) % self.num_classes
        return z, labels.astype(np.int64)

    # ------------------------------------------------------------------ data
    def setup(self, run_dir: str) -> None:
        """Grids go to ``arena.run_dir`` if set, else the run folder; file data records its
        split there (or adopts the one recorded)."""
        super().setup(self.cfg.run_dir or run_dir)
        self.real.bind(self.run_dir)

    def steps_per_epoch(self) -> int:
        return self.real.steps_per_epoch()

    def batches(self, epoch: int, start: int = 0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Per step from ``start`` on: ``n_critic`` real minibatches, x [n_critic, B, C, H, W]
        and y [n_critic, B] (data-parallel: this process's rows of each, a ``Shard`` with its
        share); earlier steps are never read."""
        return self.real.batches(epoch, start)

    # ------------------------------------------------------------------ training
    def train_step(self, batch: tuple[np.ndarray, np.ndarray]) -> dict[str, float]:
        xs, ys = batch  # [n_critic, b, C, H, W], [n_critic, b]
        # data-parallel: the loader sharded each minibatch (a Shard with its share)
        self._share = getattr(batch, "share", 1.0)
        for agent in (self.generator, self.discriminator):
            if not agent.training:  # train() walks every sublayer: only when needed
                agent.train()
        for i in range(self.n_critic - 1):  # WGAN-GP: extra critic updates, their own fakes
            self.discriminator_step(xs[i], ys[i])
        # the last critic update and the generator's update share one batch of fakes
        # (DCGAN's schedule: one generator forward per step); the critic sees it detached
        x, y = xs[-1], ys[-1]
        fake = self.fakes(y)
        d_metrics = self._d_update(x, y, fake.detach())
        g_metrics = self._g_update(y, fake)
        self.steps_done += 1
        # both losses first: the progress bar shows the first three metrics
        return self._read({"d_loss": d_metrics.pop("d_loss"), "g_loss": g_metrics.pop("g_loss"),
                           **d_metrics, **g_metrics})  # fmt: skip

    def fakes(self, y: np.ndarray) -> paddle.Tensor:
        """A batch of fakes with gradient (the generator's forward: its BN statistics move)."""
        g = self.generator
        return g(self._local_rows(g.latent(self.batch_size)), self._labels(g, y))

    def _local_rows(self, t: paddle.Tensor) -> paddle.Tensor:
        # noise is drawn for the whole global batch on every process (so all processes'
        # random streams stay identical, and checkpoints from rank 0 fit them all), then
        # each process keeps its own rows, as the loader does for data
        return t if self._world == 1 else t[self._rank :: self._world]

    def discriminator_step(
        self, x: np.ndarray, y: np.ndarray, fake: paddle.Tensor | None = None
    ) -> dict[str, float]:
        """One update of the discriminator on real ``x`` vs fakes; the generator is untouched.

        ``fake``: a detached batch to use; None draws one (no gradient, and the
        generator's batch-norm statistics are restored afterwards).
        """
        if fake is None:
            g = self.generator
            with paddle.no_grad(), keep_running_stats(self._g_stats):
                fake = g(self._local_rows(g.latent(self.batch_size)), self._labels(g, y))
        return self._read(self._d_update(x, y, fake.detach()))

    def generator_step(self, y: np.ndarray, fake: paddle.Tensor | None = None) -> dict[str, float]:
        """One update of the generator through the discriminator; the discriminator is untouched.

        ``fake``: the output of `fakes` (with its graph) to reuse; None draws one.
        """
        return self._read(self._g_update(y, self.fakes(y) if fake is None else fake))

    def _d_update(self, x: np.ndarray, y: np.ndarray, fake: paddle.Tensor) -> Metrics:
        d = self.discriminator
        fake = self._to_d(fake)
        labels = self._labels(d, y)
        real = d.to_tensor(x)
        d_real, d_fake = d(real, labels), d(fake, labels)  # logits [B]
        gp = None
        if self.loss is GanLoss.wgan_gp:
            eps = self._local_rows(paddle.rand([self.batch_size, 1, 1, 1]))
            gp = gradient_penalty(lambda mix: d(mix, labels), real, fake, eps)
        loss, out = discriminator_loss(self.loss, d_real, d_fake, self.real_label)
        if gp is not None:
            loss = loss + self.gp_weight * gp
            out = {"d_real": out["d_real"], "d_fake": out["d_fake"], "gp": gp,
                   "wasserstein": out["wasserstein"]}  # fmt: skip
        norm = d.update(loss, self._share, grad_norm=True, as_tensor=True)
        return {"d_loss": loss, **out, "d_grad_norm": norm}

    def _g_update(self, y: np.ndarray, fake: paddle.Tensor) -> Metrics:
        g, d = self.generator, self.discriminator
        with no_param_grads(self._d_params), keep_running_stats(self._d_stats):
            loss = generator_loss(self.loss, d(self._to_d(fake), self._labels(d, y)))
            norm = g.update(loss, self._share, grad_norm=True, as_tensor=True)
        return {"g_loss": loss, "g_grad_norm": norm}

    def _to_d(self, t: paddle.Tensor) -> paddle.Tensor:
        """``t`` on the discriminator's device (differentiable: G learns through the copy)."""
        return t if self._same_place else t.to(self.discriminator.place)

    def _read(self, metrics: Metrics) -> dict[str, float]:
        """The metrics as floats, in one host read when they share a device."""
        names, values = list(metrics), list(metrics.values())
        if self._same_place:
            flat = paddle.stack(values).numpy().tolist()  # 0-d tensors -> [n]
        else:
            flat = [float(v) for v in values]
        return dict(zip(names, flat))

    def _labels(self, agent: Agent, y: np.ndarray) -> paddle.Tensor | None:
        return agent.to_tensor(y, "int64") if self.conditional else None

    def on_epoch_end(self, epoch: int) -> None:
        super().on_epoch_end(epoch)
        self.epochs_done = epoch

    def arena_state(self) -> dict:
        return {"steps_done": self.steps_done, "epochs_done": self.epochs_done,
                **self.real.state()}  # fmt: skip

    def load_arena_state(self, state: dict) -> None:
        self.steps_done = int(state.get("steps_done", 0))
        self.epochs_done = int(state.get("epochs_done", 0))
        self.real.load_state(state)
        self._last_eval = None

    # ------------------------------------------------------------------ evaluation
    @property
    def featnet(self) -> FeatureNet:
        """The feature net for this dataset (loaded or trained on first use; see close())."""
        data = self.real
        (x, y), (tx, ty) = data.arrays("train"), data.arrays("test")
        return self._featnets.get(x, y, tx, ty, self.num_classes, self.cfg.featnet)

    def _reference(self) -> dict[str, Any]:
        if not self._ref:
            net = self.featnet
            feats, _ = net(self.real.reference(int(self.cfg.ref_samples)))
            test_feats, _ = net(self.real.arrays("test")[0])
            untrained = self.measure(self._untrained, self._eval_labels, feats=feats)
            self._ref = {"feats": feats}
            self._baseline = {
                "fid_untrained": untrained["fid"],
                "fid_real": gm.fid(feats, test_feats),
                "featnet_accuracy": net.test_accuracy,
            }
        return self._ref

    def measure(
        self, images: np.ndarray, labels: np.ndarray | None = None, feats: np.ndarray | None = None
    ) -> dict[str, float]:
        """Every quality metric of generated ``images`` [N, C, H, W] (labels: requested classes)."""
        ref = feats if feats is not None else self._reference()["feats"]
        f, probs = self.featnet(images)
        return gm.quality(ref, f, probs, self.num_classes, labels)

    def evaluate(self) -> dict[str, float]:
        metrics = {**self.quality(), **self.real.metrics()}
        self._last_eval = (self.steps_done, dict(metrics))
        self._warn_collapse(metrics)
        self._write_grid()
        return metrics

    def quality(self) -> dict[str, float]:
        """The metrics of the generator as it is now (fixed noise), with the baselines."""
        self._reference()
        images = self.generator.generate(self._eval_z, self._eval_labels)
        metrics = self.measure(images, self._eval_labels)
        metrics.update(self._baseline)
        metrics["fid_ratio"] = metrics["fid_untrained"] / max(metrics["fid"], 1e-12)
        return metrics

    def _warn_collapse(self, m: dict[str, float]) -> None:
        why = gm.collapse_message(
            m, self.collapse_coverage, self.collapse_entropy, self.num_classes
        )
        if why:
            log.warning("possible mode collapse after %d steps: %s", self.steps_done, why)

    def grid(self) -> np.ndarray:
        """The fixed-noise sample grid as an image (H x W grey, or H x W x 3 RGB) uint8."""
        images = self.generator.generate(self._grid_z, self._grid_labels)
        return render_grid(images, self.grid_rows)

    def media(self) -> dict[str, np.ndarray]:
        """Images for VisualDL (trainer.visualdl=true): the latest sample grid as RGB."""
        grid = self.last_grid if self.last_grid is not None else self.grid()
        return {"samples": grid if grid.ndim == 3 else np.repeat(grid[:, :, None], 3, axis=2)}

    def live_view(self) -> dict[str, Any]:
        """The live page's picture: the fixed-noise sample grid (as VisualDL gets it)."""
        from ..engine.live.panels import media_panels

        return {"panels": media_panels(self.media())}

    def _grid_name(self) -> str:
        at_epoch_end = self.steps_done == self.epochs_done * self.steps_per_epoch()
        if at_epoch_end:
            return f"epoch_{self.epochs_done:03d}.png"
        return f"step_{self.steps_done:06d}.png"

    def _write_grid(self) -> None:
        grid = self.grid()
        self.last_grid = grid
        name = self._grid_name()
        run_dir = self.run_dir
        if run_dir is None:  # plain Python run without run_dir: written by artifacts()
            self._pending_grids[name] = grid
            return
        write_png(Path(run_dir) / "samples" / name, grid)

    # ------------------------------------------------------------------ end of run
    def artifacts(self, run_dir: str) -> dict[str, str]:
        """``samples.npy`` (+ ``sample_labels.npy``), the final grid, and a printed summary."""
        out_dir = Path(run_dir)
        for name, grid in self._pending_grids.items():
            write_png(out_dir / "samples" / name, grid)
        self._pending_grids.clear()
        z, labels = self._noise(self.final_samples, 3)
        images = self.generator.generate(z, labels)
        paths = {"samples": str(out_dir / "samples.npy")}
        save_npy(out_dir / "samples.npy", images)
        if labels is not None:
            paths["sample_labels"] = str(out_dir / "sample_labels.npy")
            save_npy(out_dir / "sample_labels.npy", labels)
        grid_path = out_dir / "samples.png"
        write_png(grid_path, self.grid())
        paths["grid"] = str(grid_path)
        m = self._final_metrics()
        if m:
            log.info("%s", gm.summary_line(m, self.num_classes))
        return paths

    def _final_metrics(self) -> dict[str, float]:
        if self._last_eval is not None and self._last_eval[0] == self.steps_done:
            return self._last_eval[1]  # the engine evaluated right before artifacts()
        try:
            return self.quality()
        except Exception as e:  # the summary is a courtesy: never fail a finished run on it
            log.warning("could not compute the final GAN summary: %s", e)
            return {}

    def close(self) -> None:
        """Forget the feature nets and close the data loader; safe twice."""
        self._featnets.close()
        self.real.close()
