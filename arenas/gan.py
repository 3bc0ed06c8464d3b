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

Losses (``loss=``): ``lsgan`` (least squares, Mao et al. 2017; the default: on digits it
left its early mode collapse about twice as fast as the BCE loss and reached higher
recall, see the README), ``vanilla`` (DCGAN: BCE with logits, non-saturating generator
loss) and ``wgan_gp`` (Wasserstein loss with a gradient penalty of weight ``gp_weight``
on random interpolates, Gulrajani et al. 2017, via ``paddle.grad(create_graph=True)``;
use ``n_critic`` > 1 and a discriminator without batch norm, which is checked).
``conditional=True`` gives both agents the class labels (the ``gan_conditional`` config:
the ImageDecoder's label embedding, a projection discriminator).

Evaluation (each epoch and at the end) generates ``eval_samples`` images from fixed noise
and measures them with a feature net trained on the real training split
(:mod:`arenas.gan_metrics`): classifier-FID (headline, lower is better) against
``ref_samples`` real training images, classifier Inception Score, precision / recall /
density / coverage, the class histogram and its normalised entropy, and for the
conditional GAN how often the feature net agrees with the requested class. ``fid_untrained``
is the FID of the generator as it was built (before any training) under the same feature
net, ``fid_real`` the FID of the held-out real test split (the floor sampling noise allows).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional  # noqa: UP035 (OmegaConf needs typing forms)

import cv2
import numpy as np
import paddle
import paddle.nn.functional as F
from omegaconf import MISSING

from agents import Agent
from agents.base import AgentConfig
from agents.distributed import rank, shard, world_size
from agents.gan import Discriminator, Generator, keep_running_stats, no_param_grads
from agents.instantiate import safe_instantiate
from encoders.tensorio import atomic_write_bytes

from . import gan_metrics as gm
from .engine import Arena

log = logging.getLogger("paddlecraft")

__all__ = ["GanArena", "GanLoss", "render_grid"]

#: metrics hold the class histogram (``class_share_<k>``) up to this many classes
MAX_CLASS_SHARES = 32


class GanLoss(str, enum.Enum):
    """The adversarial loss."""

    vanilla = "vanilla"
    lsgan = "lsgan"
    wgan_gp = "wgan_gp"


class GanArena(Arena):
    """A :class:`~agents.gan.Generator` against a :class:`~agents.gan.Discriminator`.

    Args:
        agents: ``generator`` and ``discriminator``.
        data: loader config of a dataset whose splits hold images float32
            [N, C, H, W] in [0, 1] and integer labels (digits, MNIST, shapes...).
        epochs: passes over the training split (each real image feeds the
            discriminator once per epoch).
        batch_size: images per discriminator update and per generator update.
        loss: ``vanilla`` | ``lsgan`` | ``wgan_gp``.
        n_critic: discriminator updates per generator update.
        gp_weight: WGAN-GP penalty weight (lambda).
        real_label: target for real images in the vanilla loss (0.9: one-sided smoothing).
        conditional: give class labels to both agents (both must be built conditional).
        eval_samples: generated images per evaluation.
        ref_samples: real training images the metrics compare against (fixed subset).
        final_samples: images written to ``samples.npy`` at the end.
        grid_rows: the sample grid is ``grid_rows x grid_rows`` (conditional: one class per row).
        featnet: feature-net settings (see :func:`arenas.gan_metrics.load_feature_net`).
        collapse_coverage, collapse_entropy: warn of mode collapse below these values.
        run_dir: where per-epoch grids go (``samples/epoch_NNN.png``); None: the Hydra
            run directory when run by ``run.py``, else kept and written at the end.
        seed: run seed (data order, fixed noise).
    """

    headline = "fid"
    headline_mode = "min"

    def __init__(
        self,
        agents: Mapping[str, Agent],
        data: Any,
        epochs: int = 30,
        batch_size: int = 32,
        loss: str | GanLoss = "lsgan",
        n_critic: int = 1,
        gp_weight: float = 10.0,
        real_label: float = 1.0,
        conditional: bool = False,
        eval_samples: int = 1500,
        ref_samples: int = 5000,
        final_samples: int = 2000,
        grid_rows: int = 10,
        featnet: Mapping[str, Any] | None = None,
        collapse_coverage: float = 0.1,
        collapse_entropy: float = 0.8,
        run_dir: str | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__(agents, epochs=epochs, seed=seed)
        self.require_agents("generator", "discriminator")
        self.generator: Generator = self.agents["generator"]  # type: ignore[assignment]
        self.discriminator: Discriminator = self.agents["discriminator"]  # type: ignore[assignment]
        self.loss = GanLoss(getattr(loss, "value", loss))
        self.n_critic, self.gp_weight, self.real_label = int(n_critic), gp_weight, real_label
        self.batch_size = int(batch_size)
        self.conditional = bool(conditional)
        self.eval_samples, self.final_samples = int(eval_samples), int(final_samples)
        self.grid_rows = int(grid_rows)
        self.featnet_cfg = dict(featnet or {})
        self.collapse_coverage, self.collapse_entropy = collapse_coverage, collapse_entropy
        self.run_dir = run_dir
        self._share = 1.0  # this process's fraction of a global batch (data-parallel)
        self._check_agents()
        self.data = safe_instantiate(data)
        self._check_data()
        self.num_classes = int(self.data.num_classes)
        if self.conditional:
            for agent in (self.generator, self.discriminator):
                if agent.num_classes != self.num_classes:
                    raise ValueError(
                        f"{agent.name!r} is built for {agent.num_classes} classes but the data "
                        f"has {self.num_classes}; use num_classes: ${{data.num_classes}}"
                    )
        train = self.data.train
        if len(train) < self.batch_size * self.n_critic:
            raise ValueError(
                f"arena.batch_size={self.batch_size} x arena.n_critic={self.n_critic} is more "
                f"than the {len(train)} training images; lower them"
            )
        ref_rng = np.random.default_rng([self.seed, 7])
        n_ref = min(int(ref_samples), len(train))
        self._ref_idx = np.sort(ref_rng.permutation(len(train))[:n_ref])
        # fixed noise (from the seed, so nothing to checkpoint) for metrics, grids, samples.npy
        self._eval_z, self._eval_labels = self._noise(self.eval_samples, 1)
        self._grid_z, self._grid_labels = self._noise(self.grid_rows**2, 2, per_row=True)
        self._untrained = self.generator.generate(self._eval_z, self._eval_labels)
        self._featnet: gm.FeatureNet | None = None
        self._ref: dict[str, Any] = {}
        self._baseline: dict[str, float] = {}
        self.steps_done = 0
        self.epochs_done = 0
        self._pending_grids: dict[str, np.ndarray] = {}
        self._last_eval: tuple[int, dict[str, float]] | None = None
        self.last_grid: np.ndarray | None = None

    # ------------------------------------------------------------------ checks
    def _check_agents(self) -> None:
        g, d = self.generator, self.discriminator
        if not isinstance(g, Generator) or not isinstance(d, Discriminator):
            raise ValueError(
                "GanArena needs agents.generator: agents.Generator and agents.discriminator: "
                f"agents.Discriminator, got {type(g).__name__} and {type(d).__name__}"
            )
        want = "conditional" if self.conditional else "unconditional"
        for agent, where in (
            (g, "agents.generator.encoder.num_classes"),
            (d, "agents.discriminator.num_classes"),
        ):
            if agent.conditional != self.conditional:
                raise ValueError(
                    f"arena.conditional={self.conditional} but {agent.name!r} is "
                    f"{'conditional' if agent.conditional else 'unconditional'}: set {where} "
                    f"{'to the class count' if self.conditional else 'to null'} for a {want} "
                    "GAN (python run.py arena=gan_conditional sets both)"
                )
        if self.loss is GanLoss.wgan_gp:
            bn = [
                n
                for n, sub in d.named_sublayers()
                if isinstance(sub, paddle.nn.layer.norm._BatchNormBase)
            ]
            if bn:
                raise ValueError(
                    f"arena.loss=wgan_gp penalises each sample's gradient, which batch norm in "
                    f"the discriminator mixes across the batch ({bn[0]}); use "
                    "critic@agents.discriminator.encoder=dcgan with "
                    "agents.discriminator.encoder.norm=none (or instance)"
                )
        if self.n_critic < 1:
            raise ValueError(f"arena.n_critic must be >= 1, got {self.n_critic}")

    def _check_data(self) -> None:
        x = self.data.train.x
        if x.ndim != 4 or x.dtype != np.float32:
            raise ValueError(
                f"GanArena needs images float32 [N, C, H, W] in [0, 1]; the data loader gave "
                f"{x.dtype} {list(x.shape)} (for digits do not set flatten=true)"
            )
        want = tuple(x.shape[1:])
        dec = self.generator.decoder
        got = (dec.out_channels, dec.image_size, dec.image_size)
        if got != want:
            raise ValueError(
                f"the generator draws {list(got)} images but the data holds {list(want)}; set "
                "agents.generator.encoder.out_channels/image_size (the configs use "
                "${data.channels} and ${data.image_size})"
            )

    def _noise(self, n: int, stream: int, per_row: bool = False):
        rng = np.random.default_rng([self.seed, 1000 + stream])
        z = rng.standard_normal((n, self.generator.latent_dim)).astype(np.float32)
        if not self.conditional:
            return z, None
        if per_row:  # grid: row r shows class r % K
            labels = (np.arange(n) // self.grid_rows) % self.num_classes
        else:
            labels = np.arange(n) % self.num_classes
        return z, labels.astype(np.int64)

    # ------------------------------------------------------------------ data
    def steps_per_epoch(self) -> int:
        return len(self.data.train) // (self.batch_size * self.n_critic)

    def batches(self, epoch: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Per step: ``n_critic`` real minibatches, x [n_critic, B, C, H, W] and y [n_critic, B]."""
        train = self.data.train
        order = self.epoch_rng(epoch).permutation(len(train))
        per = self.batch_size * self.n_critic
        for i in range(self.steps_per_epoch()):
            idx = order[i * per : (i + 1) * per]
            x, y = train.x[idx], train.y[idx].astype(np.int64)
            yield (
                x.reshape(self.n_critic, self.batch_size, *x.shape[1:]),
                y.reshape(self.n_critic, self.batch_size),
            )

    # ------------------------------------------------------------------ training
    def train_step(self, batch: tuple[np.ndarray, np.ndarray]) -> dict[str, float]:
        xs, ys = batch
        self.generator.train()
        self.discriminator.train()
        # data-parallel launch: this process's rows of each global batch (else all of it)
        parts = [shard(xs[i], ys[i]) for i in range(self.n_critic)]
        self._share = parts[0][1]
        for (x, y), _ in parts[:-1]:  # WGAN-GP: extra critic updates, their own fakes
            self.discriminator_step(x, y)
        # the last critic update and the generator's update share one batch of fakes
        # (DCGAN's schedule: one generator forward per step); the critic sees it detached
        (x, y), _ = parts[-1]
        fake = self.fakes(y)
        d_metrics = self.discriminator_step(x, y, fake=fake.detach())
        g_metrics = self.generator_step(y, fake=fake)
        self.steps_done += 1
        # both losses first: the progress bar shows the first three metrics
        return {"d_loss": d_metrics.pop("d_loss"), "g_loss": g_metrics.pop("g_loss"),
                **d_metrics, **g_metrics}  # fmt: skip

    def fakes(self, y: np.ndarray) -> paddle.Tensor:
        """A batch of fakes with gradient (the generator's forward: its BN statistics move)."""
        g = self.generator
        return g(self._local_rows(g.latent(self.batch_size)), self._labels(g, y))

    def _local_rows(self, t: paddle.Tensor) -> paddle.Tensor:
        # noise is drawn for the whole global batch on every process (so all processes'
        # random streams stay identical, and checkpoints from rank 0 fit them all), then
        # each process keeps its own rows, as shard() does for data
        w = world_size()
        return t if w == 1 else t[rank() :: w]

    def discriminator_step(
        self, x: np.ndarray, y: np.ndarray, fake: paddle.Tensor | None = None
    ) -> dict[str, float]:
        """One update of the discriminator on real ``x`` vs fakes; the generator is untouched.

        ``fake``: a detached batch to use; None draws one (no gradient, and the
        generator's batch-norm statistics are restored afterwards).
        """
        g, d = self.generator, self.discriminator
        if fake is None:
            with paddle.no_grad(), keep_running_stats(g):
                fake = g(self._local_rows(g.latent(self.batch_size)), self._labels(g, y))
        fake = _to(fake.detach(), d)
        labels = self._labels(d, y)
        real = d.to_tensor(x)
        d_real, d_fake = d(real, labels), d(fake, labels)
        out: dict[str, float] = {}
        if self.loss is GanLoss.vanilla:
            loss = F.binary_cross_entropy_with_logits(
                d_real, paddle.full_like(d_real, self.real_label)
            ) + F.binary_cross_entropy_with_logits(d_fake, paddle.zeros_like(d_fake))
            out["d_real"], out["d_fake"] = F.sigmoid(d_real).mean(), F.sigmoid(d_fake).mean()
        elif self.loss is GanLoss.lsgan:
            loss = 0.5 * ((d_real - 1.0) ** 2).mean() + 0.5 * (d_fake**2).mean()
            out["d_real"], out["d_fake"] = d_real.mean(), d_fake.mean()
        else:
            gp = self._gradient_penalty(real, fake, labels)
            wdist = d_real.mean() - d_fake.mean()
            loss = -wdist + self.gp_weight * gp
            out["d_real"], out["d_fake"] = d_real.mean(), d_fake.mean()
            out["gp"], out["wasserstein"] = gp, wdist
        norm = d.update(loss, self._share, grad_norm=True)
        metrics = {"d_loss": float(loss)}
        metrics.update({k: float(v) for k, v in out.items()})
        metrics["d_grad_norm"] = norm
        return metrics

    def generator_step(self, y: np.ndarray, fake: paddle.Tensor | None = None) -> dict[str, float]:
        """One update of the generator through the discriminator; the discriminator is untouched.

        ``fake``: the output of :meth:`fakes` (with its graph) to reuse; None draws one.
        """
        g, d = self.generator, self.discriminator
        if fake is None:
            fake = self.fakes(y)
        with no_param_grads(d), keep_running_stats(d):
            d_fake = d(_to(fake, d), self._labels(d, y))
            if self.loss is GanLoss.vanilla:  # non-saturating: maximise log D(G(z))
                loss = F.binary_cross_entropy_with_logits(d_fake, paddle.ones_like(d_fake))
            elif self.loss is GanLoss.lsgan:
                loss = 0.5 * ((d_fake - 1.0) ** 2).mean()
            else:
                loss = -d_fake.mean()
            norm = g.update(loss, self._share, grad_norm=True)
        return {"g_loss": float(loss), "g_grad_norm": norm}

    def _labels(self, agent: Agent, y: np.ndarray) -> paddle.Tensor | None:
        return agent.to_tensor(y, "int64") if self.conditional else None

    def _gradient_penalty(
        self, real: paddle.Tensor, fake: paddle.Tensor, labels: paddle.Tensor | None
    ) -> paddle.Tensor:
        """``mean((|grad_x D(x_hat)| - 1)^2)`` on random interpolates of real and fake."""
        d = self.discriminator
        eps = self._local_rows(paddle.rand([self.batch_size, 1, 1, 1]))
        mix = eps * real + (1.0 - eps) * fake.detach()
        mix.stop_gradient = False
        out = d(mix, labels)
        (grad,) = paddle.grad(out.sum(), mix, create_graph=True)
        norm = paddle.sqrt((grad.reshape([grad.shape[0], -1]) ** 2).sum(1) + 1e-12)
        return ((norm - 1.0) ** 2).mean()

    def on_epoch_end(self, epoch: int) -> None:
        super().on_epoch_end(epoch)
        self.epochs_done = epoch

    def arena_state(self) -> dict:
        return {"steps_done": self.steps_done, "epochs_done": self.epochs_done}

    def load_arena_state(self, state: dict) -> None:
        self.steps_done = int(state.get("steps_done", 0))
        self.epochs_done = int(state.get("epochs_done", 0))
        self._last_eval = None

    # ------------------------------------------------------------------ evaluation
    @property
    def featnet(self) -> gm.FeatureNet:
        """The feature net for this dataset (trained and cached on first use)."""
        if self._featnet is None:
            d, c = self.data, self.featnet_cfg
            self._featnet = gm.load_feature_net(
                d.train.x, d.train.y, d.test.x, d.test.y, self.num_classes, **c
            )
        return self._featnet

    def _reference(self) -> dict[str, Any]:
        if not self._ref:
            net = self.featnet
            feats, _ = net(self.data.train.x[self._ref_idx])
            test_feats, _ = net(self.data.test.x)
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
        hist = gm.class_histogram(probs, self.num_classes)
        out = {"fid": gm.fid(ref, f), "inception_score": gm.inception_score(probs)}
        out.update(gm.prdc(ref, f, k=5))
        out["class_entropy"] = gm.normalized_entropy(hist)
        out["classes_generated"] = float(gm.classes_generated(hist))
        if labels is not None:
            out["cond_accuracy"] = float((probs.argmax(1) == labels).mean())
        shares = hist / max(hist.sum(), 1)
        out["top_class"], out["top_class_share"] = float(shares.argmax()), float(shares.max())
        if self.num_classes <= MAX_CLASS_SHARES:  # the histogram itself, one metric per class
            out.update({f"class_share_{k}": float(v) for k, v in enumerate(shares)})
        return out

    def evaluate(self) -> dict[str, float]:
        metrics = self.quality()
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
        low = []
        if m["coverage"] < self.collapse_coverage:
            low.append(f"coverage {m['coverage']:.3f} < {self.collapse_coverage}")
        if m["class_entropy"] < self.collapse_entropy:
            low.append(
                f"class-histogram entropy {m['class_entropy']:.3f} < {self.collapse_entropy}"
            )
        if low:
            log.warning(
                "possible mode collapse after %d steps: %s (%d of %d classes generated; class %d "
                "takes %.0f%% of samples)",
                self.steps_done,
                ", ".join(low),
                int(m["classes_generated"]),
                self.num_classes,
                int(m["top_class"]),
                100 * m["top_class_share"],
            )

    def grid(self) -> np.ndarray:
        """The fixed-noise sample grid as an image (H x W grey, or H x W x 3 RGB) uint8."""
        images = self.generator.generate(self._grid_z, self._grid_labels)
        return render_grid(images, self.grid_rows)

    def visuals(self) -> dict[str, np.ndarray]:
        """Images for VisualDL (trainer.visualdl=true): the latest sample grid as RGB."""
        grid = self.last_grid if self.last_grid is not None else self.grid()
        return {"samples": grid if grid.ndim == 3 else np.repeat(grid[:, :, None], 3, axis=2)}

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
        _write_png(Path(run_dir) / "samples" / name, grid)

    # ------------------------------------------------------------------ end of run
    def artifacts(self, run_dir: str) -> dict[str, str]:
        """``samples.npy`` (+ ``sample_labels.npy``), the final grid, and a printed summary."""
        out_dir = Path(run_dir)
        for name, grid in self._pending_grids.items():
            _write_png(out_dir / "samples" / name, grid)
        self._pending_grids.clear()
        z, labels = self._noise(self.final_samples, 3)
        images = self.generator.generate(z, labels)
        paths = {"samples": str(out_dir / "samples.npy")}
        _save_npy(out_dir / "samples.npy", images)
        if labels is not None:
            paths["sample_labels"] = str(out_dir / "sample_labels.npy")
            _save_npy(out_dir / "sample_labels.npy", labels)
        grid_path = out_dir / "samples.png"
        _write_png(grid_path, self.grid())
        paths["grid"] = str(grid_path)
        self._log_summary()
        return paths

    def _log_summary(self) -> None:
        m = self._final_metrics()
        if not m:
            return
        cond = f", conditional accuracy {m['cond_accuracy']:.3f}" if "cond_accuracy" in m else ""
        log.info(
            "GAN final: classifier-FID %.3f (untrained generator %.2f: %.1fx lower; real test "
            "split %.3f), recall %.3f, precision %.3f, coverage %.3f, density %.3f, "
            "class-histogram entropy %.3f (%d/%d classes), IS %.2f%s",
            m["fid"],
            m["fid_untrained"],
            m["fid_ratio"],
            m["fid_real"],
            m["recall"],
            m["precision"],
            m["coverage"],
            m["density"],
            m["class_entropy"],
            int(m["classes_generated"]),
            self.num_classes,
            m["inception_score"],
            cond,
        )

    def _final_metrics(self) -> dict[str, float]:
        if self._last_eval is not None and self._last_eval[0] == self.steps_done:
            return self._last_eval[1]  # the engine evaluated right before artifacts()
        try:
            return self.quality()
        except Exception as e:  # the summary is a courtesy: never fail a finished run on it
            log.warning("could not compute the final GAN summary: %s", e)
            return {}


# ----------------------------------------------------------------------------- helpers
def _to(t: paddle.Tensor, agent: Agent) -> paddle.Tensor:
    """``t`` on ``agent``'s device (a no-op when both agents share one)."""
    if str(t.place) == str(agent.place):
        return t
    return t.to(agent.place)  # differentiable: the generator learns through the copy


def render_grid(images: np.ndarray, rows: int, cell: int = 32, pad: int = 1) -> np.ndarray:
    """A ``rows x rows`` grid of images [N, C, H, W] in [0, 1] as uint8, upscaled (nearest)."""
    n, c, h, w = images.shape
    scale = max(1, cell // max(h, w))
    hs, ws = h * scale, w * scale
    canvas = np.full((rows * (hs + pad) + pad, rows * (ws + pad) + pad, c), 255, np.uint8)
    for i in range(min(n, rows * rows)):
        r, k = divmod(i, rows)
        img = (np.clip(images[i], 0.0, 1.0).transpose(1, 2, 0) * 255.0 + 0.5).astype(np.uint8)
        big = cv2.resize(img, (ws, hs), interpolation=cv2.INTER_NEAREST).reshape(hs, ws, c)
        y0, x0 = pad + r * (hs + pad), pad + k * (ws + pad)
        canvas[y0 : y0 + hs, x0 : x0 + ws] = big
    return canvas[:, :, 0] if c == 1 else canvas


def _write_png(path: Path, grid: np.ndarray) -> None:
    img = grid if grid.ndim == 2 else cv2.cvtColor(grid, cv2.COLOR_RGB2BGR)
    ok, buf = cv2.imencode(".png", img)
    if not ok:
        raise RuntimeError(f"OpenCV could not encode {path}")
    atomic_write_bytes(path, buf.tobytes())


def _save_npy(path: Path, array: np.ndarray) -> None:
    import io

    buf = io.BytesIO()
    np.save(buf, array)
    atomic_write_bytes(path, buf.getvalue())


# ----------------------------------------------------------------------------- schemas
@dataclass
class ImageDecoderConfig:
    """encoders.ImageDecoder: latent (+ class embedding) -> image in [0, 1] (the generator)."""

    _target_: str = "encoders.ImageDecoder"
    latent_dim: int = 32  #: size of z
    out_channels: int = 1  #: image planes
    image_size: int = 8  #: image side (8, 16, 28, 32, 64...)
    base_channels: int = 32  #: channels of the last upsampling block (doubling inwards)
    num_classes: Optional[int] = None  #: set for a conditional generator  # noqa: UP045
    embed_dim: int = 16  #: label embedding size (conditional)


@dataclass
class CriticCNNEncoderConfig:
    """agents.gan.CriticCNNEncoder: DCGAN discriminator body (twice differentiable)."""

    _target_: str = "agents.gan.CriticCNNEncoder"
    in_channels: int = 1  #: image planes
    image_size: Any = 8  #: side, or [H, W]
    channels: list[int] = field(default_factory=lambda: [32, 64])  #: one block per entry
    embedding_dim: int = 64  #: feature size h
    norm: str = "none"  #: none | batch | instance (none/instance for WGAN-GP)
    slope: float = 0.2  #: LeakyReLU slope
    min_spatial: int = 4  #: blocks stop halving the image below this size


@dataclass
class GeneratorConfig(AgentConfig):
    """agents.Generator: an ImageDecoder agent."""

    _target_: str = "agents.Generator"
    encoder: Any = MISSING  #: a decoder config (conf/decoder/*)


@dataclass
class DiscriminatorConfig(AgentConfig):
    """agents.Discriminator: an image encoder + linear critic (+ label projection)."""

    _target_: str = "agents.Discriminator"
    encoder: Any = MISSING  #: an image encoder config (conf/critic/*)
    num_classes: Optional[int] = None  #: set for a projection discriminator  # noqa: UP045


@dataclass
class FeatureNetConfig:
    """The metrics' feature net (arenas.gan_metrics.load_feature_net); cached per settings."""

    channels: list[int] = field(default_factory=lambda: [32, 64])  #: conv blocks
    embedding_dim: int = 64  #: feature size used for FID / PRDC
    epochs: int = 15  #: training passes
    lr: float = 1e-3  #: Adam learning rate
    batch_size: int = 64  #: training minibatch
    seed: int = 0  #: its own seed (not the run's: runs with other seeds share it)
    max_train: Optional[int] = 20000  #: train on at most this many images  # noqa: UP045


@dataclass
class GanArenaConfig:
    """arenas.gan.GanArena: generator vs discriminator."""

    _target_: str = "arenas.gan.GanArena"
    epochs: int = 30  #: passes over the training split
    batch_size: int = 32  #: images per update
    loss: GanLoss = GanLoss.lsgan  #: vanilla | lsgan | wgan_gp
    n_critic: int = 1  #: discriminator updates per generator update
    gp_weight: float = 10.0  #: WGAN-GP lambda
    real_label: float = 1.0  #: vanilla loss target for real images (0.9: smoothing)
    conditional: bool = False  #: class labels to both agents
    eval_samples: int = 1500  #: generated images per evaluation
    ref_samples: int = 5000  #: real training images the metrics compare against
    final_samples: int = 2000  #: images in samples.npy
    grid_rows: int = 10  #: the sample grid is rows x rows
    featnet: FeatureNetConfig = field(default_factory=FeatureNetConfig)  #: metrics' feature net
    collapse_coverage: float = 0.1  #: warn of mode collapse below this coverage
    collapse_entropy: float = 0.8  #: ... or below this normalised class entropy
    run_dir: Optional[str] = None  #: grids folder; None: the run directory  # noqa: UP045


SCHEMAS: dict[str, dict[str, type]] = {
    "schema/decoder": {"image_decoder": ImageDecoderConfig},
    "schema/critic": {"critic_cnn": CriticCNNEncoderConfig},
    "schema/agent": {"generator": GeneratorConfig, "discriminator": DiscriminatorConfig},
    "schema/arena": {"gan": GanArenaConfig},
}
