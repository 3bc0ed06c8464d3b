"""Pretrained weights from files researchers already have: read, translate keys, copy, report.

`read_weights` reads ``.safetensors`` files and Paddle ``.pdparams`` pickles (through a
restricted unpickler that only rebuilds numpy arrays and dicts: a crafted pickle cannot run
code). `load_pretrained` copies the arrays into an encoder and returns a
`LoadReport` (matched / missing / unexpected / shape-mismatched keys).

The contract an encoder family implements to accept external weights:

- ``detect_source(keys: list[str]) -> str`` (classmethod): which naming the file uses, from
  its key patterns, e.g. ``"torchvision"``, ``"paddle"``, ``"hf_resnet"``, ``"hf_vit"``,
  ``"timm"``, ``"hf_bert"``, ``"hf_whisper"``. Pass ``source=`` to skip detection.
- ``pretrained_key(key: str, source: str) -> str | None``: the key of ``self.state_dict()``
  (e.g. ``layers.layer1.0.conv1.weight``) that external ``key`` fills; None = unexpected.
  `rename_prefix` does the usual prefix renames.
- optional ``convert_pretrained(arrays: dict, source: str) -> dict``: split or fuse arrays
  first (e.g. timm's fused ``qkv`` into three Linears), still in the source's layout.

What the loader does generically, so an encoder never has to:

- keys ending in ``num_batches_tracked`` (torch BatchNorm counters) are ignored;
- a mapped key ending in ``running_mean`` / ``running_var`` becomes Paddle's ``_mean`` /
  ``_variance``;
- for every source except those in the encoder's ``paddle_layout_sources`` (default
  ``("paddle",)``), the weight of each ``nn.Linear`` (found by walking the encoder's
  sublayers) is transposed from torch's [out, in] to Paddle's [in, out];
- values are cast to the target's dtype; shapes are compared after the transpose.

PaddleCraft's own weights need no mapping: `save_state` writes an encoder's
``state_dict()`` keys (``layers.layer1.0.conv1.weight``), which any encoder of the same
family reads back as source ``"paddlecraft"`` whatever its scope (the fine-tuning case:
train, ``save_state``, build a new encoder with another head, ``load_pretrained(strict=False)``).

``strict=True`` raises `PretrainedLoadError` (carrying the report) when anything is
missing, unexpected or of the wrong shape, and loads nothing; ``strict=False`` loads what
matches (fine-tuning: the backbone loads, a new head stays initialised).
"""

from __future__ import annotations

import logging
import os
import pickle
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import paddle
from paddle import nn

from paddlecraft.errors import PaddleCraftError

log = logging.getLogger(__name__)

#: the globals a ``paddle.save(state_dict)`` pickle needs (checked on Paddle 3.3.1 / numpy 2.x;
#: numpy 1.x files say ``numpy.core``), nothing else
_PICKLE_ALLOWED = frozenset(
    {
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("collections", "OrderedDict"),
    }
)


class PretrainedLoadError(PaddleCraftError, RuntimeError):
    """External weights do not fit the encoder (``.report`` says how), or the file is unsafe."""

    def __init__(self, message: str, report: LoadReport | None = None) -> None:
        super().__init__(message)
        self.report = report


class _RestrictedUnpickler(pickle.Unpickler):
    """Rebuilds numpy arrays and dicts only; any other global is refused before it is loaded."""

    def __init__(self, file: Any, path: str) -> None:
        super().__init__(file)
        self._path = path

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _PICKLE_ALLOWED:
            return super().find_class(module, name)
        raise PretrainedLoadError(
            f"refusing to load {self._path!r}: the pickle asks for global '{module}.{name}', "
            "which is not needed to rebuild a Paddle state_dict of numpy arrays (only "
            f"{sorted('.'.join(g) for g in _PICKLE_ALLOWED)} are allowed). The file may run "
            "code when unpickled; if you trust it, convert it to .safetensors in its own "
            "framework first."
        )


def _flatten(obj: Mapping, prefix: str, out: dict[str, np.ndarray]) -> None:
    for k, v in obj.items():
        key = f"{prefix}{k}"
        if isinstance(v, np.ndarray):
            out[key] = v
        elif isinstance(v, Mapping) and not str(k).endswith("@@"):
            _flatten(v, key + ".", out)
        # other leaves (ints, strings, Paddle's "StructuredToParameterName@@" table) carry no weights


