"""Text -> speech with eSpeak NG: the `Speaker` agent (fixed, no parameters).

```python
spk.speak(["a red circle above a blue square"])   # -> [int16 waveform at spk.sample_rate]
```
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from paddlecraft.errors import ConfigError

from .base import Agent, AgentConfig

__all__ = ["Speaker", "SpeakerConfig"]


SPEECH_STREAM = 0x5E  #: random-stream id: ``[agent seed, call seed, id]`` of what it says


@dataclass
class SpeakerConfig(AgentConfig):
    """paddlecraft.agents.Speaker settings."""

    encoder: Any = None  #: unused: eSpeak NG does the work (every agent config has the slot)
    voices: Any = "test"  #: train | test (the held-out voices) | all | a list of voice variants
    sample_rate: int = 16000  #: output rate (resampled from eSpeak's 22050 Hz)
    voice_seed: int = 0  #: seed of the train/test voice split
    test_fraction: float = 0.2  #: share of voices held out


class Speaker(Agent):
    """Text -> speech with eSpeak NG: a fixed (non-learned) agent with no parameters.

    Each text is spoken with a voice drawn from ``voices`` (``"train"``/``"test"``: the
    seeded split of `paddlecraft.craftdata.speech.split_voices`, ``"all"``, or a list of
    variant names), plus a random accent, rate, pitch and range; the draw depends only
    on ``seed`` and the call's ``seed``, and synthesis is bit-identical per list.

    Args:
        name: the agent's scope.
        **settings: `SpeakerConfig` fields.
    """

    Config = SpeakerConfig

    def __init__(self, name: str, **settings: Any) -> None:
        super().__init__(name, **settings)
        c = self.cfg
        self.sample_rate = int(c.sample_rate)
        self._voices_cfg, self.voice_seed, self.test_fraction = (
            c.voices,
            c.voice_seed,
            c.test_fraction,
        )
        self.finish()

    @property
    def voices(self) -> list[str]:
        """The voice variants this speaker draws from."""
        return self.resolve_voices(self._voices_cfg)

    def resolve_voices(self, v: Any) -> list[str]:
        """``"train"``/``"test"`` (this speaker's split), ``"all"`` or a list -> variant names."""
        from paddlecraft.craftdata.speech import espeak_voices, split_voices

        if isinstance(v, str):
            if v == "all":
                return espeak_voices()
            train, test = split_voices(self.voice_seed, self.test_fraction)
            if v in ("train", "test"):
                return train if v == "train" else test
            raise ConfigError(
                f"agents.{self.name}.voices: 'train', 'test', 'all' or a list, got {v!r}"
            )
        return [str(x) for x in v]

    def speak(self, texts: Sequence[str], seed: int = 0, cache: bool = False) -> list[np.ndarray]:
        """int16 waveforms at `sample_rate`, one per text."""
        return self.speak_split(texts, seed, cache).waveforms

    def speak_split(
        self, texts: Sequence[str], seed: int = 0, cache: bool = False, voices: Any = None
    ) -> Any:
        """Like `speak`, as a `paddlecraft.craftdata.speech.SpokenSplit` (with each voice).

        ``voices`` overrides the configured ones for this call (e.g. ``"train"``).
        """
        from paddlecraft.craftdata.speech import spoken_split

        base = 0 if self.seed is None else int(self.seed)
        pool = self.voices if voices is None else self.resolve_voices(voices)
        return spoken_split(
            list(texts), pool, [base, int(seed), SPEECH_STREAM], self.sample_rate, cache=cache
        )
