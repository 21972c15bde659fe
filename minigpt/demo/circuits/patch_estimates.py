"""Patching where exact patching costs too much for a page: attribution patching's estimates first (one forward pass on
each text and one backward pass, `minigpt.heads.estimated_patching`), and the exact value of the cell a learner picks
on demand (`minigpt.heads.patch_units`: one run a cell). Exact patching runs the model once per head and once per layer
and position: at GPT-2's size on a 16-token text that is 336 passes (13 s on two CPU cores) against 3 for the estimate.
What the page names is checked exactly: the 3 largest cells of each head at each position (`estimated_patching`'s
`exact_top`), the 2 heads and 3 cells of the residual stream with the largest estimates (one run each a prompt), each
with its estimate beside (`checked`).
No Gradio here; circuits.py's `patching` decides which way a text goes."""

from dataclasses import dataclass

import torch

from minigpt.demo.core.cores import pass_work
from minigpt.demo.core.inputs import layer_index, parse_heads, token_position
from minigpt.errors import VisitorError, shortened
from minigpt.heads import estimated_patching, over_prompts, patch_units
from minigpt.heads.edge_attribution import EXACT_TOP

# Multiply-adds of exact patching's head and residual runs above which the page answers with estimates first: about
# two seconds on two CPU cores. The shipped models stay exact on every text the page takes (64 tokens: 4e9).
ESTIMATE_WORK = 5e10
METHOD = "attribution patching"
METHOD_SAID = (
    "attribution patching (Syed et al. 2023): each patch's effect estimated to first order from one forward pass on "
    "each text and one backward pass, (d LD / d part) · (clean part − corrupted part); the largest estimates patched "
    "exactly, since first order misjudges their size (up to 3x on the specimen)"
)
CHECKED_HEADS = 2  # the heads the findings name (words.heads_sentence), patched exactly
CHECKED_RESIDUAL = 3  # the largest cells of the residual stream (words.residual_sentence names those over 0.5)
CHECKED_LEAST = 0.1  # of those, the ones estimated to restore this much or more (on the Bexley pair 0.30 is 1.00)
SITES = {"heads": "output", "heads_by_position": "position", "residual": "residual"}
NAMES = {"heads": "{}.{}", "heads_by_position": "{}.{} at position {}",
         "residual": "the stream entering layer {} at position {}"}  # fmt: skip
ESTIMATED = ("heads", "heads_by_position", "residual")  # the grids an estimate gives (heads: the output part alone)
# Runs of exact residual patching at the positions where the texts differ. There the stream changes most (another
# token's embedding), and a first-order estimate fails: on the specimen, patching the stream entering layer 1 at the
# changed token restores 1.00 of the answer, and its estimate says -1.03 (the effect is not monotone on the way from
# the corrupted stream to the clean one). Elsewhere the stream changes only through attention, and the estimate holds.
# Those runs are made where they cost at most EXACT_RESIDUAL_WORK multiply-adds (about a quarter of a second on two
# cores): on the shipped models always; at GPT-2's size not (12 runs of a 16-token text: 1.6e10), where the words say
# which cells to click.
EXACT_RESIDUAL_WORK = 5e9


def exact_runs(config, length: int) -> int:
    """Runs of exact head and residual patching: one per head, one per (layer, position)."""
    return config.n_layer * (config.n_head + length)


def estimated_first(config, length: int) -> bool:
    """Whether exact patching of a `length`-token text costs more than ESTIMATE_WORK (the page estimates first)."""
    return exact_runs(config, length) * pass_work(config, length) > ESTIMATE_WORK


@dataclass
class Estimates:
    heads: object  # OverPrompts of (L, H): each head's output at every position
    residual: object  # OverPrompts of (L, T)
    position: torch.Tensor | None  # (L, H, T) on the text itself (one prompt), else None
    first: object  # the text's own EstimatedPatching: its answers and LDs
    exact_positions: list[int]  # where the residual grid holds exact values (the differing positions)
    checked: list[dict]  # the cells named, patched exactly: each `grid`, `index`, `name`, `estimate`, `exact`


