"""The agent's side of the encoder feature contract, and an encoder config's one way to a
built encoder (`build_encoder`): sizes filled in from what the agent knows (its data,
game or chain), contradictions refused, the encoder built, the contract checked.

`make_encoder` calls `build_encoder`; an agent of your
own passes its input sizes with `image_inputs` (images, board planes) or plain
keywords (``vocab_size``...). See docs/write-encoder.md for the contract itself.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping, Sequence
from typing import Any

from hydra.errors import InstantiationException
from hydra.utils import get_object, instantiate
from omegaconf import OmegaConf

from paddlecraft.compat import upgrade_target

from .instantiate import check_targets, to_plain
from .settings import ConfigError


def constructor_params(target: Any) -> set[str]:
    """Keyword names the ``_target_``'s constructor takes (empty when it cannot be read)."""
    if not isinstance(target, str):
        return set()
    try:
        obj = get_object(upgrade_target(target))
        init = obj.__init__ if isinstance(obj, type) else obj
        return set(inspect.signature(init).parameters)
    except (ImportError, AttributeError, ValueError, TypeError):
        return set()


def image_inputs(shape: Any, channels_last: bool = False) -> dict[str, Any]:
    """Encoder input sizes of images (or board planes) of one ``shape``; {} for None.

    ``shape`` is [C, H, W] ([H, W, C] with ``channels_last``, as board planes are): gives
    ``in_channels``, ``image_size`` (an int when square, else [H, W]) and ``input_size``
    (the flat length), the keywords `Agent.make_encoder` fills in.
    """
    if shape is None:
        return {}
    dims = [int(d) for d in shape]
    if len(dims) != 3:
        raise ConfigError(f"an image shape is [channels, height, width], got {dims}")
    c, h, w = (dims[2], dims[0], dims[1]) if channels_last else dims
    return {"in_channels": c, "image_size": h if h == w else [h, w], "input_size": c * h * w}


def _as_size(value: Any) -> Any:
    """Sizes compared by value: ``8`` and ``[8, 8]`` are one image side, lists are tuples."""
    if isinstance(value, (list, tuple)):
        t = tuple(value)
        return t[0] if len(t) == 2 and t[0] == t[1] else t
    return value


def sized_config(
    cfg: dict[str, Any],
    setting: str,
    inputs: Mapping[str, Any] | None = None,
    forced: Mapping[str, Any] | None = None,
    headless: bool = False,
) -> dict[str, Any]:
    """``cfg`` with every size in ``inputs`` its constructor takes filled in where unset.

    A value the config gives that contradicts ``inputs`` raises `ConfigError` naming
    ``<setting>.<key>``; ``forced`` keywords are set whatever the config says; ``headless``
    sets ``num_classes=None``. Keywords the constructor does not take are left out.
    """
    cfg = dict(cfg)
    params = constructor_params(cfg.get("_target_"))
    for key, value in (inputs or {}).items():
        if key not in params or value is None:
            continue
        given = cfg.get(key)
        if given is None or given == "???":
            cfg[key] = value
        elif _as_size(given) != _as_size(value):
            raise ConfigError(
                f"{setting}.{key}={given!r} but this agent's input gives {value!r}; leave "
                f"{key} out of the encoder config (it is filled in from the data)"
            )
    for key, value in {**(forced or {}), **({"num_classes": None} if headless else {})}.items():
        if key in params:
            cfg[key] = value
    return cfg


def check_contract(enc: Any, setting: str) -> None:
    """Raise `ConfigError` unless ``enc`` gives ``pooled`` [B, feature_dim] and an int
    ``feature_dim`` (what agents read of any encoder)."""
    if "pooled" not in getattr(enc, "output_names", ()) or not isinstance(
        getattr(enc, "feature_dim", None), int
    ):
        raise ConfigError(
            f"{setting}: {type(enc).__name__} does not follow the encoder contract (a "
            "'pooled' output [B, feature_dim] and an int feature_dim); see "
            "docs/write-encoder.md"
        )


#: encoder keywords that are sizes: an int (or each int of a list) must be >= 1
_SIZE_SUFFIXES = ("_size", "_dim", "_channels", "heads")
_SIZE_NAMES = frozenset({
    "depth", "dim", "width", "channels", "n_mels", "n_fft", "hop_length", "n_ctx", "max_len",
    "num_classes",
})  # fmt: skip


