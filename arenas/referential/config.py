"""The settings of a referential game (``arena.*`` of ``arena=referential``): one dataclass,
its constructor signature, Hydra schema and saved record."""

from __future__ import annotations

from dataclasses import dataclass, field

from paddlecraft.agents.settings import ConfigError
from paddlecraft.arenas.engine import ArenaConfig

__all__ = ["CHANNELS", "GAMES", "ReferentialConfig", "check_settings"]

GAMES = ("reconstruction", "discrimination")
CHANNELS = ("gs", "reinforce")


@dataclass
class ReferentialConfig(ArenaConfig):
    """paddlecraft.arenas.ReferentialArena settings."""

    epochs: int = 30  #: passes of steps_per_epoch steps
    steps_per_epoch: int = 100  #: training steps per epoch (targets are drawn, not iterated)
    batch_size: int = 32  #: targets per step
    n_attributes: int = 2  #: attribute world: attributes per object
    n_values: int = 10  #: attribute world: values per attribute
    holdout: float = 0.1  #: attribute world: share of combinations never seen in training
    game: str = "reconstruction"  #: reconstruction (rebuild attributes) | discrimination
    candidates: int = 4  #: discrimination: objects the listener chooses among (K)
    #: discrimination: K while training (0: ``candidates``); more distractors than the
    #: evaluation's push the language to tell apart what a few random ones rarely ask for
    train_candidates: int = 0
    channel: str = "gs"  #: gs (Gumbel-softmax, straight-through) | reinforce
    vocab_size: int = 10  #: symbols (symbol 0 ends a message when variable_length)
    max_len: int = 2  #: symbols per message
    variable_length: bool = False  #: messages may end early with symbol 0
    temperature: float = 1.0  #: Gumbel-softmax temperature at step 0
    temperature_end: float = 1.0  #: ... after temperature_decay_steps (geometric)
    temperature_decay_steps: int = 0  #: 0: constant temperature
    entropy_coef: float = 0.01  #: reinforce: the speaker's entropy bonus
    #: gs: a bonus on the entropy of the speaker's symbol distributions (0: off), against
    #: symbols that fall out of use
    gs_entropy_coef: float = 0.0
    speakers: int = 1  #: population size (speaker, speaker_1, ...)
    listeners: int = 1  #: population size (listener, listener_1, ...)
    newcomer_steps: int = 0  #: after training, teach a new listener this many steps (0: off)
    #: every N steps every listener starts again from fresh weights and optimizer state (0:
    #: never), Li & Bowling's ease-of-teaching pressure on the speakers' language
    reset_listeners_every: int = 0
    #: no listener reset after this step (0: to the end), so the last listeners learn in full
    reset_listeners_until: int = 0
    #: iterated learning (Ren et al. 2020): every N steps (0: never) fresh speakers and
    #: listeners learn the old speakers' language for imitation_steps, then interact
    iterated_every: int = 0
    iterated_until: int = 0  #: no new generation after this step (0: to the end)
    imitation_steps: int = 300  #: iterated learning: steps of the imitation phase
    spoken: bool = False  #: voice each symbol (eSpeak NG) through noise; needs reinforce
    snr_db: float = 20.0  #: spoken: signal-to-noise ratio of training and evaluation (dB)
    eval_snrs: list = field(default_factory=lambda: [-10.0, -5.0, 0.0, 5.0, 10.0, 20.0])
    #: ^ spoken: the SNRs (dB) of the accuracy-vs-SNR curve (first pair, training objects)
    eval_size: int = 1000  #: objects evaluated per split (at most)
    analysis_size: int = 300  #: objects whose messages are analysed (topsim is O(n^2))


def check_settings(c: ReferentialConfig) -> None:
    """Refuse settings out of range, naming the setting, before anything is built."""
    if c.game not in GAMES:
        raise ConfigError(f"arena.game: one of {list(GAMES)}, got {c.game!r}")
    if c.channel not in CHANNELS:
        raise ConfigError(f"arena.channel: one of {list(CHANNELS)}, got {c.channel!r}")
    if c.game == "discrimination" and c.candidates < 2:
        raise ConfigError(f"arena.candidates: at least 2 for discrimination, got {c.candidates}")
    if c.game == "discrimination" and c.train_candidates != 0 and c.train_candidates < 2:
        raise ConfigError(
            f"arena.train_candidates: at least 2 (or 0: arena.candidates), got {c.train_candidates}"
        )
    if c.speakers < 1 or c.listeners < 1:
        raise ConfigError(
            f"arena.speakers and arena.listeners must be >= 1, got {c.speakers}, {c.listeners}"
        )
    if c.spoken and (c.channel != "reinforce" or c.variable_length):
        raise ConfigError(
            "arena.spoken=true: speech cannot pass a gradient and messages are voiced whole; "
            "set arena.channel=reinforce and arena.variable_length=false"
        )
    if c.reset_listeners_every < 0 or c.reset_listeners_until < 0:
        raise ConfigError(
            "arena.reset_listeners_every and arena.reset_listeners_until must be >= 0 "
            f"(0: off / to the end), got {c.reset_listeners_every}, {c.reset_listeners_until}"
        )
    if c.iterated_every < 0 or c.iterated_until < 0 or c.imitation_steps < 1:
        raise ConfigError(
            "arena.iterated_every and arena.iterated_until must be >= 0 (0: off / to the end) "
            f"and arena.imitation_steps >= 1, got {c.iterated_every}, {c.iterated_until}, "
            f"{c.imitation_steps}"
        )
    if c.iterated_every and c.spoken:
        raise ConfigError(
            "arena.iterated_every: iterated learning teaches written messages; set "
            "arena.spoken=false or arena.iterated_every=0"
        )
    if c.gs_entropy_coef < 0:
        raise ConfigError(f"arena.gs_entropy_coef must be >= 0 (0: off), got {c.gs_entropy_coef}")
    if c.temperature <= 0 or c.temperature_end <= 0:
        raise ConfigError("arena.temperature and arena.temperature_end must be > 0")
