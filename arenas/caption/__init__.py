"""Caption chains: agents that pass a message across image, text and speech.

``arena.py`` (the `CaptionArena` and its settings), ``chain.py`` (which hop may
follow which; running inputs through hops), ``data.py`` (splits, candidates, spoken data),
``metrics.py`` (exact match, BLEU-4, WER, metrics by hop), ``sheet.py`` (the telephone
sheet), ``files.py`` (the arena on your own files: ``data=captions``, ``data=speech``). The agents live in `agents` (Captioner, Listener, Recognizer, Speaker).
"""

from paddlecraft.agents import Captioner, Listener, Recognizer, Speaker

from .arena import CaptionArena, CaptionConfig, CaptionHopConfig
from .chain import HOP_IO, Chain
from .data import CaptionDataConfig, CaptionSpeechConfig
from .metrics import bleu4, exact_match, group_by_hop, word_error_rate

#: Hydra schemas this family adds (see arenas.engine.register_schemas)
SCHEMAS = {
    "schema/arena": {"caption": CaptionArena},
    "schema/agent": {
        "captioner": Captioner,
        "listener": Listener,
        "recognizer": Recognizer,
        "speaker": Speaker,
    },
}

__all__ = [
    "HOP_IO",
    "SCHEMAS",
    "CaptionArena",
    "CaptionConfig",
    "CaptionDataConfig",
    "CaptionHopConfig",
    "CaptionSpeechConfig",
    "Chain",
    "bleu4",
    "exact_match",
    "group_by_hop",
    "word_error_rate",
]
