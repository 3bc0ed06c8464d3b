"""Standard encoders as APIs: declared, trained, saved and loaded, operated by logical names."""

from . import cpu_tuning  # noqa: F401  (first: it must run before paddle is imported)
from .base import Encoder, EncoderInputError, InputSpec, LayerSpec, SummaryTable, init_missing
from .image_cnn import ImageCNNEncoder
from .image_decoder import ImageDecoder
from .image_mlp import ImageMLPEncoder
from .naming import ScopeError, physical_names, release_scope
from .speech import SpeechEncoder
from .tensorio import CheckpointError
from .text import TextDecoder, TextEncoder, Vocab

__all__ = [
    "CheckpointError",
    "Encoder",
    "EncoderInputError",
    "ImageCNNEncoder",
    "ImageDecoder",
    "ImageMLPEncoder",
    "InputSpec",
    "LayerSpec",
    "ScopeError",
    "SpeechEncoder",
    "SummaryTable",
    "TextDecoder",
    "TextEncoder",
    "Vocab",
    "init_missing",
    "physical_names",
    "release_scope",
]
