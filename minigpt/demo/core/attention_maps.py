"""What the demo computes of a model's attention for its maps: every head's weights pooled to tiles, windows of the
enlarged head, exact query rows, and the heatmaps as palette PNGs.
(maps/view.py draws them as HTML.)

The weights come from the shared recorded pass of the text (minigpt.heads.recorded_pass): the model's eager path
(`output_attentions=True`), which MiniGPT takes per call even when it was loaded with sdpa, so the demo loads its
weights once. The heatmaps are small palette PNGs rather than plotting-library figures. They scale to GPT-2's size at
1,024 tokens: a tile of the grid is the head's weights max-pooled to at most `GRID_TILE` pixels a side (a max, so that
a sharp focus on one token still shows), the enlarged head shows a window of at most `FULL_RESOLUTION` tokens a side at
one pixel per weight (zoom and pan ask the server for another window), and the exact weight under the pointer is read
from the server one query row at a time: no page carries a T x T matrix.

Shapes: L layers, H heads, T tokens (queries), S attended tokens (keys; S = T here), C width, D = C // H.
"""

import base64
import io
import math
from dataclasses import dataclass

import numpy as np
import torch
from PIL import Image


def token_labels(tokenizer, ids: list[int]) -> list[str]:
    """One short readable label per token id: spaces as '␣', newlines as '↵', special tokens as written."""
    labels = []
    for token_id in ids:
        text = tokenizer.decode([token_id], skip_special_tokens=False, clean_up_tokenization_spaces=False)
        labels.append(text.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥") or "∅")
    return labels


# ---- what the drawings show: pooled maps, windows, exact rows -------------------------------------------------------

GRID_TILE = 160  # px a side of a tile of the grid; its image is max-pooled to at most as many pixels

FULL_RESOLUTION = 256  # tokens a side of the largest window the enlarged head draws at one pixel per weight

SMALLEST_WINDOW = 16  # tokens a side of the enlarged head's deepest zoom

TILE_LABELS_UP_TO = 64  # tokens: the grid's tiles of longer texts carry no labels (the enlarged head has them)


def pool_factor(length: int, pixels: int) -> int:
    """How many tokens a side one pixel covers when `length` tokens are drawn in at most `pixels` pixels."""
    return max(1, math.ceil(length / pixels))


def max_pooled(weights: torch.Tensor, factor: int) -> torch.Tensor:
    """(..., T, S) -> (..., ceil(T / f), ceil(S / f)): the largest weight of each f x f block, so that a weight of 1 on
    one key stays 1 however small the map is drawn (a mean would dilute it to 1 / f). Rows first: they are contiguous,
    so that pass reads the large tensor once at memory speed, and the pass over columns reads f times less."""
    if factor == 1:
        return weights
    *lead, T, S = weights.shape
    whole = T // factor * factor
    blocks = [weights[..., :whole, :].reshape(*lead, T // factor, factor, S).amax(-2)]  # (..., T // f, S)
    if whole < T:
        blocks.append(weights[..., whole:, :].amax(-2, keepdim=True))  # the last, shorter block of rows
    rows = torch.cat(blocks, -2) if len(blocks) > 1 else blocks[0]  # (..., ceil(T / f), S)
    rows = torch.nn.functional.pad(rows, (0, -S % factor))  # weights are >= 0: a zero never wins a max
    return rows.reshape(*rows.shape[:-1], -1, factor).amax(-1)  # (..., ceil(T / f), ceil(S / f))


def future_blocks(rows: range, cols: range, factor: int) -> np.ndarray:
    """(ceil(len(rows) / f), ceil(len(cols) / f)) bool: the f x f blocks of queries `rows` and keys `cols` whose every
    key comes after every query, i.e. that the causal mask hides wholly (drawn grey)."""
    first_key = cols.start + np.arange(0, len(cols), factor)  # of each column of blocks
    last_query = np.minimum(rows.start + np.arange(factor - 1, len(rows) + factor - 1, factor), rows.stop - 1)
    return first_key[None, :] > last_query[:, None]


def head_matrix(attentions: torch.Tensor, layer: int, head: str) -> torch.Tensor:
    """(T, T): one head's weights from (L, H, T, T), or with head "mean" the average over the heads of the layer."""
    return attentions[layer].mean(0) if head == "mean" else attentions[layer, int(head)]


def query_weights(attentions: torch.Tensor, layer: int, head: str, query: int) -> list[float]:
    """The exact weights (float32, as Python floats) of one query over the keys it sees, 0 .. query (for "mean", the
    average over the layer's heads of that row alone: a hover reads it in well under a millisecond)."""
    heads = attentions[layer, :, query, : query + 1]  # (H, query + 1)
    return (heads.mean(0) if head == "mean" else heads[int(head)]).tolist()


@dataclass(frozen=True)
class Window:
    """The square part of a T x T map that the enlarged head shows: queries row .. row + size, keys col .. col +
    size."""

    row: int
    col: int
    size: int

    @classmethod
    def fit(cls, length: int, row: int = 0, col: int = 0, size: int | None = None) -> "Window":
        """The window nearest the one asked for that lies inside a `length`-token map (the whole map by default)."""
        size = length if size is None else min(max(size, min(SMALLEST_WINDOW, length)), length)
        return cls(min(max(row, 0), length - size), min(max(col, 0), length - size), size)

    @property
    def rows(self) -> range:
        return range(self.row, self.row + self.size)

    @property
    def cols(self) -> range:
        return range(self.col, self.col + self.size)


# ---- heatmaps as images ------------------------------------------------------------------------------------------

MASKED_RGB = (224, 224, 224)  # future tokens (above the diagonal): grey, so the causal triangle is visible


def viridis_table() -> np.ndarray:
    """(256, 3) uint8 colour table: weight 0 dark purple, 1 yellow."""
    from matplotlib import colormaps  # imported here: only the table is needed, once

    return (colormaps["viridis"](np.linspace(0.0, 1.0, 256))[:, :3] * 255).round().astype(np.uint8)


COLOURS = viridis_table()

LEVELS = 254  # colour indices 0 .. 254 for the weights, 255 for the mask: a one-byte palette PNG

PALETTE = np.vstack([COLOURS[np.rint(np.arange(LEVELS + 1) * 255 / LEVELS).astype(np.intp)], [MASKED_RGB]])
PALETTE = PALETTE.astype(np.uint8)  # (256, 3)


def colour_indices(weights, masked: np.ndarray | None = None) -> np.ndarray:
    """(..., T, S) weights (a tensor or an array) -> (..., T, S) uint8 indices into PALETTE. The colour follows the
    square root of the weight: over 128 tokens most weights are near 1/128, and a linear scale would draw them all the
    same dark colour. `masked` (T, S) (default: above the diagonal) is grey."""
    weights = weights.detach().cpu() if isinstance(weights, torch.Tensor) else torch.as_tensor(weights, device="cpu")
    if masked is None:
        masked = np.triu(np.ones(weights.shape[-2:], dtype=bool), k=1)
    indices = (weights.clamp(0, 1).sqrt() * LEVELS).round().to(torch.uint8)  # round half to even, as numpy's rint
    return indices.masked_fill_(torch.as_tensor(masked, device="cpu"), LEVELS + 1).numpy()


def png_bytes(indices: np.ndarray) -> bytes:
    """A PNG, one pixel per index (the browser scales it up, pixelated): a palette PNG (one byte a pixel), or RGB for
    images smaller than the palette's 768 bytes (a short name's tiles)."""
    if indices.size * 3 < PALETTE.size:
        image = Image.fromarray(PALETTE[indices])
    else:
        image = Image.fromarray(indices, mode="P")
        image.putpalette(PALETTE.tobytes())
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def heatmap_png(weights: np.ndarray, masked: np.ndarray | None = None) -> str:
    """A (T, S) weight matrix as a T x S-pixel PNG data URI (see colour_indices)."""
    return data_uri(png_bytes(colour_indices(weights, masked)))


def grid_images(attentions: torch.Tensor, rows_at_once: int = 128) -> np.ndarray:
    """(L, H, T, T) -> (L, H + 1, t, t) uint8 palette indices: each head, then the average over the layer's heads,
    max-pooled to t <= GRID_TILE pixels a side.

    One pass over the weights, a band of queries at a time (small enough to stay in the CPU's cache while its heads
    are pooled and averaged), reading only the keys up to the band's last query: the rest is masked (zero)."""
    n_layer, n_head, T, _ = attentions.shape
    factor = pool_factor(T, GRID_TILE)
    band = max(1, rows_at_once // factor) * factor  # whole blocks of queries
    t = -(-T // factor)
    pooled = torch.zeros(n_layer, n_head + 1, t, t, device=attentions.device)
    for layer in range(n_layer):
        for start in range(0, T, band):
            stop = min(start + band, T)  # queries start .. stop, keys 0 .. stop (the later ones are masked)
            weights = attentions[layer, :, start:stop, :stop]  # (H, band, stop)
            both = torch.cat([weights, weights.mean(0, keepdim=True)])  # (H + 1, band, stop)
            blocks = max_pooled(both, factor)  # (H + 1, band / f, stop / f), rounded up
            pooled[layer, :, start // factor : start // factor + blocks.shape[1], : blocks.shape[2]] = blocks
    return colour_indices(pooled, future_blocks(range(T), range(T), factor))


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")
