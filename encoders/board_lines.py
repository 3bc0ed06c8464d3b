"""BoardLineEncoder: an MLP over board planes plus the state of every line of ``k`` cells.

k-in-a-row games (tic-tac-toe, Connect Four, gomoku) are decided by lines: the n-tuple
networks that learn Connect Four from self-play (Thill, Bagheri and Konen 2014) and the
hand-made evaluators before them score each line of four by whose stones it holds. A plain
MLP over the planes has to find those conjunctions itself ("three of mine and none of
theirs in this line"), which one ReLU layer cannot express exactly. This encoder hands them
to the MLP, computed from the planes by fixed 0/1 matrices (no learned weights, nothing
saved, exported like any other layer):

- the planes themselves, ``rows * cols * C`` values;
- for each line of ``line_length`` cells and each channel ``c``, whether it holds exactly
  ``j`` stones of ``c`` and none of any other channel, ``j = 1 .. line_length - 1``
  (``C * (line_length - 1) * L`` values for ``L`` lines);
- for each channel, a threat map: the empty cells that would complete a line of ``c``
  (``C * rows * cols`` values);
- with ``gravity`` (stones fall to the lowest empty cell of their column, as in Connect
  Four): the playable cells (``rows * cols``), whether the board holds an even number of
  stones (1 value: the first player is to move), and each channel's threats with no threat
  of either channel below them in their column (``C * rows * cols``). Connect Four's endgames
  are zugzwangs decided by those (Allis 1988: the first player wants the lowest threat of a
  column on an odd row, the second on an even one), and the parity of the stone count is
  the one input a ReLU layer cannot read off the planes' sums.
Then ``hidden_layers`` ReLU layers of ``hidden_size`` (logical ``hidden_layer_1`` ..) and, with
``num_classes``, a ``prediction`` head: the `ImageMLPEncoder` contract on a wider input.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import paddle

from .base import InputSpec, Tensor
from .image_mlp import ImageMLPEncoder


def line_cells(rows: int, cols: int, length: int) -> np.ndarray:
    """Every horizontal, vertical and diagonal line of ``length`` cells on a ``rows x cols``
    board: int64 ``[L, length]`` of cell indices ``r * cols + c`` (row 0 on top)."""
    lines = []
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        for r in range(rows):
            for c in range(cols):
                end_r, end_c = r + dr * (length - 1), c + dc * (length - 1)
                if 0 <= end_r < rows and 0 <= end_c < cols:
                    lines.append([(r + dr * i) * cols + c + dc * i for i in range(length)])
    return np.asarray(lines, np.int64).reshape(-1, length)


class BoardLineEncoder(ImageMLPEncoder):
    """An MLP over board planes and the stones in each of the board's lines.

    Input ``input``: [B, rows * cols * C] float32 planes flattened channels last (how
    `paddlecraft.agents.Policy` flattens ``[B, rows, cols, C]``; for ``C = 1`` the same as
    channels first), 0/1 per cell and channel. ``image_size`` (``rows``, or ``[rows,
    cols]``) and ``in_channels`` come from the agent; ``line_length`` is the game's
    (4 for Connect Four, 3 for tic-tac-toe); ``gravity``: the board's stones fall to the
    lowest empty cell of their column (Connect Four), which adds the playable cells, the
    side to move and each column's lowest threats (the first plane is the mover's, every
    other one the opponent's).
    Outputs as `ImageMLPEncoder`: ``pooled`` [B, hidden_size] and, with ``num_classes``,
    ``prediction`` [B, num_classes].
    """

    def __init__(
        self,
        scope: str,
        image_size: int | Sequence[int] = 8,
        in_channels: int = 2,
        input_size: int | None = None,
        line_length: int = 4,
        hidden_size: int = 256,
        hidden_layers: int = 3,
        num_classes: int | None = None,
        gravity: bool = False,
    ) -> None:
        size = [image_size, image_size] if isinstance(image_size, int) else list(image_size)
        rows, cols = (int(s) for s in size)
        channels, k = int(in_channels), int(line_length)
        cells = rows * cols
        if input_size is not None and int(input_size) != cells * channels:
            raise ValueError(
                f"BoardLineEncoder({scope!r}): input_size={input_size} but a {rows}x{cols} "
                f"board with {channels} planes has {cells * channels} values; leave "
                "input_size unset (the agent fills it in)"
            )
        lines = line_cells(rows, cols, k) if k >= 2 else np.zeros((0, max(k, 0)), np.int64)
        if len(lines) == 0:
            raise ValueError(
                f"BoardLineEncoder({scope!r}): line_length={line_length} leaves no line on a "
                f"{rows}x{cols} board; give the game's line length (2 to {max(rows, cols)})"
            )
        incidence = np.zeros((cells, len(lines)), np.float32)  # cell -> the lines through it
        for i, line in enumerate(lines):
            incidence[line, i] = 1.0
        # one number per line says whose stones it holds: sum over channels of
        # count_c * (k + 1) ** c, unique since a count is at most k
        base = (k + 1) ** np.arange(channels, dtype=np.float32)  # [C]
        code = (incidence[:, None, :] * base[None, :, None]).reshape(cells * channels, -1)
        # feature (c, j, line) is "j stones of channel c and none of the others in the
        # line": its line's code minus j * base[c] is 0 (j = 1 .. k-1; c-major, then j)
        held = np.tile(code, (1, channels * (k - 1)))  # [N * C, C * (k-1) * L]
        offset = np.repeat((np.arange(1, k)[None, :] * base[:, None]).reshape(-1), len(lines))
        # the cells on each channel's lines one stone short (j = k - 1): [C(k-1)L, C * N]
        short = np.zeros((channels * (k - 1) * len(lines), channels * cells), np.float32)
        # every cell's stones of any channel, once per channel: [N * C, C * N]
        stones = np.zeros((cells * channels, channels * cells), np.float32)
        for c in range(channels):
            first = (c * (k - 1) + k - 2) * len(lines)
            short[first : first + len(lines), c * cells : (c + 1) * cells] = incidence.T
            stones[:, c * cells : (c + 1) * cells] = np.repeat(np.eye(cells), channels, axis=0)
        features = cells * channels + channels * ((k - 1) * len(lines) + cells)
        if gravity:
            features += cells + 1 + channels * cells
        # the seed's MLP over the features (hidden_layer_1 .. and the head, checked there)
        super().__init__(scope, features, hidden_size, num_classes, hidden_layers)
        self.rows, self.cols, self.channels, self.line_length = rows, cols, channels, k
        self.num_lines, self.num_features, self.gravity = len(lines), features, bool(gravity)
        buffers = [
            ("held_code", held),
            ("held_offset", offset.astype(np.float32)),
            ("short_cells", short),
            ("cell_stones", stones),
        ]
        if gravity:
            buffers += list(_gravity_matrices(rows, cols, channels).items())
        self._fixed_names = [name for name, _ in buffers]
        for name, value in buffers:
            self.register_buffer(name, paddle.to_tensor(value), persistable=False)
        self.input_size = cells * channels  # what comes in: the planes, not the features
        self.declare_input("input", InputSpec((self.input_size,), flatten=True))

    def _input_fix(self, name: str, spec: InputSpec) -> str:
        return (
            f"Flatten board planes [B, {self.rows}, {self.cols}, {self.channels}] to "
            f"{self.input_size} float32 values."
        )

    def line_features(self, x: Tensor) -> Tensor:
        """The fixed features: [B, rows * cols * C] planes -> [B, num_features].

        Only 2-D matmuls and elementwise ops: Paddle's CPU broadcasting compares and
        batched matmuls cost far more on these sizes.
        """
        fixed = [getattr(self, name) for name in self._fixed_names]
        return _line_features(x, *fixed, concat=paddle.concat)

    def _forward(self, x: Tensor) -> dict[str, Tensor]:
        return super()._forward(self.line_features(x))  # [B, num_features] -> the MLP

    def numpy_forward(self) -> Callable[[np.ndarray], np.ndarray] | None:
        """`ImageMLPEncoder.numpy_forward` over the line features, computed by NumPy from
        the same fixed matrices: [B, rows * cols * C] planes -> [B, hidden] float32."""
        mlp = super().numpy_forward()
        if mlp is None:
            return None
        fixed = [np.array(getattr(self, name).numpy()) for name in self._fixed_names]

        def pooled(x: np.ndarray) -> np.ndarray:
            x = np.asarray(x, np.float32).reshape(len(x), -1)  # [B, rows * cols * C]
            return mlp(_line_features(x, *fixed, concat=np.concatenate))

        return pooled


def _gravity_matrices(rows: int, cols: int, channels: int) -> dict[str, np.ndarray]:
    """The fixed 0/1 matrices of the gravity features (row 0 on top, so a cell's support
    is the cell one row down): cell index ``r * cols + c``, channel-major blocks."""
    cells = rows * cols
    row, col = np.divmod(np.arange(cells), cols)
    # the planes come channels last (cell-major): [N * C, N], a cell's stones of any channel
    filled = np.repeat(np.eye(cells, dtype=np.float32), channels, axis=0)
    support = np.zeros((cells, cells), np.float32)  # [N, N]: cell j holds cell i up
    support[np.flatnonzero(row < rows - 1) + cols, np.flatnonzero(row < rows - 1)] = 1.0
    floor = (row == rows - 1).astype(np.float32)[None, :]  # [1, N]: the bottom row
    below = (col[:, None] == col[None, :]) & (row[:, None] > row[None, :])  # [N, N]: i under j
    # a threat of any channel at cell j shadows every channel's threat above it: [CN, CN]
    shadow = np.tile(below.astype(np.float32), (channels, channels))
    count = np.ones((cells, 1), np.float32)  # [N, 1]: sums the stones
    return {
        "gravity_filled": filled,
        "gravity_support": support,
        "gravity_floor": floor,
        "gravity_shadow": shadow,
        "gravity_count": count,
    }


def _line_features(
    x: Any, code: Any, offset: Any, short: Any, stones: Any, *extra: Any, concat: Any
) -> Any:
    """The line features of planes ``x`` [B, N * C] (Paddle tensors or NumPy arrays, with
    the `BoardLineEncoder` buffers of the same kind, the gravity ones when it
    has them, and its ``concat``): [B, features]."""
    held = ((x @ code) == offset).astype("float32")  # [B, C(k-1)L]
    near = (held @ short) > 0  # [B, C * N]: on a line one stone short
    empty = (x @ stones) == 0  # [B, C * N]
    threats = (near & empty).astype("float32")  # [B, C * N]
    if not extra:
        return concat([x, held, threats], axis=1)  # [B, num_features]
    filled_of, support, floor, shadow, count = extra[:5]
    filled = x @ filled_of  # [B, N]: 1 where a stone lies
    held_up = (filled @ support + floor) > 0  # [B, N]: the bottom row or a stone under it
    playable = ((filled == 0) & held_up).astype("float32")  # [B, N]
    stones_on = filled @ count  # [B, 1]
    even = (stones_on % 2 == 0).astype("float32")  # [B, 1]: the first player to move
    lowest = threats * ((threats @ shadow) == 0).astype("float32")  # [B, C * N]
    return concat([x, held, threats, playable, even, lowest], axis=1)  # [B, features]
