"""The :class:`Encoder` base: a ``paddle.nn.Layer`` operated by logical names.

An encoder declares its logical layers in ``self.model`` (logical name -> :class:`LayerSpec`)
and its logical inputs/outputs. ``build()`` turns the specs into layers whose parameters
are physically named ``<scope>.<logical name>.<w_0|b_0|...>``. Before ``build()`` the
seed's sharing idiom works::

    enc = ImageMLPEncoder("model1")
    enc.model["hidden_layer_2"] = enc.model["hidden_layer_1"]   # one parameter set
    enc.build()

After ``build()``, everything is addressed by logical name: :meth:`Encoder.get_param`,
:meth:`Encoder.get_gradient`, :meth:`Encoder.freeze`, :meth:`Encoder.share`,
:meth:`Encoder.summary`, :meth:`Encoder.save` / :meth:`Encoder.load`.

In static mode (``paddle.enable_static()`` + ``program_guard``) ``build()`` also creates
the program's feed variables and outputs as attributes, seed style: ``enc.input``,
``enc.label`` (classifiers), ``enc.prediction``.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import paddle
from paddle import nn

from .naming import SCOPES, build_named
from .tensorio import assign_by_name, load_tensors, save_tensors

Tensor = paddle.Tensor


class EncoderInputError(ValueError):
    """An input given to an encoder has the wrong shape or dtype."""


@dataclass(eq=False)
class LayerSpec:
    """A logical layer before ``build()``: a factory and the mapping it computes.

    Specs compare by identity: assigning one spec to two logical names makes them one
    physical layer. ``signature`` (e.g. ``("linear", 784, 784)``) is what a layer maps
    from and to; a spec may only fill a logical slot with the same signature.
    """

    factory: Callable[[], nn.Layer]
    signature: tuple

    def __repr__(self) -> str:
        return f"LayerSpec{self.signature}"


@dataclass(frozen=True, eq=False)
class SharedSpec:
    """A logical slot filled by another encoder's built layer (see :meth:`Encoder.share`)."""

    encoder: Encoder
    logical: str


@dataclass(frozen=True)
class InputSpec:
    """A logical input: shape without the batch axis (None = any size) and allowed dtypes."""

    shape: tuple[int | None, ...]
    dtypes: tuple[str, ...] = ("float32",)
    flatten: bool = False  # accept any trailing shape with the same element count

    def allowed_dtypes(self) -> tuple[str, ...]:
        """``dtypes``, with float32 meaning Paddle's default float dtype (float64 for FD checks)."""
        default = paddle.get_default_dtype()
        return tuple(default if d == "float32" else d for d in self.dtypes)

    def describe(self) -> str:
        dims = ", ".join("any" if d is None else str(d) for d in self.shape)
        return f"[batch, {dims}] {'/'.join(self.allowed_dtypes())}"