def estimates(model, pairs: torch.Tensor, check_heads: bool = True) -> Estimates:
    """Attribution patching over the prompt pairs (N, 2, T): heads and residual stream (mean, spread), and each head at
    each position on the text itself, its largest cells exact; with `check_heads`, the heads the findings name patched
    exactly too."""
    own, L, H = [], model.config.n_layer, model.config.n_head

    def measure(pair):  # the text's own pair (the first) with its top cells exact: its grid of positions is shown
        found = estimated_patching(model, pair[0], pair[1], exact_top=0 if own else EXACT_TOP)
        own.append(found)
        return torch.cat([found.heads.flatten(), found.residual.flatten()])

    over = over_prompts(measure, pairs, first_required=True)
    split = lambda values: (values[: L * H].view(L, H), values[L * H :].view(L, -1))  # noqa: E731
    (heads, residual), (heads_spread, residual_spread) = split(over.mean), split(over.spread)
    exact_positions = exact_residual(model, pairs, residual) if len(pairs) == 1 else []
    heads = type(over)(heads, heads_spread, over.prompts, over.left_out)
    checked = checked_top(model, pairs, "heads", heads.mean, CHECKED_HEADS) if check_heads else []
    # The residual stream's largest estimated cells, patched exactly in place: the findings name its cells over 0.5.
    stream = checked_top(model, pairs, "residual", residual, CHECKED_RESIDUAL, exact_positions)
    for cell in (cell for cell in stream if cell["estimate"] >= CHECKED_LEAST):
        residual[tuple(cell["index"])] = cell["exact"]
        checked.append(cell)
    return Estimates(
        heads,
        type(over)(residual, residual_spread, over.prompts, over.left_out),
        own[0].position if len(pairs) == 1 else None,
        own[0],
        exact_positions,
        checked + (checked_positions(own[0]) if len(pairs) == 1 else []),
    )


def checked_top(model, pairs: torch.Tensor, grid: str, estimate: torch.Tensor, count: int, exact_at=()) -> list[dict]:
    """The `count` cells of an estimated grid ("heads": (L, H), "residual": (L, T)) with the largest estimates (those
    the findings name; the residual stream's at positions `exact_at` are exact already), each patched exactly on every
    prompt pair (the mean, as the grid's): one run a cell a pair."""
    order = [tuple(int(i) for i in torch.unravel_index(j, estimate.shape)) for j in estimate.flatten().argsort()]
    units = [unit for unit in reversed(order) if grid == "heads" or unit[1] not in exact_at][:count]
    exact = over_prompts(lambda pair: patch_units(model, pair[0], pair[1], SITES[grid], units).effects, pairs).mean
    return [{"grid": grid, "index": list(unit), "name": NAMES[grid].format(*unit), "estimate": float(estimate[unit]),
             "exact": float(value)} for unit, value in zip(units, exact)]  # fmt: skip


def checked_positions(found) -> list[dict]:
    """The cells of each head at each position that `estimated_patching` patched exactly, with their estimates."""
    return [{"grid": "heads_by_position", "index": list(cell), "name": NAMES["heads_by_position"].format(*cell),
             "estimate": float(found.first_order[cell]), "exact": float(found.position[cell])}
            for cell in found.exact_cells]  # fmt: skip


def exact_residual(model, pairs: torch.Tensor, residual: torch.Tensor) -> list[int]:
    """The residual grid's cells at the positions where the two texts differ, patched exactly (in place), when those
    runs cost at most EXACT_RESIDUAL_WORK; the positions so patched."""
    L = model.config.n_layer
    differing = (pairs[0, 0] != pairs[0, 1]).nonzero().flatten().tolist()
    if not differing or L * len(differing) * pass_work(model.config, pairs.shape[-1]) > EXACT_RESIDUAL_WORK:
        return []
    units = [(layer, position) for position in differing for layer in range(L)]
    effects = patch_units(model, pairs[0, 0], pairs[0, 1], "residual", units).effects.cpu()
    for (layer, position), effect in zip(units, effects):
        residual[layer, position] = effect
    return differing


def checked_cell(value, config, length: int) -> tuple[str, tuple[int, ...]] | None:
    """The cell whose exact value a learner asks for: 'L.H' (a head's output at every position), 'L.H P' (at position
    P), 'resid L P' (the stream entering layer L at position P); empty: None. Returns the grid and the index."""
    words = str(value or "").strip().lower().split()
    if not words:
        return None
    if words[0] == "resid" and len(words) == 3:
        layer = layer_index(words[1], config.n_layer)
        return "residual", (layer, token_position(words[2], length, "exact_cell's position", last=False))
    if len(words) in (1, 2) and "." in words[0]:
        heads = parse_heads(words[0], config.n_layer, config.n_head)
        if len(heads) == 1:
            if len(words) == 1:
                return "heads", heads[0]
            return "heads_by_position", (
                *heads[0],
                token_position(words[1], length, "exact_cell's position", last=False),
            )
    raise VisitorError(
        f"Cannot read exact_cell {shortened(value)}: write a head as layer.head ('1.1'), a head at a position "
        "('1.1 5'), or the stream entering a layer at a position ('resid 1 5')."
    )


def exact_cell(model, pair: torch.Tensor, cell: tuple[str, tuple[int, ...]], part: str) -> dict:
    """The exact patching value of one cell on the text itself (one run), as `patch_heads`, `patch_heads_by_position`
    or `patch_residual` give it."""
    grid, index = cell
    site = part if grid == "heads" else SITES[grid]
    found = patch_units(model, pair[0], pair[1], site, [index])
    return {"grid": grid, "index": list(index), "name": NAMES[grid].format(*index), "exact": float(found.effects[0])}
