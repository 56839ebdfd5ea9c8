"""Test oracles: object-per-cell versions of what the plan does with arrays, kept only to
check the array code against (no production caller builds them)."""

from __future__ import annotations

from collections.abc import Sequence

from attnrmt.sweep.spec.identity import block_key
from attnrmt.sweep.spec.plan import Block, Cell, check_block_sizes, line_block_size

__all__ = ["make_blocks"]


def make_blocks(
    cells: Sequence[Cell], root_seed: int, block_size: int | str, block_seconds: float = 0.0
) -> list[Block]:
    """Group cells by line, sort each line by ``(snr, replicate)``, chunk by block size.

    ``block_size``: cells per block, or ``"auto"``: per line,
    :func:`attnrmt.sweep.spec.cost.cells_per_block` of the line's estimated cell cost
    (:func:`attnrmt.sweep.spec.cost.estimated_cell_seconds`, fixed constants) and
    ``block_seconds``. Blocks never mix lines; lines appear in order of first appearance
    in ``cells``. O(cells log line length) with one object per cell; the plan's
    :func:`attnrmt.sweep.spec.plan.grid_blocks` must give the same blocks from arrays.
    """
    check_block_sizes(block_size, block_seconds)
    lines: dict[tuple, list[Cell]] = {}
    for cell in cells:
        lines.setdefault(cell.line, []).append(cell)
    blocks = []
    for line_cells in lines.values():
        line_cells.sort(key=lambda cell: (cell.snr, cell.replicate))
        size = line_block_size(line_cells[0], len(line_cells), block_size, block_seconds)
        for start in range(0, len(line_cells), size):
            chunk = tuple(line_cells[start : start + size])
            blocks.append(Block(block_key(root_seed, [cell.key for cell in chunk]), chunk))
    return blocks
