"""The aligned text table that ``Encoder.summary()`` returns."""

from __future__ import annotations

from collections.abc import Iterable, Mapping


class SummaryTable(list):
    """Rows of an encoder/agent summary; ``str()`` renders an aligned text table."""

    def __init__(self, rows: Iterable[dict], title: str = "") -> None:
        super().__init__(rows)
        self.title = title

    @classmethod
    def of_layers(
        cls, named: Mapping[str, list], shared_with: Mapping[str, list[str]], title: str = ""
    ) -> SummaryTable:
        """The table of logical layers ``named`` (``{logical: [Parameter, ...]}``) and the
        other names each one's parameters go by."""
        rows = [
            {
                "logical": logical,
                "physical": [p.name for p in params],
                "shapes": [list(p.shape) for p in params],
                "trainable": [not p.stop_gradient for p in params],
                "shared_with": shared_with[logical],
            }
            for logical, params in named.items()
        ]
        return cls(rows, title=title)

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
