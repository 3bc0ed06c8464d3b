"""Online learning (``data=stream``): arenas that train on samples POSTed to a live run.

``arena=classify data=stream trainer.live=true`` (labelled images) and ``arena=caption
data=stream trainer.live=true`` (image + caption pairs): the samples arrive over the live
server's routes (`.routes`), are logged and fsynced in the run folder before they are
acknowledged (`.log`), and each step trains on a seeded minibatch of the newest
window (the rules: `paddlecraft.craftdata.stream`). ``paddlecraft feed RUN_DIR PATH``
sends a folder (`paddlecraft.feed`).
"""

from .base import StreamSource
from .caption import StreamCaptionArena
from .classify import StreamClassifyArena
from .log import SampleLog, StreamLogError
from .samples import SampleError
from .store import SampleStore

__all__ = [
    "SampleError",
    "SampleLog",
    "SampleStore",
    "StreamCaptionArena",
    "StreamClassifyArena",
    "StreamLogError",
    "StreamSource",
]
