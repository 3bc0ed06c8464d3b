"""The chain contract: which agent kinds can follow which, and sending inputs through hops.

A chain is a list of hops, each an agent name. Each hop's input must be the previous
hop's output:

=============  ==================  =================
agent class    takes               gives
=============  ==================  =================
Captioner      image               text
Speaker        text                speech
Recognizer     speech              text
Listener       text (+ K images)   image choice
=============  ==================  =================
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from paddlecraft.agents import Agent, Captioner, Listener, Recognizer, Speaker
from paddlecraft.agents.settings import ConfigError

#: modality each kind of hop takes and gives
HOP_IO: dict[type, tuple[str, str]] = {
    Captioner: ("image", "text"),
    Speaker: ("text", "speech"),
    Recognizer: ("speech", "text"),
    Listener: ("text", "choice"),
}


class Chain:
    """Agents in hop order, checked to line up; `run` sends inputs through them.

    Args:
        agents: the agents by name (must hold every hop).
        hops: hop order, by agent name.
    """

    def __init__(self, agents: Mapping[str, Agent], hops: Sequence[str]) -> None:
        self.hops = [str(h) for h in hops]
        if not self.hops:
            raise ConfigError("arena.chain is empty; e.g. arena.chain=[captioner,listener]")
        self.agents = {h: agents[h] for h in self.hops}
        self.kinds: dict[str, type] = {}
        for h in self.hops:
            kind = next((k for k in HOP_IO if isinstance(self.agents[h], k)), None)
            if kind is None:
                raise ConfigError(
                    f"arena.chain hop {h!r} is a {type(self.agents[h]).__name__}; hops must be "
                    "a Captioner, Speaker, Recognizer or Listener"
                )
            self.kinds[h] = kind
        first = HOP_IO[self.kinds[self.hops[0]]][0]
        if first not in ("image", "speech"):
            raise ConfigError(
                f"arena.chain must start from an image (captioner) or speech (recognizer); "
                f"{self.hops[0]!r} takes {first}"
            )
        for a, b in zip(self.hops, self.hops[1:]):
            gives, takes = HOP_IO[self.kinds[a]][1], HOP_IO[self.kinds[b]][0]
            if gives != takes:
                raise ConfigError(
                    f"arena.chain: {a!r} gives {gives} but {b!r} takes {takes}; "
                    "e.g. [captioner, listener] or [captioner, speaker, recognizer, listener]"
                )
        #: the hops that learn (all but speakers), in chain order
        self.learned = [h for h in self.hops if self.kinds[h] is not Speaker]

    @property
    def first_kind(self) -> type:
        """The agent class of the first hop (Captioner: starts from images; Recognizer: speech)."""
        return self.kinds[self.hops[0]]

    def has(self, kind: type) -> bool:
        """Whether any hop is a ``kind``."""
        return any(k is kind for k in self.kinds.values())

    def run(
        self,
        src: dict[str, Any],
        hops: Sequence[str] | None = None,
        *,
        beam_size: int = 1,
        batch_size: int = 256,
        voices_seed: int = 0,
        voices: Any = None,
    ) -> dict[str, Any]:
        """Send ``src`` through ``hops`` (default: the whole chain); the last value of each
        modality, and ``trace``: ``[(hop, [text or note per input])]``.

        ``src`` holds ``images`` (uint8 [N, H, W, C]) or ``speech`` ((clips, rate)), plus
        ``candidates`` (uint8 [N, K, H, W, C]) when a listener hop runs. ``voices``
        overrides the speakers' voices (fine-tuning speaks with training voices, so no
        held-out voice is ever trained on). The result adds ``text``, ``speech`` and
        ``said`` (what the speaker was given), ``choice`` (int [N]) as the hops give them.
        """
        state: dict[str, Any] = dict(src)
        state["trace"] = []
        for h in self.hops if hops is None else hops:
            agent, kind = self.agents[h], self.kinds[h]
            if kind is Captioner:
                state["text"] = agent.caption(
                    state["images"], beam_size=beam_size, batch_size=batch_size
                )
                state["trace"].append((h, list(state["text"])))
            elif kind is Speaker:
                said = list(state["text"])
                spoken = agent.speak_split(said, seed=voices_seed, voices=voices)
                rate = agent.sample_rate
                state["speech"] = (spoken.waveforms, rate)
                state["said"] = said
                notes = [
                    f"(voice {v}, {len(w) / rate:.1f} s)"
                    for v, w in zip(spoken.voices, spoken.waveforms)
                ]
                state["trace"].append((h, notes))
            elif kind is Recognizer:
                waves, rate = state["speech"]
                state["text"] = agent.transcribe(waves, rate, batch_size=64)
                state["trace"].append((h, list(state["text"])))
            else:  # Listener: needs candidates, given in src
                cands = state["candidates"]
                scores = agent.scores(state["text"], cands, batch_size=batch_size)
                state["choice"] = scores.argmax(axis=1)
                state["trace"].append(
                    (h, [f"picked {c + 1} of {cands.shape[1]}" for c in state["choice"]])
                )
        return state
