"""VisualDL logging (optional extra: ``pip install visualdl``), for what each arena produces.

- every training and evaluation metric as a scalar (``train/<k>``, ``eval/<k>``);
- the arena's media at each evaluation (`paddlecraft.arenas.engine.media`): images (GAN sample
  grids, telephone sheets), audio (spoken hops), text (captions);
- histograms of every agent's own parameters at each evaluation, on request
  (``trainer.visualdl_histograms=true``);
- the run's hyper-parameters (its command-line overrides, e.g. a sweep point's) with the
  headline metric, in VisualDL's hparams view, when the run ends.

VisualDL is imported when a run starts, never at import time.
"""

from __future__ import annotations

from typing import Any

from .loop import Callback, Loop
from .media import Audio, Image, Media, Text, arena_media, audio_float, image_uint8

#: override keys that describe the launch, not the experiment
NOT_HPARAMS = ("hydra", "trainer", "sweep", "+sweep", "resume")


class VisualDLLogger(Callback):
    """Scalars, media, parameter histograms and hparams to ``<run dir>/visualdl``."""

    def __init__(
        self,
        every: int = 10,
        logdir: str = "visualdl",
        histograms: bool = False,
        overrides: list[str] | None = None,
    ) -> None:
        self.every, self.logdir, self.histograms = max(1, every), logdir, histograms
        self.hparams = hparams_from_overrides(overrides or [])
        self._writer: Any = None

    def on_run_start(self, loop: Loop) -> None:
        try:
            from visualdl import LogWriter
        except ImportError as e:
            raise ImportError(
                "trainer.visualdl=true needs VisualDL: pip install 'paddlecraft[visualdl]' "
                "(or pip install visualdl), or set trainer.visualdl=false"
            ) from e
        self._writer = LogWriter(logdir=str(loop.run_dir / self.logdir))

    def on_step_end(self, loop: Loop, metrics: dict[str, float]) -> None:
        if loop.step % self.every == 0:
            for k, v in metrics.items():
                self._writer.add_scalar(tag=f"train/{k}", step=loop.step, value=float(v))

    def on_eval_end(self, loop: Loop, metrics: dict[str, float]) -> None:
        for k, v in metrics.items():
            self._writer.add_scalar(tag=f"eval/{k}", step=loop.step, value=float(v))
        for tag, item in arena_media(loop.arena).items():
            self.log_media(tag, item, loop.step)
        if self.histograms:
            for agent in loop.arena.agents.values():
                for p in agent.own_parameters():
                    self._writer.add_histogram(
                        tag=f"params/{p.name}", values=p.numpy().reshape(-1), step=loop.step
                    )

    def log_media(self, tag: str, item: Media, step: int) -> None:
        """Write one image, audio clip or text under ``tag`` at ``step``."""
        if isinstance(item, Image):
            self._writer.add_image(tag=tag, img=image_uint8(item.array), step=step)
        elif isinstance(item, Audio):
            self._writer.add_audio(
                tag=tag,
                audio_array=audio_float(item.samples),
                step=step,
                sample_rate=int(item.sample_rate),
            )
        elif isinstance(item, Text):
            self._writer.add_text(tag=tag, text_string=item.text, step=step)

    def on_run_end(self, loop: Loop) -> None:
        if self._writer is None:
            return
        if self.hparams:
            head = f"eval/{loop.arena.headline}"
            self._writer.add_hparams(hparams_dict=self.hparams, metrics_list=[head])
        self._writer.close()
        self._writer = None


def hparams_from_overrides(overrides: list[str]) -> dict[str, Any]:
    """``{key: number or string}`` from command-line overrides, launch settings left out."""
    out: dict[str, Any] = {}
    for o in overrides:
        key, eq, value = o.partition("=")
        key = key.lstrip("+~")
        if not eq or key.split(".")[0].split("/")[0] in NOT_HPARAMS:
            continue
        try:
            num = float(value)
            out[key] = (
                int(num) if num.is_integer() and "." not in value and "e" not in value else num
            )
        except ValueError:
            out[key] = value
    return out
