"""Dual encoders (CLIP-style): an image agent and a text agent learn one embedding space.

``arena.py`` (the `ContrastiveArena` and its settings), ``loss.py`` (the symmetric
contrastive loss), ``metrics.py`` (recall@k over distinct captions), ``zeroshot.py``
(prompts and the linear probe), ``data.py`` (the bundled captioned shapes), ``files.py``
(your own captioned images: ``data=captions``), ``sheet.py`` (the retrieval sheet). The
agents live in `paddlecraft.agents.towers` (ImageTower, TextTower).
"""

from paddlecraft.agents.towers import ImageTower, TextTower

from .arena import ContrastiveArena, ContrastiveConfig, ZeroShotConfig
from .data import ContrastiveDataConfig
from .loss import contrastive_loss, positives_mask
from .metrics import recall_at_k, retrieval_metrics

#: Hydra schemas this family adds (see arenas.engine.register_schemas)
SCHEMAS = {
    "schema/arena": {"contrastive": ContrastiveArena},
    "schema/agent": {"image_tower": ImageTower, "text_tower": TextTower},
}

__all__ = [
    "SCHEMAS",
    "ContrastiveArena",
    "ContrastiveConfig",
    "ContrastiveDataConfig",
    "ZeroShotConfig",
    "contrastive_loss",
    "positives_mask",
    "recall_at_k",
    "retrieval_metrics",
]
