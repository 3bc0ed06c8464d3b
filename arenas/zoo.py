"""Measures a zoo entry's quality the way its ``quality.json`` records it.

``scripts/build_zoo.py`` writes the figure with `measure`; ``tests/test_zoo.py`` checks
it again. How each entry is trained is `paddlecraft.agents.zoo.quality.ENTRIES`; the
measurement lives here because it uses the arenas' data, metrics and games.
"""

from __future__ import annotations

from typing import Any

from paddlecraft.agents.zoo.quality import ENTRIES, SEED


def _captioner_exact_match(agent: Any) -> float:
    from paddlecraft.arenas.caption.data import CaptionDataConfig, build_world
    from paddlecraft.arenas.caption.metrics import exact_match

    world = build_world("shapes", SEED, k=4, data=CaptionDataConfig())  # the arena's test split
    return exact_match(agent.caption(world.test.images, beam_size=1), world.test.texts)


def _recognizer_exact_match(agent: Any) -> float:
    from paddlecraft.arenas.caption.data import TEST_SPEECH_STREAM
    from paddlecraft.arenas.caption.metrics import exact_match
    from paddlecraft.craftdata import load_digits
    from paddlecraft.craftdata.speech import DIGIT_WORDS, split_voices, spoken_split

    # the digits chain's test clips: the first 360 test digits' words, held-out voices,
    # synthesised with the arena's stream
    words = [DIGIT_WORDS[int(y)] for y in load_digits(SEED).test.y[:360]]
    _, test_voices = split_voices(0, 0.2)
    clips = spoken_split(words, test_voices, [SEED, TEST_SPEECH_STREAM], 16000)
    return exact_match(agent.transcribe(clips.waveforms, 16000), clips.texts)


def measure(name: str) -> float:
    """Measure zoo entry ``name`` the way its ``quality.json`` says (deterministic data)."""
    from paddlecraft.agents import Agent

    if name == "digits-mlp":
        from paddlecraft.craftdata import load_digits

        agent = Agent.pretrained(name)
        test = load_digits(seed=0).test
        return float((agent.predict(test.x) == test.y).mean())
    if name == "tictactoe-policy":
        import numpy as np

        from paddlecraft.arenas.games import MinimaxPlayer
        from paddlecraft.arenas.selfplay.player import PolicyPlayer
        from paddlecraft.arenas.selfplay.tournament import play_pair

        agent = Agent.pretrained(name)
        outcomes = play_pair(  # +1 / 0 / -1 for the policy
            PolicyPlayer(agent),
            MinimaxPlayer(),
            "tictactoe",
            200,
            np.random.default_rng(0),
        )
        return float((outcomes >= 0).mean())
    if name in ("shapes-captioner", "spoken-digit-recognizer"):
        agent = Agent.pretrained(name)
        if name == "shapes-captioner":
            return _captioner_exact_match(agent)
        return _recognizer_exact_match(agent)
    raise KeyError(f"no measurement for zoo entry {name!r}; known: {sorted(ENTRIES)}")