def _is_size(key: str) -> bool:
    return key in _SIZE_NAMES or key.endswith(_SIZE_SUFFIXES)


def check_sizes(cfg: Mapping[str, Any], setting: str) -> None:
    """Raise `ConfigError` for a size below 1 (``hidden_size=0``, ``latent_dim=0``,
    a channel list with a 0): no encoder can be built, or trained, with it."""
    for key, value in cfg.items():
        if not isinstance(key, str) or not _is_size(key):
            continue
        values = value if isinstance(value, (list, tuple)) else [value]
        ints = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
        if any(v < 1 for v in ints):
            default = _default(cfg.get("_target_"), key)
            hint = f"e.g. {setting}.{key}={default}" if default is not None else "give a size >= 1"
            if key == "num_classes":
                hint = f"or {setting}.num_classes=null for no class head"
            raise ConfigError(f"{setting}.{key}={value!r}: a size must be >= 1; {hint}")


def _default(target: Any, key: str) -> Any:
    """The constructor's default for ``key`` when it is a usable size (else None)."""
    try:
        obj = get_object(upgrade_target(str(target)))
        default = inspect.signature(obj.__init__).parameters[key].default
    except (ImportError, AttributeError, ValueError, TypeError, KeyError):
        return None
    ok = isinstance(default, (int, list, tuple)) and not isinstance(default, bool)
    return default if ok else None


#: input keywords of the encoders of other inputs than images, and what they take
_OTHER_INPUTS = {"vocab_size": "text (token ids)", "n_mels": "speech (log-mel features)"}


def check_takes_images(cfg: Mapping[str, Any], inputs: Mapping[str, Any], setting: str) -> None:
    """Before building: refuse an encoder of text or speech where the agent feeds images.

    ``inputs`` are the sizes the agent fills in (`image_inputs`); an encoder whose
    constructor takes none of the image sizes but a text or speech one cannot read them.
    """
    image = {k: inputs.get(k) for k in ("in_channels", "image_size", "input_size")}
    if all(v is None for v in image.values()):
        return
    params = constructor_params(cfg.get("_target_"))
    other = [what for key, what in _OTHER_INPUTS.items() if key in params]
    if other and not params & image.keys():
        raise ConfigError(
            f"{setting}: {str(cfg.get('_target_')).rsplit('.', 1)[-1]} reads {other[0]}, "
            f"but this agent feeds it images ({_image_text(inputs)}); choose an image "
            f"encoder, e.g. encoder@{setting}=cnn (or mlp, resnet18, vit_tiny)"
        )


#: what a component is, by the keywords its constructor takes, first match wins (a
#: decoder is told by what it is conditioned on)
_KINDS = (
    ("text decoder", ("cond_dim",)),
    ("image decoder", ("latent_dim",)),
    ("speech encoder", ("n_mels", "sample_rate")),
    ("text encoder", ("vocab_size",)),
    ("image encoder", ("in_channels", "image_size", "input_size")),
)
#: built-in options of each kind, as a refusal suggests them
_EXAMPLES = {
    "image encoder": ("encoder", "cnn (or mlp, resnet18, vit_tiny)"),
    "text encoder": ("encoder", "gru_text (or bert_mini)"),
    "speech encoder": ("encoder", "speech (or whisper_tiny)"),
    "image decoder": ("decoder", "dcgan"),
    "text decoder": ("decoder", "gru_text (or gpt_text)"),
}


def component_kind(target: Any) -> str | None:
    """``"image encoder"``, ``"text decoder"`` ... of a ``_target_`` (None: not told)."""
    params = constructor_params(target)
    return next((kind for kind, keys in _KINDS if params & set(keys)), None)


def slot_kind(inputs: Mapping[str, Any] | None) -> str | None:
    """The kind of encoder a slot takes, from the sizes its agent fills in (None: not told)."""
    inputs = inputs or {}
    if any(inputs.get(k) is not None for k in ("in_channels", "image_size", "input_size")):
        return "image encoder"
    if inputs.get("vocab_size") is not None:
        return "text encoder"
    return None