class Encoder(nn.Layer):
    """Base of every PaddleCraft encoder: logical layers, physical names, build, introspection.

    Subclasses call ``super().__init__(scope)``, then :meth:`declare` each logical layer
    and :meth:`declare_input` each input, and implement :meth:`_forward`, which returns
    a dict of named outputs (``{"prediction": logits}``). ``forward`` returns the
    :attr:`primary_output`; :meth:`forward_all` returns the dict.
    """

    #: outputs whose activation gradient is recorded by default (see :meth:`watch`)
    default_watch: tuple[str, ...] = ("prediction",)
    #: static mode: add an int64 ``label`` feed when ``num_classes`` is set (classifiers)
    label_feed: bool = True

    def __init__(self, scope: str) -> None:
        super().__init__()
        SCOPES.claim(scope, self)
        self.scope = scope
        self.model: dict[str, LayerSpec | SharedSpec] = {}
        self._declared: dict[str, tuple] = {}
        self._inputs: dict[str, InputSpec] = {}
        self._output_names: tuple[str, ...] = ()
        self.num_classes: int | None = None
        self._built = False
        self._borrowed: dict[str, tuple[Encoder, str]] = {}
        self._lent: list[tuple[weakref.ref, str, str]] = []
        self._watched: set[str] = set()
        self._grads: dict[str, Tensor] = {}
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
        self._watched = {n for n in self.default_watch if n in names}

    @property
    def output_names(self) -> tuple[str, ...]:
        """Logical outputs, primary first."""
        return self._output_names

    @property
    def input_names(self) -> tuple[str, ...]:
        """Logical inputs in ``forward`` order."""
        return tuple(self._inputs)

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
        """Whether :meth:`build` has run."""
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
        layers: dict[str, nn.Layer] = {}
        made: dict[int, nn.Layer] = {}
        for name, spec in self.model.items():
            if isinstance(spec, SharedSpec):
                other = spec.encoder
                if not other.built:
                    other.build()
                self._check_signature(
                    name, other._declared[spec.logical], f"{other.scope}.{spec.logical}"
                )
                layers[name] = other.layers[spec.logical]
            elif isinstance(spec, LayerSpec):
                self._check_signature(name, spec.signature, "the assigned spec")
                if id(spec) not in made:
                    made[id(spec)] = build_named(f"{self.scope}.{name}", spec.factory)
                layers[name] = made[id(spec)]
            else:
                raise TypeError(
                    f"{self._who()}: model[{name!r}] must be a LayerSpec (e.g. another entry "
                    f"of enc.model), got {type(spec).__name__}"
                )
        self.layers = nn.LayerDict(layers)
        self._built = True
        self._fixed = {p.name for p in self.parameters() if p.stop_gradient}
        if static:
            self._build_static()
        return self

    def _check_signature(self, name: str, got: tuple, source: str) -> None:
        want = self._declared[name]
        if tuple(got) != tuple(want):
            raise ValueError(
                f"{self._who()}: logical layer {name!r} maps {want} but {source} maps {got}; "
                "shared layers must have the same input and output sizes (for the MLP, "
                "hidden_layer_1 and hidden_layer_2 can be shared only when input_size equals "
                "hidden_size, e.g. 784)."
            )

    def _build_static(self) -> None:
        self.program = paddle.static.default_main_program()
        self.static_scope = paddle.static.Scope()
        feeds = []
        for name, spec in self._inputs.items():
            shape = [None, *[(-1 if d is None else d) for d in spec.shape]]
            var = paddle.static.data(f"{self.scope}.{name}", shape, spec.allowed_dtypes()[0])
            self._static_outputs[name] = var
            feeds.append(var)
        if self.label_feed and self.num_classes is not None:
            self._static_outputs["label"] = paddle.static.data(
                f"{self.scope}.label", [None, 1], "int64"
            )
        outs = self._forward(*feeds)
        self._static_outputs.update(outs)

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
        if paddle.in_dynamic_mode() and self._watched and paddle.is_grad_enabled():
            for name in self._watched:
                t = outs.get(name)
                if t is not None and not t.stop_gradient:
                    t.register_hook(self._grad_recorder(name))
        return outs

    def _grad_recorder(self, name: str) -> Callable[[Tensor], None]:
        grads = self._grads

        def record(g: Tensor) -> None:
            grads[name] = g

        return record

    def _forward(self, *inputs: Tensor) -> dict[str, Tensor]:
        """Compute the named outputs from checked inputs (subclasses implement)."""
        raise NotImplementedError

    def _check_inputs(self, inputs: tuple) -> list[Tensor]:
        specs = list(self._inputs.items())
        if len(inputs) != len(specs):
            raise EncoderInputError(
                f"{self._who()}: expected {len(specs)} input(s) "
                f"({', '.join(n for n, _ in specs)}), got {len(inputs)}"
            )
        out = []
        for (name, spec), x in zip(specs, inputs):
            if isinstance(x, np.ndarray):
                x = paddle.to_tensor(x)
            if not paddle.in_dynamic_mode() or not isinstance(x, Tensor):
                out.append(x)  # static Values: shapes were fixed by paddle.static.data
                continue
            dtype = str(x.dtype).replace("paddle.", "")
            shape = list(x.shape)
            ok = dtype in spec.allowed_dtypes() and len(shape) >= 1
            if ok and spec.flatten:
                want = int(np.prod([d for d in spec.shape]))
                ok = int(np.prod(shape[1:])) == want
                if ok and len(shape) != 1 + len(spec.shape):
                    x = x.reshape([shape[0], *spec.shape])
            elif ok:
                ok = len(shape) == 1 + len(spec.shape) and all(
                    d is None or d == s for d, s in zip(spec.shape, shape[1:])
                )
            if not ok:
                raise EncoderInputError(
                    f"{self._who()} input {name!r}: expected {spec.describe()}, got "
                    f"{shape} {dtype}. {self._input_fix(name, spec)}"
                )
            out.append(x)
        return out

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
        table = self.named_logical_params()
        if name in table:
            return {name: table[name]}
        for logical, params in table.items():
            hit = [p for p in params if p.name == name]
            if hit:
                return {logical: hit}
        found = {lg: ps for lg, ps in table.items() if lg.startswith(name)}
        if not found:
            found = {
                lg: [p for p in ps if p.name.startswith(name)]
                for lg, ps in table.items()
                if any(p.name.startswith(name) for p in ps)
            }
        if not found:
            raise KeyError(
                f"{self._who()} has no parameter matching {name!r}; logical names: "
                f"{list(table)}; physical names start with {self.scope + '.'!r}"
            )
        return found

    def watch(self, *outputs: str) -> None:
        """Record the gradient of these outputs on the next backward (``prediction`` is default)."""
        for o in outputs:
            if o not in self._output_names:
                raise KeyError(f"{self._who()} has no output {o!r}; outputs: {self._output_names}")
        self._watched.update(outputs)

    def unwatch(self, *outputs: str) -> None:
        """Stop recording activation gradients for these outputs (all if none given)."""
        self._watched.difference_update(outputs or set(self._watched))

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
        if not static:
            if p.grad is None:
                raise RuntimeError(
                    f"{self._who()}: parameter {p.name!r} has no gradient yet; call "
                    "loss.backward() first (frozen parameters never get one)"
                )
            return p.grad
        program = self.program
        for op in program.global_block().ops:
            try:
                names = op.get_input_names()
            except ValueError:  # ops without yaml info (builtin.*) have no input names
                continue
            if "param" in names and "grad" in names:
                if op.operand_source(names.index("param")).is_same(p):
                    return op.operand_source(names.index("grad"))
        loss = loss if loss is not None else self._find_loss()
        return paddle.static.gradients([loss], [p])[0]

    def _output_grad(self, name: str, loss: Any, static: bool) -> Any:
        if not static:
            if name not in self._grads:
                hint = (
                    ""
                    if name in self._watched
                    else f" and call .watch({name!r}) before the forward"
                )
                raise RuntimeError(
                    f"{self._who()}: no gradient recorded for output {name!r}; run "
                    f"loss.backward(){hint}"
                )
            return self._grads[name]
        loss = loss if loss is not None else self._find_loss()
        return paddle.static.gradients([loss], [self._static_outputs[name]])[0]

    def _find_loss(self) -> Any:
        # backward is seeded with full_like(loss, 1.0) right before the first *_grad op;
        # forward code may use full_like too, so take the last one before backward starts
        seed = None
        for op in self.program.global_block().ops:
            if op.name().endswith("_grad"):
                if seed is not None:
                    return seed.operand_source(0)
                break
            if op.name() == "pd_op.full_like":
                seed = op
        raise RuntimeError(
            f"{self._who()}: no backward pass in the program yet; call optimizer.minimize(loss) "
            "first or pass loss= to get_gradient"
        )

    # ----------------------------------------------------------------- freeze / share
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
        self._check_signature(
            logical, other._declared[other_logical], f"{other.scope}.{other_logical}"
        )
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
            self.model[logical] = SharedSpec(other, other_logical)
        self._borrowed[logical] = (other, other_logical)
        other._lent.append((weakref.ref(self), logical, other_logical))

    def own_parameters(self) -> list:
        """Parameters this encoder owns (not borrowed through :meth:`share`), deduplicated."""
        self._require_built()
        borrowed = {id(p) for lg in self._borrowed for p in self._layer_params(lg)}
        return [p for p in self.parameters() if id(p) not in borrowed]

    def shared_with(self, logical: str) -> list[str]:
        """Other logical names (``scope.logical`` across encoders) using ``logical``'s parameters."""
        self._require_built()
        layer = self.layers[logical]
        names = [
            f"{self.scope}.{n}" for n in self.layers if n != logical and self.layers[n] is layer
        ]
        if logical in self._borrowed:
            enc, lg = self._borrowed[logical]
            names.append(f"{enc.scope}.{lg}")
        for ref, their, mine in self._lent:
            enc = ref()
            if enc is not None and mine == logical:
                names.append(f"{enc.scope}.{their}")
        return names

    # ----------------------------------------------------------------- summary
    def summary(self) -> SummaryTable:
        """A table of logical name, physical names, shapes, trainable, shared-with (print it)."""
        self._require_built()
        rows = []
        for logical, params in self.named_logical_params().items():
            rows.append(
                {
                    "logical": logical,
                    "physical": [p.name for p in params],
                    "shapes": [list(p.shape) for p in params],
                    "trainable": [not p.stop_gradient for p in params],
                    "shared_with": self.shared_with(logical),
                }
            )
        return SummaryTable(rows, title=self._who())

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
        """Load parameters saved by :meth:`save` (matched by physical name); builds first if needed."""
        if not self._built:
            self.build()
        arrays, _ = load_tensors(path)
        assign_by_name(self.parameters(), arrays, what=self._who(), strict=strict)
        return self


