"""Standard encoders as APIs: declared, trained, saved and loaded, operated by logical names."""

from .base import Encoder, EncoderInputError, InputSpec, LayerSpec, SummaryTable, init_missing
from .image_cnn import ImageCNNEncoder
from .image_mlp import ImageMLPEncoder
from .naming import ScopeError, physical_names, release_scope
from .tensorio import CheckpointError

__all__ = [
    "CheckpointError",
    "Encoder",
    "EncoderInputError",
    "ImageCNNEncoder",
    "ImageMLPEncoder",
    "InputSpec",
    "LayerSpec",
    "ScopeError",
    "SummaryTable",
    "init_missing",
    "physical_names",
    "release_scope",
]