def check_kind(cfg: Mapping[str, Any], takes: str | None, setting: str) -> None:
    """Before building: refuse a component of another kind than the slot ``takes`` (an
    image encoder in a text slot, a text decoder where an image decoder goes, a decoder in
    an encoder slot), naming the config group and options that fit."""
    given = component_kind(cfg.get("_target_"))
    if takes is None or given is None or given == takes:
        return
    group, options = _EXAMPLES[takes]
    name = str(cfg.get("_target_")).rsplit(".", 1)[-1]
    role, other = takes.split()[1], given.split()[1]
    where = f" ({role}s are in conf/{group}/, not conf/{other}/)" if role != other else ""
    raise ConfigError(
        f"{setting}: {name} is {_a(given)}, but this slot takes {_a(takes)}{where}; "
        f"choose one, e.g. {group}@{setting}={options}"
    )


def _a(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def check_image_input(enc: Any, inputs: Mapping[str, Any], setting: str) -> None:
    """After building: one batch of the agent's image shape must pass the encoder's
    declared input spec (what its first forward would check), else `ConfigError`."""
    c, size = inputs.get("in_channels"), inputs.get("image_size")
    specs = list(getattr(enc, "input_specs", {}).values())
    if c is None or size is None or len(specs) != 1:
        return
    h, w = (size, size) if isinstance(size, int) else size
    spec = specs[0]
    shape = (int(c), int(h), int(w))
    ok = (
        None in spec.shape or math.prod(shape) == math.prod(spec.shape)
        if spec.flatten
        else len(spec.shape) == 3 and all(d is None or d == s for d, s in zip(spec.shape, shape))
    )
    if not ok:
        raise ConfigError(
            f"{setting}: {type(enc).__name__} expects input {spec.describe()}, but this agent "
            f"feeds it images ({_image_text(inputs)}); choose an encoder for these images, "
            f"e.g. encoder@{setting}=cnn (or mlp, resnet18, vit_tiny)"
        )


def _image_text(inputs: Mapping[str, Any]) -> str:
    size = inputs.get("image_size")
    h, w = (size, size) if isinstance(size, int) else (size or (None, None))
    return f"[batch, {inputs.get('in_channels')}, {h}, {w}] float32"


def build_encoder(
    cfg: Any,
    scope: str,
    setting: str,
    *,
    allow: Sequence[str] = (),
    inputs: Mapping[str, Any] | None = None,
    forced: Mapping[str, Any] | None = None,
    headless: bool = False,
    features: bool = False,
    takes: str | None = None,
) -> Any:
    """An encoder config (``_target_`` + kwargs) to a built encoder in ``scope``, in order:

    1. a plain copy of the config, every ``_target_`` checked against the allow-list (the
       defaults plus ``allow``) once;
    2. sized: `sized_config` fills in ``inputs`` (refusing contradictions), ``forced``
       and ``headless``; `check_sizes` refuses a size below 1 and
       `check_takes_images` a text or speech encoder fed images, `check_kind` a
       component of another kind than the slot ``takes`` (default: told by ``inputs``);
    3. built: constructed under ``scope`` and ``build()`` called; an encoder's own
       ValueError or TypeError while being constructed comes back as one
       `ConfigError` naming ``setting``;
    4. with ``features``, `check_contract`; then `check_image_input` (the
       agent's image shape against the encoder's declared input).
    """
    cfg = dict(to_plain(cfg))
    cfg.pop("_partial_", None)
    check_targets(cfg, allow)
    cfg = sized_config(cfg, setting, inputs, forced, headless)  # sizes only: no new target
    check_sizes(cfg, setting)
    check_takes_images(cfg, inputs or {}, setting)
    check_kind(cfg, takes or slot_kind(inputs), setting)
    try:
        enc = instantiate(OmegaConf.create(cfg), scope=scope)
    except InstantiationException as e:
        cause = e.__cause__
        if type(cause) in (ValueError, TypeError):  # the encoder's own check, said plainly
            raise ConfigError(f"{setting}: {cause}") from cause
        raise
    enc = enc.build()
    if features:
        check_contract(enc, setting)
    check_image_input(enc, inputs or {}, setting)
    return enc
