"""Standard encoders as APIs: declared, trained, saved and loaded, operated by logical names.

Names are imported lazily (PEP 562), so ``from encoders.cpu_tuning import
apply_cpu_tuning`` runs before Paddle is imported; everything else loads on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from paddlecraft import require_paddle

#: public name -> submodule that defines it
_EXPORTS: dict[str, str] = {
    "BoardLineEncoder": "board_lines",
    "CLIPTextEncoder": "clip_text",
    "CLIPResNetEncoder": "clip_resnet",
    "CLIPTokenizer": "clip_tokenizer",
    "CLIPVisionEncoder": "clip_vision",
    "CheckpointError": "tensorio",
    "Encoder": "base",
    "EncoderInputError": "base",
    "ImageCNNEncoder": "image_cnn",
    "ImageDecoder": "image_decoder",
    "ImageMLPEncoder": "image_mlp",
    "InputSpec": "base",
    "LayerSpec": "base",
    "LoadReport": "pretrained",
    "PretrainedLoadError": "pretrained",
    "ResNetEncoder": "resnet",
    "ScopeError": "naming",
    "SpeechEncoder": "speech",
    "SubwordTokenizer": "tokenizer",
    "SummaryTable": "base",
    "TextDecoder": "text_decoder",
    "TextEncoder": "text_encoder",
    "TransformerTextDecoder": "transformer_decoder",
    "TransformerTextEncoder": "transformer_text",
    "ViTEncoder": "vit",
    "Vocab": "vocab",
    "WhisperStyleEncoder": "whisper",
    "init_missing": "base",
    "load_pretrained": "pretrained",
    "physical_names": "naming",
    "read_weights": "pretrained",
    "release_scope": "naming",
    "whisper_log_mel": "whisper",
    "clip_logits": "clip_keys",
}

#: Hydra schemas of the toolkit's encoders: ``schema/encoder/<name>``, derived from each
#: class's constructor signature (see arenas.engine.register_schemas); names, not classes,
#: so reading this dict imports nothing
SCHEMA_NAMES: dict[str, dict[str, str]] = {
    "schema/encoder": {
        "mlp": "ImageMLPEncoder",
        "board_lines": "BoardLineEncoder",
        "cnn": "ImageCNNEncoder",
        "resnet": "ResNetEncoder",
        "vit": "ViTEncoder",
        "bert": "TransformerTextEncoder",
        "clip_vision": "CLIPVisionEncoder",
        "clip_text": "CLIPTextEncoder",
        "clip_resnet": "CLIPResNetEncoder",
        "whisper": "WhisperStyleEncoder",
        "gru_text": "TextEncoder",
        "speech": "SpeechEncoder",
    },
    "schema/decoder": {"transformer_text": "TransformerTextDecoder", "gru_text": "TextDecoder"},
}

__all__ = sorted([*_EXPORTS, "SCHEMAS"])


def __getattr__(name: str) -> Any:
    if name == "SCHEMAS":
        return {g: {k: __getattr__(v) for k, v in d.items()} for g, d in SCHEMA_NAMES.items()}
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'encoders' has no attribute {name!r}")
    require_paddle()  # one line naming the CPU and GPU installs
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
