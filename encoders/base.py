"""The `Encoder` base: a ``paddle.nn.Layer`` operated by logical names.

An encoder declares its logical layers in ``self.model`` (logical name -> `LayerSpec`)
and its logical inputs/outputs. ``build()`` turns the specs into layers whose parameters
are physically named ``<scope>.<logical name>.<w_0|b_0|...>``. Before ``build()`` the
seed's sharing idiom works:

    enc = ImageMLPEncoder("model1")
    enc.model["hidden_layer_2"] = enc.model["hidden_layer_1"]   # one parameter set
    enc.build()

After ``build()``, everything is addressed by logical name: `Encoder.get_param`,
`Encoder.get_gradient`, `Encoder.freeze`, `Encoder.share`, `Encoder.summary`, `Encoder.save`.

In static mode (``paddle.enable_static()`` + ``program_guard``) ``build()`` also creates
the program's feed variables and outputs as attributes, seed style: ``enc.input``,
``enc.label`` (classifiers), ``enc.prediction`` (see `paddlecraft.encoders.static`).

One idea, the names API over one Layer (declare, build, address by logical name, gradients,
freeze, share, save) and the feature contract every encoder keeps; beside it: the contract's
names (``contract``), declarations and building layers from them (``specs``), gradients
(``gradients``), static mode (``static``) and the summary table (``summary``).
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Mapping
from typing import Any

import paddle
from paddle import nn

from . import pretrained as external
from .contract import FEATURES, INPUT_KEYS, LENGTHS, POSITIONS, PREDICTION
from .gradients import OutputGradients, param_gradient
from .naming import check_scope_syntax, find_params
from .pretrained import LoadReport
from .sharing import sharers
from .specs import (
    EncoderInputError,
    InputSpec,
    LayerSpec,
    SharedSpec,
    build_layers,
    check_inputs,
    check_signature,
)
from .static import build_static, init_missing, output_grad_value, param_grad_value
from .summary import SummaryTable
from .tensorio import assign_by_name, load_tensors, save_tensors

__all__ = [
    "FEATURES",
    "INPUT_KEYS",
    "LENGTHS",
    "POSITIONS",
    "PREDICTION",
    "Encoder",
    "EncoderInputError",
    "InputSpec",
    "LayerSpec",
    "SharedSpec",
    "SummaryTable",
    "Tensor",
    "init_missing",
]

Tensor = paddle.Tensor


class Encoder(nn.Layer):
    """Base of every PaddleCraft encoder: logical layers, physical names, build, introspection.

    Subclasses call ``super().__init__(scope)``, then `declare` each logical layer
    and `declare_input` each input, and implement `_forward`, which returns
    a dict of named outputs (``{"prediction": logits}``). ``forward`` returns the
    `primary_output`; `forward_all` returns the dict.

    **The feature contract** (what every agent relies on, and all it relies on; timm's
    ``forward_features`` / ``num_classes=0`` idea in this API's names):

    - ``pooled`` [B, feature_dim]: one feature vector per item, always an output
      (`forward_features` returns it).
    - ``hidden`` [B, T, feature_dim]: per-position features where the encoder has
      positions (tokens, audio frames, spatial cells), so a decoder can attend and a CTC
      head can align; ``lengths`` int64 [B] says how many are valid when padding varies.
      Encoders that mix every cell in one dense layer (the MLP, the small CNN) have none.
    - ``feature_dim``: the width of both, the one size attribute agents read.
    - ``num_classes`` None (unset in a config) means headless; with ``num_classes`` a
      linear head adds ``prediction`` [B, num_classes] (then the primary output).
    - Sizes that depend on the input are constructor keywords named as in
      `INPUT_KEYS` (``in_channels``, ``image_size``, ``input_size``,
      ``vocab_size``); an agent fills in those its encoder takes from the data, game or
      chain, so configs never restate them. Speech encoders read waveforms [B, S] at their
      ``sample_rate`` and say the shortest clip they take (``min_samples``).

    A user's encoder follows the same contract and plugs into every agent slot (see
    ``docs/write-encoder.md``).
    """

    #: width of ``pooled`` and ``hidden`` (subclasses set it in ``__init__``)
    feature_dim: int

    #: outputs whose activation gradient is recorded by default (see `watch`)
    default_watch: tuple[str, ...] = ("prediction",)
    #: static mode: add an int64 ``label`` feed when ``num_classes`` is set (classifiers)
    label_feed: bool = True

    def __init__(self, scope: str) -> None:
        super().__init__()
        check_scope_syntax(scope)
        self.scope = scope
        self.model: dict[str, LayerSpec | SharedSpec] = {}
        self._declared: dict[str, tuple] = {}
        self._inputs: dict[str, InputSpec] = {}
        self._output_names: tuple[str, ...] = ()
        self.num_classes: int | None = None
        self._built = False
        self._borrowed: dict[str, tuple[Encoder, str]] = {}
        self._lent: list[tuple[weakref.ref, str, str]] = []
        self._out_grads = OutputGradients()  # activation gradients of watched outputs
        self._fixed: set[str] = set()  # intrinsically non-trainable (BN statistics)
        self.program: paddle.static.Program | None = None
        self.static_scope: paddle.static.Scope | None = None
        self._static_outputs: dict[str, Any] = {}

    # ----------------------------------------------------------------- declaration
    def declare(self, logical: str, spec: LayerSpec) -> None:
        """Add a logical layer (subclasses call this in ``__init__``)."""
        self.model[logical] = spec
        self._declared[logical] = spec.signature

    def declare_input(self, name: str, spec: InputSpec) -> None:
        """Add a logical input, in the order ``forward`` takes them."""
        self._inputs[name] = spec

    def declare_outputs(self, *names: str) -> None:
        """Name the outputs ``_forward`` returns; the first is the primary one."""
        self._output_names = names
        self._out_grads.watched = {n for n in self.default_watch if n in names}

    @property
    def output_names(self) -> tuple[str, ...]:
        """Logical outputs, primary first."""
        return self._output_names

    @property
    def input_names(self) -> tuple[str, ...]:
        """Logical inputs in ``forward`` order."""
        return tuple(self._inputs)

    @property
    def input_specs(self) -> dict[str, InputSpec]:
        """Logical inputs with their shapes (batch axis excluded) and dtypes, in ``forward`` order."""
        return dict(self._inputs)

    def forward_features(self, *inputs: Any) -> Tensor:
        """Pooled features [B, feature_dim] (the contract's ``pooled`` output)."""
        return self.forward_all(*inputs)[FEATURES]

    @property
    def primary_output(self) -> str:
        """The output ``forward`` returns."""
        return self._output_names[0]

    @property
    def logical_names(self) -> list[str]:
        """Logical layer names in declaration order."""
        return list(self.model)

    @property
    def built(self) -> bool:
        """Whether `build` has run."""
        return self._built

    # ----------------------------------------------------------------- build
    def build(self) -> Encoder:
        """Create the layers (and, in static mode, the program's inputs and outputs).

        Dynamic mode builds once; later calls do nothing. In static mode each call builds
        into the current default main program (the seed rebuilds a program to unfreeze),
        reusing the same physical names so values carry over through the scope.
        """
        static = not paddle.in_dynamic_mode()
        if self._built and not static:
            return self
        layers = build_layers(self.scope, self._who(), self.model, self._declared)
        self.layers = nn.LayerDict(layers)
        first = not self._built
        self._built = True
        self._fixed = {p.name for p in self.parameters() if p.stop_gradient}
        if first and getattr(self, "pretrained", None):
            # encoders with a ``pretrained`` setting load their file right after building
            self.load_pretrained(self.pretrained, strict=getattr(self, "pretrained_strict", True))
        if static:
            self.program, self.static_scope, outputs = build_static(
                self.scope,
                self._who(),
                self._inputs,
                bool(self.label_feed and self.num_classes is not None),
                self._forward,
            )
            self._static_outputs.update(outputs)
        return self

    def __getattr__(self, name: str) -> Any:
        # seed style: enc.input / enc.label / enc.prediction in static mode
        statics = self.__dict__.get("_static_outputs")
        if statics and name in statics:
            return statics[name]
        return super().__getattr__(name)

    # ----------------------------------------------------------------- forward
    def forward(self, *inputs: Any) -> Tensor:
        """Run the encoder and return its primary output (builds first if needed)."""
        return self.forward_all(*inputs)[self.primary_output]

    def forward_all(self, *inputs: Any) -> dict[str, Tensor]:
        """Run the encoder and return every named output."""
        if not self._built:
            self.build()
        xs = self._check_inputs(inputs)
        outs = self._forward(*xs)
        self._out_grads.hook(outs)
        return outs

    def _forward(self, *inputs: Tensor) -> dict[str, Tensor]:
        """Compute the named outputs from checked inputs (subclasses implement)."""
        raise NotImplementedError

    def _check_inputs(self, inputs: tuple) -> list[Tensor]:
        return check_inputs(self._who(), self._inputs, inputs, self._input_fix)

    def _input_fix(self, name: str, spec: InputSpec) -> str:
        """A hint for a wrong input (subclasses may refine it)."""
        return "Reshape/cast the input, or build the encoder for this input shape."

    def _who(self) -> str:
        return f"{type(self).__name__}({self.scope!r})"

    def parameters(self, include_sublayers: bool = True) -> list:
        """All parameters, deduplicated (builds first in dynamic mode, so optimizers see them)."""
        if not self._built and paddle.in_dynamic_mode():
            self.build()
        return super().parameters(include_sublayers)

    # ----------------------------------------------------------------- names API
    def _require_built(self) -> None:
        if not self._built:
            raise RuntimeError(f"{self._who()} is not built yet: call .build() (or run it once)")

    def _layer_params(self, logical: str) -> list:
        return list(self.layers[logical].parameters())

    def named_logical_params(self) -> dict[str, list]:
        """``{logical name: [Parameter, ...]}`` for every logical layer."""
        self._require_built()
        return {name: self._layer_params(name) for name in self.layers}

    def get_param(self, name: str) -> dict[str, list]:
        """Parameters by logical name, physical name or prefix of either: ``{logical: [p, ...]}``."""
        self._require_built()
        return find_params(self.named_logical_params(), name, self._who(), self.scope)

    def watch(self, *outputs: str) -> None:
        """Record the gradient of these outputs on the next backward (``prediction`` is default)."""
        self._out_grads.watch(self._who(), self._output_names, outputs)

    def unwatch(self, *outputs: str) -> None:
        """Stop recording activation gradients for these outputs (all if none given)."""
        self._out_grads.unwatch(outputs)

    def get_gradient(self, x: Any, loss: Any = None, layer: bool = False) -> dict[str, list]:
        """Gradients by Parameter, logical layer name, physical name or logical output.

        - a Parameter (or list of them, or a ``get_param`` dict): ``{physical: [grad]}``;
        - a logical output (``"prediction"``): ``{output: [d loss / d activation]}`` of the
          last backward (dynamic) or a fetchable Value (static);
        - a logical layer name: ``{logical: [grads of its trainable parameters]}``;
        - a physical name: ``{physical: [grad]}``.

        A name that is both an output and a layer (``prediction``, ``embedding``) means
        the output; pass ``layer=True`` for the layer's parameter gradients.

        Dynamic mode returns tensors from the last ``backward()``. Static mode returns
        Values to put in ``exe.run(fetch_list=...)``: for parameters, the gradient the
        optimizer consumes (after ``optimizer.minimize(loss)``); for outputs, the
        gradient of ``loss`` (found from the program's backward pass when not given).
        """
        self._require_built()
        static = not paddle.in_dynamic_mode()
        if isinstance(x, Mapping):
            x = [p for ps in x.values() for p in ps]
        if isinstance(x, (list, tuple)):
            out: dict[str, list] = {}
            for p in x:
                out.update(self.get_gradient(p, loss))
            return out
        if isinstance(x, str):
            if x in self._output_names and not layer:
                return {x: [self._output_grad(x, loss, static)]}
            if x in self.layers:
                params = [p for p in self._layer_params(x) if p.name not in self._fixed]
                return {x: [self._param_grad(p, loss, static) for p in params]}
            params = self.get_param(x)
            return {
                p.name: [self._param_grad(p, loss, static)] for ps in params.values() for p in ps
            }
        return {x.name: [self._param_grad(x, loss, static)]}

    def _param_grad(self, p: Any, loss: Any, static: bool) -> Any:
        if static:
            return param_grad_value(self.program, self._who(), p, loss)
        return param_gradient(self._who(), p)

    def _output_grad(self, name: str, loss: Any, static: bool) -> Any:
        if static:
            return output_grad_value(self.program, self._who(), self._static_outputs[name], loss)
        return self._out_grads.get(self._who(), name)

    def freeze(self, logical: str | None = None) -> None:
        """Stop training a logical layer's parameters (all layers when ``logical`` is None).

        Works mid-training in dynamic mode: the optimizer skips them (Adam moments too).
        In static mode it applies to the next ``optimizer.minimize`` (rebuild the program).
        """
        for p in self._params_for(logical):
            p.stop_gradient = True

    def unfreeze(self, logical: str | None = None) -> None:
        """Train a frozen logical layer again (BatchNorm statistics stay non-trainable)."""
        for p in self._params_for(logical):
            if p.name not in self._fixed:
                p.stop_gradient = False
                if paddle.in_dynamic_mode():
                    p.clear_gradient(False)  # drop a stale zero grad from before the freeze

    def is_frozen(self, logical: str) -> bool:
        """Whether every trainable parameter of ``logical`` is frozen."""
        ps = [p for p in self._params_for(logical) if p.name not in self._fixed]
        return bool(ps) and all(p.stop_gradient for p in ps)

    def _params_for(self, logical: str | None) -> list:
        self._require_built()
        if logical is None:
            return list(self.parameters())
        if logical not in self.layers:
            raise KeyError(
                f"{self._who()} has no logical layer {logical!r}; have {list(self.layers)}"
            )
        return self._layer_params(logical)

    def share(self, logical: str, other: Encoder, other_logical: str | None = None) -> None:
        """Make ``logical`` use ``other``'s layer ``other_logical`` (one parameter set).

        ``other`` keeps ownership: the shared parameters keep its physical names, and an
        agent's optimizer only takes parameters it owns, so they are updated once per step.
        Share before creating optimizers (an optimizer keeps the parameter list it got).
        """
        other_logical = other_logical or logical
        if logical not in self.model:
            raise KeyError(f"{self._who()} has no logical layer {logical!r}")
        if other_logical not in other.model:
            raise KeyError(f"{other._who()} has no logical layer {other_logical!r}")
        want, got = self._declared[logical], other._declared[other_logical]
        check_signature(self._who(), logical, want, got, f"{other.scope}.{other_logical}")
        if self._built:
            if not other.built:
                other.build()
            old = self.layers[logical]
            new = other.layers[other_logical]
            for name in list(self.layers):  # seed-style aliases of the old layer follow
                if self.layers[name] is old:
                    self.layers[name] = new
                    self._borrowed[name] = (other, other_logical)
            self._fixed |= {p.name for p in new.parameters() if p.stop_gradient}
        else:
            self.model[logical] = SharedSpec(other, other_logical, got)
        self._borrowed[logical] = (other, other_logical)
        other._lent.append((weakref.ref(self), logical, other_logical))

    @property
    def borrowed(self) -> dict[str, tuple[Encoder, str]]:
        """Layers taken with `share`: ``{logical: (lender encoder, the lender's logical name)}``."""
        return dict(self._borrowed)

    def own_parameters(self) -> list:
        """Parameters this encoder owns (not borrowed through `share`), deduplicated."""
        self._require_built()
        borrowed = {id(p) for lg in self._borrowed for p in self._layer_params(lg)}
        return [p for p in self.parameters() if id(p) not in borrowed]

    def shared_with(self, logical: str) -> list[str]:
        """Other logical names (``scope.logical`` across encoders) using ``logical``'s parameters."""
        self._require_built()
        return sharers(self.scope, self.layers, logical, self._borrowed, self._lent)

    # ----------------------------------------------------------------- summary
    def summary(self) -> SummaryTable:
        """A table of logical name, physical names, shapes, trainable, shared-with (print it)."""
        self._require_built()
        named = self.named_logical_params()
        return SummaryTable.of_layers(
            named, {lg: self.shared_with(lg) for lg in named}, self._who()
        )

    # ----------------------------------------------------------------- save / load
    def physical_state(self) -> dict[str, Tensor]:
        """``{physical name: parameter}``, each shared parameter once."""
        self._require_built()
        return {p.name: p for p in self.parameters()}

    def save(self, path: str | os.PathLike) -> str:
        """Write parameters to a safetensors file keyed by physical name (atomic); return SHA-256."""
        return save_tensors(
            path,
            self.physical_state(),
            {"encoder": type(self).__name__, "scope": self.scope, "format": "paddlecraft-1"},
        )

    def load(self, path: str | os.PathLike, strict: bool = True) -> Encoder:
        """Load parameters saved by `save` (matched by physical name); builds first if needed."""
        if not self._built:
            self.build()
        arrays, _ = load_tensors(path)
        assign_by_name(self.parameters(), arrays, what=self._who(), strict=strict)
        return self

    def save_pretrained(self, path: str | os.PathLike) -> str:
        """Write scope-free weights any encoder of this family (any scope, any head) can
        ``load_pretrained(path, strict=False)``, for fine-tuning; return the SHA-256."""
        self._require_built()
        return external.save_state(self.state_dict(), path)

    def load_pretrained(
        self, path: str | os.PathLike | Mapping, strict: bool = True, source: str | None = None
    ) -> LoadReport:
        """Load external weights (torchvision, timm, Hugging Face, paddle.vision; a file or
        ``{key: array}``); return the report (see `paddlecraft.encoders.pretrained`)."""
        keys = external.KeyMapping.of(self)
        external.check_loadable(self._who(), keys, source)
        if not self._built:
            self.build()
        target, linear = self.state_dict(), external.linear_weight_keys(self)
        return external.copy_pretrained(path, target, linear, keys, self._who(), strict, source)