def read_weights(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """``{key: array}`` from a ``.safetensors`` file or a Paddle ``.pdparams`` pickle (safely).

    Nested dicts in a ``.pdparams`` are flattened with dots; non-array entries are skipped.
    """
    p = Path(path)
    if not p.is_file():
        raise PretrainedLoadError(f"pretrained weights file {str(p)!r} does not exist")
    suffix = p.suffix.lower()
    if suffix == ".safetensors":
        from safetensors.numpy import load_file

        try:
            return dict(load_file(str(p)))
        except Exception as e:  # safetensors raises several types for a bad header/dtype
            raise PretrainedLoadError(
                f"{str(p)!r} is not a readable safetensors file for numpy ({e})"
            ) from e
    if suffix in (".pdparams", ".pdparam"):
        with open(p, "rb") as f:
            try:
                obj = _RestrictedUnpickler(f, str(p)).load()
            except PretrainedLoadError:
                raise
            except Exception as e:
                raise PretrainedLoadError(
                    f"{str(p)!r} is not a readable .pdparams file ({e})"
                ) from e
        if not isinstance(obj, Mapping):
            raise PretrainedLoadError(
                f"{str(p)!r} holds a {type(obj).__name__}, expected a state_dict (dict of arrays)"
            )
        out: dict[str, np.ndarray] = {}
        _flatten(obj, "", out)
        return out
    raise PretrainedLoadError(
        f"cannot read pretrained weights {str(p)!r}: expected a .safetensors or .pdparams file, "
        f"got {suffix or 'no suffix'!r}. Convert a torch .bin/.pt with "
        "safetensors.torch.save_file(torch.load(f, weights_only=True), 'model.safetensors')."
    )


@dataclass
class LoadReport:
    """What a pretrained load did: keys matched, missing, unexpected and of the wrong shape."""

    source: str
    path: str = ""
    matched: list[str] = field(default_factory=list)  #: encoder state_dict keys filled
    missing: list[str] = field(default_factory=list)  #: encoder keys the file did not fill
    unexpected: list[str] = field(default_factory=list)  #: file keys with no place in the encoder
    #: (encoder key, shape the encoder wants, shape the file has)
    mismatched: list[tuple[str, tuple, tuple]] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  #: file keys skipped on purpose

    @property
    def ok(self) -> bool:
        """Whether every encoder key was filled and every file key was used."""
        return not (self.missing or self.unexpected or self.mismatched)

    def __str__(self) -> str:
        def block(title: str, items: Sequence[str], limit: int = 12) -> list[str]:
            if not items:
                return []
            more = f"\n    ... and {len(items) - limit} more" if len(items) > limit else ""
            return [f"  {title} ({len(items)}):"] + [f"    {s}" for s in items[:limit]] + [more]

        head = f"pretrained load from {self.path or '<arrays>'} (source format: {self.source}): "
        head += f"{len(self.matched)} matched" + ("" if self.ok else ", NOT a complete match")
        lines = [head]
        lines += block(
            "shape mismatch (key: encoder wants vs file has)",
            [f"{k}: {list(w)} vs {list(g)}" for k, w, g in self.mismatched],
        )
        lines += block("missing from the file (left as initialised)", self.missing)
        lines += block("unexpected in the file (not used)", self.unexpected)
        return "\n".join(line for line in lines if line)


def rename_prefix(key: str, rules: Iterable[tuple[str, str]]) -> str | None:
    """``key`` with the first matching ``(old prefix, new prefix)`` rule applied; None if none match."""
    for old, new in rules:
        if key.startswith(old):
            return new + key[len(old) :]
    return None


def linear_weight_keys(layer: nn.Layer) -> set[str]:
    """The ``state_dict()`` keys of ``layer`` that are ``nn.Linear`` weights ([in, out] in Paddle)."""
    return {f"{name}.weight" for name, sub in layer.named_sublayers() if isinstance(sub, nn.Linear)}


def _paddle_key(key: str) -> str:
    for torch_name, paddle_name in ((".running_mean", "._mean"), (".running_var", "._variance")):
        if key.endswith(torch_name):
            return key[: -len(torch_name)] + paddle_name
    return key


#: the source name of files written by `save_state`
PADDLECRAFT = "paddlecraft"


def save_state(state: Mapping[str, paddle.Tensor], path: str | os.PathLike) -> str:
    """Write an encoder's ``state_dict()`` (scope-free keys) as safetensors; return its SHA-256.

    Unlike ``Encoder.save`` (physical names, for checkpoints of the same scope), any encoder
    of the same family, in any scope and with any head, can ``load_pretrained`` this file.
    """
    from .tensorio import save_tensors

    return save_tensors(path, dict(state), {"format": "paddlecraft-state-1"})


@dataclass(frozen=True)
class KeyMapping:
    """An encoder family's side of the contract above, as data: how it names external weights.

    `KeyMapping.of` reads the contract's members from an encoder; a member it lacks keeps the
    default here (no ``detect_source``: pass ``source=``; no ``pretrained_key``: only files
    written by `save_state` load).
    """

    detect_source: Callable[[list[str]], str] | None = None
    pretrained_key: Callable[[str, str], str | None] | None = None
    convert_pretrained: Callable[[dict, str], dict] | None = None
    paddle_layout_sources: tuple[str, ...] = ("paddle",)

    @classmethod
    def of(cls, family: object) -> KeyMapping:
        """The contract's members that ``family`` (an encoder or its class) implements."""
        names = [f.name for f in fields(cls) if hasattr(family, f.name)]
        return cls(**{name: getattr(family, name) for name in names})


def check_loadable(who: str, keys: KeyMapping, source: str | None) -> None:
    """Raise `PretrainedLoadError` before anything is built when ``who`` cannot load external
    weights: no key mapping (and the file is not our own), or static mode."""
    if source != PADDLECRAFT and keys.pretrained_key is None:
        raise PretrainedLoadError(
            f"{who} has no pretrained key mapping (no pretrained_key method); load its own "
            "checkpoints with .load(path), or implement pretrained_key/detect_source for it"
        )
    if not paddle.in_dynamic_mode():
        raise PretrainedLoadError(
            f"{who}: load pretrained weights in dynamic mode (before paddle.enable_static()); "
            "a static program then reads the loaded values from the parameters"
        )


def copy_pretrained(
    path: str | os.PathLike | Mapping[str, np.ndarray],
    target: Mapping[str, paddle.Tensor],
    linear_keys: set[str],
    keys: KeyMapping,
    who: str,
    strict: bool = True,
    source: str | None = None,
) -> LoadReport:
    """Copy external weights (a file, or ``{key: array}``) into ``target``; return the report.

    ``target``: a built encoder's ``state_dict()`` (its live tensors, filled in place);
    ``linear_keys``: its ``nn.Linear`` weights (`linear_weight_keys`); ``keys``: its family's
    `KeyMapping`; ``who`` names it in messages. With ``strict`` nothing is copied unless the
    match is complete.
    """
    arrays = dict(path) if isinstance(path, Mapping) else read_weights(path)
    where = "<arrays>" if isinstance(path, Mapping) else str(path)
    if source is None and arrays and all(k in target for k in arrays):
        source = PADDLECRAFT  # written by save_state: the keys are ours already
    if source is None:
        if keys.detect_source is None:
            raise PretrainedLoadError(f"{who} cannot detect the file's naming: pass source=")
        source = keys.detect_source(list(arrays))
    report = LoadReport(source=source, path=where)
    report.ignored = sorted(k for k in arrays if k.endswith("num_batches_tracked"))
    arrays = {k: v for k, v in arrays.items() if not k.endswith("num_batches_tracked")}
    if keys.convert_pretrained is not None:
        arrays = keys.convert_pretrained(arrays, source)

    transpose = source not in (*keys.paddle_layout_sources, PADDLECRAFT)
    linear_w = linear_keys if transpose else set()
    values: dict[str, np.ndarray] = {}
    for key in sorted(arrays):
        mapped = key if source == PADDLECRAFT else keys.pretrained_key(key, source)
        mapped = None if mapped is None else _paddle_key(mapped)
        if mapped is None or mapped not in target:
            report.unexpected.append(key)
            continue
        value = np.asarray(arrays[key])
        if mapped in linear_w and value.ndim == 2:
            value = value.T  # torch Linear [out, in] -> Paddle [in, out]
        want = tuple(target[mapped].shape)
        if tuple(value.shape) != want:
            report.mismatched.append((mapped, want, tuple(value.shape)))
            continue
        if mapped in values:
            report.unexpected.append(key)  # two file keys for one place: keep the first
            continue
        values[mapped] = value
    report.matched = [k for k in target if k in values]
    mismatched = {k for k, _, _ in report.mismatched}
    report.missing = [k for k in target if k not in values and k not in mismatched]

    if strict and not report.ok:
        raise PretrainedLoadError(
            f"cannot load {where} into {who} with strict=True:\n{report}\nBuild the encoder "
            "with the file's settings (depth, width, num_classes...), pass source= if the "
            "format was misdetected, or pass strict=False to load what matches.",
            report,
        )
    for key, value in values.items():
        t = target[key]
        t.set_value(value.astype(str(t.dtype).replace("paddle.", ""), copy=False))
    log.info("%s", report)
    return report


class Pretrainable(Protocol):
    """What `load_pretrained` needs of an encoder: its own ``load_pretrained`` method."""

    def load_pretrained(
        self,
        path: str | os.PathLike | Mapping[str, np.ndarray],
        strict: bool = True,
        source: str | None = None,
    ) -> LoadReport: ...


def load_pretrained(
    encoder: Pretrainable,
    path: str | os.PathLike | Mapping[str, np.ndarray],
    strict: bool = True,
    source: str | None = None,
) -> LoadReport:
    """``encoder.load_pretrained(path, strict, source)``: copy external weights (a file, or
    ``{key: array}``) into an encoder, building it first if needed; return the report.

    See the module docstring for the contract the encoder implements. With ``strict``
    nothing is copied unless the match is complete.
    """
    return encoder.load_pretrained(path, strict=strict, source=source)