class SummaryTable(list):
    """Rows of an encoder/agent summary; ``str()`` renders an aligned text table."""

    def __init__(self, rows: Iterable[dict], title: str = "") -> None:
        super().__init__(rows)
        self.title = title

    def __str__(self) -> str:
        header = ("logical", "physical", "shape", "trainable", "shared with")
        lines: list[tuple[str, ...]] = []
        for r in self:
            for i, name in enumerate(r["physical"] or ["-"]):
                lines.append(
                    (
                        r["logical"] if i == 0 else "",
                        name,
                        "x".join(map(str, r["shapes"][i])) if r["physical"] else "",
                        str(r["trainable"][i]) if r["physical"] else "",
                        ", ".join(r["shared_with"]) if i == 0 else "",
                    )
                )
        widths = [max(len(h), *(len(line[k]) for line in lines)) for k, h in enumerate(header)]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        out = [self.title] if self.title else []
        out += [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
        out += [fmt.format(*line) for line in lines]
        return "\n".join(out)


def init_missing(
    exe: paddle.static.Executor,
    startup: paddle.static.Program,
    scope: paddle.static.Scope | None = None,
) -> list[str]:
    """Run ``startup`` but keep values already in ``scope``; return the names initialised.

    Use it after rebuilding a static program (e.g. to unfreeze): parameters keep their
    trained values, new variables (fresh optimizer state) get initialised.
    """
    scope = scope or paddle.static.global_scope()
    tmp = paddle.static.Scope()
    exe.run(startup, scope=tmp)
    place = paddle.CPUPlace()
    new = []
    for name in tmp.local_var_names():
        var = tmp.find_var(name)
        if scope.find_var(name) is not None or var is None:
            continue
        try:
            value = np.array(var.get_tensor())
        except Exception:  # not a dense tensor (e.g. a reader)
            continue
        scope.var(name).get_tensor().set(value, place)
        new.append(name)
    return new
