"""What the demo shows of a model's attention: every head's weights, a shape trace of one attention sublayer, and
the HTML that draws them.

The weights come from the shared forward pass of the text (forward_pass.py): the model's eager path
(`output_attentions=True`), which MiniGPT takes per call even when it was loaded with sdpa, so the demo loads its
weights once. The heatmaps are small palette PNGs inside SVG (token labels on the axes) rather than plotting-library
figures. They scale to GPT-2's size at 1,024 tokens: a tile of the grid is the head's weights max-pooled to at most
`GRID_TILE` pixels a side (a max, so that a sharp focus on one token still shows), the enlarged head shows a window of
at most `FULL_RESOLUTION` tokens a side at one pixel per weight (zoom and pan ask the server for another window), and
the exact weight under the pointer is read from the server one query row at a time (`HEAD_JS`): no page carries a
T x T matrix.

Shapes: L layers, H heads, T tokens (queries), S attended tokens (keys; S = T here), C width, D = C // H.
"""

import base64
import html
import io
import json
import math
from dataclasses import dataclass

import numpy as np
import torch
from PIL import Image


@dataclass
class TraceStep:
    step: str  # what happens, in words
    code: str  # where it happens in modeling_minigpt.py's MiniGPTAttention.forward
    symbols: str  # the shape in letters, e.g. (B, T, C)
    shape: tuple  # the same shape in numbers, as the tensor printed it
    meaning: str


def token_labels(tokenizer, ids: list[int]) -> list[str]:
    """One short readable label per token id: spaces as '␣', newlines as '↵', special tokens as written."""
    labels = []
    for token_id in ids:
        text = tokenizer.decode([token_id], skip_special_tokens=False, clean_up_tokenization_spaces=False)
        labels.append(text.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥") or "∅")
    return labels


def trace_steps(attn, recorded, layer: int) -> list[TraceStep]:
    """The steps of MiniGPTAttention.forward with the shapes one recorded pass (forward_pass.ForwardPass) produced,
    for a batch of one. The per-head tensors are those of the module's own `split_heads`; the scores have the
    weights' shape (softmax keeps it)."""
    x = recorded.attn_inputs[layer][None]  # (1, T, C)
    qkv_shape = (*x.shape[:-1], 3 * x.shape[-1])  # what qkv_proj makes of it
    heads = attn.split_heads(x)  # (B, H, T, D), as forward splits each of q, k, v
    weights = recorded.attentions[layer][None]  # (B, H, T, S)
    per_head_out = (*weights.shape[:-1], heads.shape[-1])  # weights (B, H, T, S) @ V (B, H, S, D)
    batch, n_head, length, head_dim = per_head_out
    return [
        TraceStep("input x (after attn_norm)", "hidden_states", "(B, T, C)", tuple(x.shape),
                  "one C-wide vector per token"),
        TraceStep("fused Q/K/V projection", "qkv_proj(x)", "(B, T, 3C)", qkv_shape,
                  "query, key and value of every token, side by side"),
        TraceStep("Q, K, V before the split", ".split(C, dim=-1)", "(B, T, C) each", tuple(x.shape),
                  "three tensors, all heads still together"),
        TraceStep("after the split into heads", "split_heads(q / k / v)", "(B, H, T, D) each", tuple(heads.shape),
                  "H heads, each looking at its own D = C / H numbers"),
        TraceStep("scores", "q @ k.transpose(-2, -1) * D**-0.5", "(B, H, T, S)", tuple(weights.shape),
                  "how well each query matches each key; future keys masked to -inf"),
        TraceStep("weights", "softmax(scores, dim=-1)", "(B, H, T, S)", tuple(weights.shape),
                  "each row sums to 1: the heatmaps above"),
        TraceStep("weighted sum of values", "weights @ v", "(B, H, T, D)", per_head_out,
                  "each head's output: a mix of the values it attends to"),
        TraceStep("heads side by side again", "output.transpose(1, 2)", "(B, T, H, D)",
                  (batch, length, n_head, head_dim), "per token, the H head outputs"),
        TraceStep("after merging the heads", "output.flatten(2)", "(B, T, C)",
                  tuple(recorded.merged_heads[layer][None].shape),
                  "the H outputs of D numbers, concatenated back to C"),
        TraceStep("after the output projection", "out_proj(output)", "(B, T, C)",
                  tuple(recorded.attn_outputs[layer][None].shape),
                  "mixed across heads, ready to add to the residual stream"),
    ]  # fmt: skip


def trace_table(trace: list[TraceStep], sizes: dict[str, int]) -> tuple[list[str], list[list[str]]]:
    """Headers and rows for a table of the trace; `sizes` gives the letters' numbers (B, T, C, H, D) for the legend."""
    rows = [[s.step, s.code, s.symbols, str(s.shape), s.meaning] for s in trace]
    legend = ", ".join(f"{k}={v}" for k, v in sizes.items())
    return ["step", "code", "shape", f"shape here ({legend})", "meaning"], rows


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


# ---- drawing -------------------------------------------------------------------------------------------------------

MASKED_RGB = (224, 224, 224)  # future tokens (above the diagonal): grey, so the causal triangle is visible


def _viridis() -> np.ndarray:
    """(256, 3) uint8 colour table: weight 0 dark purple, 1 yellow."""
    from matplotlib import colormaps  # imported here: only the table is needed, once

    return (colormaps["viridis"](np.linspace(0.0, 1.0, 256))[:, :3] * 255).round().astype(np.uint8)


COLOURS = _viridis()
LEVELS = 254  # colour indices 0 .. 254 for the weights, 255 for the mask: a one-byte palette PNG
PALETTE = np.vstack([COLOURS[np.rint(np.arange(LEVELS + 1) * 255 / LEVELS).astype(np.intp)], [MASKED_RGB]])
PALETTE = PALETTE.astype(np.uint8)  # (256, 3)


def colour_indices(weights, masked: np.ndarray | None = None) -> np.ndarray:
    """(..., T, S) weights (a tensor or an array) -> (..., T, S) uint8 indices into PALETTE. The colour follows the
    square root of the weight: over 128 tokens most weights are near 1/128, and a linear scale would draw them all the
    same dark colour. `masked` (T, S) (default: above the diagonal) is grey."""
    weights = torch.as_tensor(weights)
    if masked is None:
        masked = np.triu(np.ones(weights.shape[-2:], dtype=bool), k=1)
    indices = (weights.clamp(0, 1).sqrt() * LEVELS).round().to(torch.uint8)  # round half to even, as numpy's rint
    return indices.masked_fill_(torch.as_tensor(masked), LEVELS + 1).numpy()


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


def _axis_labels(queries: list[str], keys: list[str], origin: float, cell: float, font: float, stride: int) -> str:
    """SVG text: keys along the top (rotated), queries down the left side; every `stride`-th so that none overlap."""
    parts = []
    for i in range(0, len(queries), stride):
        y = origin + (i + 0.5) * cell
        parts.append(f'<text x="{origin - 2:.1f}" y="{y:.1f}" text-anchor="end">{html.escape(queries[i][:8])}</text>')
    for i in range(0, len(keys), stride):
        x = origin + (i + 0.5) * cell
        label = html.escape(keys[i][:8])
        parts.append(f'<text transform="translate({x:.1f} {origin - 2:.1f}) rotate(-90)">{label}</text>')
    return f'<g font-size="{font:.1f}" dominant-baseline="central" fill="currentColor">{"".join(parts)}</g>'


def heatmap_svg(image: str, queries: list[str], keys: list[str], size: int, title: str, attrs: str = "",
                min_font: float = 6.0) -> str:  # fmt: skip
    """A heatmap image (data URI) `size` pixels wide, with the query and key tokens it covers on its axes (none: no
    labels)."""
    cell = size / max(len(queries), 1)
    font = min(11.0, max(min_font, cell * 0.8))
    stride = max(1, math.ceil(font / cell))
    longest = min(8, max(map(len, queries + keys), default=0))
    margin = 6 + font * 0.6 * longest if longest else 2  # room for the longest label
    full = size + margin
    return (
        f'<svg width="{full:.0f}" height="{full:.0f}" viewBox="0 0 {full:.1f} {full:.1f}" {attrs}>'
        f"<title>{html.escape(title)}</title>{_axis_labels(queries, keys, margin, cell, font, stride)}"
        f'<image class="heat" href="{image}" x="{margin:.1f}" y="{margin:.1f}" width="{size}" '
        f'height="{size}" preserveAspectRatio="none" style="image-rendering: pixelated"/></svg>'
    )


GRID_CSS = """
.attn-grid { display: grid; gap: 6px; align-items: end; overflow-x: auto; }
.attn-grid .col-title, .attn-grid .row-title { font-size: 12px; opacity: 0.8; text-align: center; }
.attn-grid .row-title { writing-mode: vertical-rl; transform: rotate(180deg); }
.attn-grid svg { cursor: pointer; border: 2px solid transparent; border-radius: 4px; }
.attn-grid svg.selected { border-color: #f97316; }
.attn-large { display: flex; flex-wrap: wrap; gap: 16px; position: relative; }
.attn-large figure { margin: 0; }
.attn-large figcaption { font-size: 13px; font-weight: 600; margin-bottom: 4px; }
.attn-large figcaption small { font-weight: 400; opacity: 0.8; }
.attn-large image.heat { cursor: crosshair; }
.attn-zoom { flex-basis: 100%; display: flex; gap: 6px; align-items: center; font-size: 12px; }
.attn-zoom button { border: 1px solid #9ca3af; border-radius: 4px; padding: 1px 8px; }
.attn-tip { position: absolute; pointer-events: none; background: #111827; color: #f9fafb; font-size: 12px;
            padding: 3px 6px; border-radius: 4px; white-space: nowrap; z-index: 10; }
.attn-legend { display: flex; align-items: center; gap: 6px; font-size: 12px; margin-top: 6px; }
.attn-legend .bar { width: 160px; height: 10px; border-radius: 2px; }
"""

# Clicking a tile of the grid asks the server for that head, large (the `pick` event of the grid's gr.HTML).
PICK_JS = """
element.addEventListener('click', (event) => {
  const tile = event.target.closest('svg[data-layer]');
  if (!tile) return;
  element.querySelectorAll('svg.selected').forEach((s) => s.classList.remove('selected'));
  tile.classList.add('selected');
  trigger('pick', {layer: Number(tile.dataset.layer), head: tile.dataset.head});
});
"""

# The enlarged maps (#attention-head, drawn by head_html). Hover: the exact weight under the pointer, read from the
# server one query row at a time (server.attention_row) and kept per row. Wheel or the zoom buttons: zoom around the
# pointer (or the centre); drag: pan; each asks the server for the visible part (server.attention_window).
# Hooks for other views, kept stable: .attn-large[data-model][data-text][data-view][data-tokens] is the text shown,
# figure[data-layer][data-head] one map, its svg[data-row][data-col][data-size] the window shown (queries row .. row +
# size, keys col .. col + size). A click on a map (no drag) selects the query row under the pointer: it sets
# data-query on .attn-large, fires this gr.HTML's event 'query' with {layer, head, query} (`large.query(fn, ...)`,
# read with event._data) and a bubbling DOM CustomEvent 'attention-query' with the same detail.
HEAD_JS = """
let drag = null, hovered = '', generation = 0, lastWheel = 0;
const cellAt = (event) => {
  const figure = event.target.closest && event.target.closest('.attn-large figure[data-layer]');
  const image = figure && figure.querySelector('image.heat');
  if (!image) return null;
  const w = figure.querySelector('svg').dataset, box = image.getBoundingClientRect();
  const fx = (event.clientX - box.left) / box.width, fy = (event.clientY - box.top) / box.height;
  if (!(fx >= 0 && fy >= 0 && fx < 1 && fy < 1)) return null;
  const row = Number(w.row), col = Number(w.col), size = Number(w.size);
  return {figure, box, fx, fy, row, col, size, q: row + Math.floor(fy * size), k: col + Math.floor(fx * size)};
};
const shown = (figure) => {
  const root = figure.closest('.attn-large');
  return {root, model: root.dataset.model, text: root.dataset.text, layer: Number(figure.dataset.layer),
          head: figure.dataset.head};
};
// Gradio updates this element in place when another text is shown: what is kept here is kept per text (data-view:
// its model and token ids), and an answer is used only while its text is still the one shown.
const tokensOf = (root) => {
  if (root._tokensKey !== root.dataset.view) {
    root._tokens = JSON.parse(root.dataset.tokens);
    root._tokensKey = root.dataset.view;
  }
  return root._tokens;
};
const rows = new Map();
const rowOf = (figure, query) => {
  const {root, ...asked} = shown(figure);
  const key = `${root.dataset.view}|${asked.layer}|${asked.head}|${query}`;
  if (rows.size > 4096) rows.clear();
  if (!rows.has(key)) rows.set(key, server.attention_row({...asked, query}));
  return rows.get(key);
};
const tip = (event, text) => {
  const root = element.querySelector('.attn-large'), box = root && root.querySelector('.attn-tip');
  if (!box) return;
  box.hidden = text === null;
  if (text === null) return;
  const origin = root.getBoundingClientRect();
  box.textContent = text;
  box.style.left = (event.clientX - origin.left + 14) + 'px';
  box.style.top = (event.clientY - origin.top + 14) + 'px';
};
const showWindow = (root, row, col, size) => {
  const mine = ++generation, key = root.dataset.view;
  root.querySelectorAll('figure[data-layer]').forEach((figure) => {
    const {root: _, ...asked} = shown(figure);
    server.attention_window({...asked, row: Math.round(row), col: Math.round(col), size: Math.round(size)})
      .then((body) => { if (mine === generation && root.dataset.view === key) figure.innerHTML = body; });
  });
};
const zoom = (cell, factor) => {  // the point under the pointer stays where it is
  const size = cell.size * factor;
  showWindow(cell.figure.closest('.attn-large'), cell.row + cell.fy * (cell.size - size),
             cell.col + cell.fx * (cell.size - size), size);
};
element.addEventListener('mousemove', (event) => {
  if (drag) {
    const image = drag.cell.figure.querySelector('image.heat');
    image.setAttribute('transform', `translate(${event.clientX - drag.x} ${event.clientY - drag.y})`);
    return;
  }
  const cell = cellAt(event);
  if (!cell) { hovered = ''; tip(event, null); return; }
  const root = cell.figure.closest('.attn-large');
  const tokens = tokensOf(root), key = root.dataset.view;
  const label = `query ${cell.q} "${tokens[cell.q]}" -> key ${cell.k} "${tokens[cell.k]}": `;
  if (cell.k > cell.q) { tip(event, label + 'masked (a future token)'); return; }
  const id = hovered = `${key}|${cell.figure.dataset.layer}|${cell.figure.dataset.head}|${cell.q}|${cell.k}`;
  tip(event, label + '…');
  rowOf(cell.figure, cell.q)
    .then((row) => {
      if (hovered !== id) return;
      tip(event, label + (row.view === key ? row.weights[cell.k].toPrecision(6) : '(another text: hover again)'));
    })
    .catch(() => { if (hovered === id) tip(event, label + '(could not read the weight: show the maps again)'); });
});
element.addEventListener('mouseleave', (event) => { hovered = ''; tip(event, null); });
element.addEventListener('wheel', (event) => {
  const cell = cellAt(event);
  if (!cell) return;
  event.preventDefault();
  if (event.timeStamp - lastWheel < 150) return;  // a trackpad sends a burst of small steps: one zoom per burst
  lastWheel = event.timeStamp;
  zoom(cell, event.deltaY < 0 ? 0.5 : 2);
}, {passive: false});
element.addEventListener('mousedown', (event) => {
  const cell = cellAt(event);
  if (!cell || event.button !== 0) return;
  event.preventDefault();  // no text selection, no image drag
  drag = {cell, x: event.clientX, y: event.clientY};
  tip(event, null);
});
window.addEventListener('mouseup', (event) => {
  if (!drag) return;
  const {cell, x, y} = drag, dx = event.clientX - x, dy = event.clientY - y;
  drag = null;
  const root = cell.figure.closest('.attn-large');
  if (Math.abs(dx) + Math.abs(dy) < 4) {  // a click: select the query row under the pointer
    cell.figure.querySelector('image.heat').removeAttribute('transform');
    const detail = {layer: Number(cell.figure.dataset.layer), head: cell.figure.dataset.head, query: cell.q};
    root.dataset.query = cell.q;
    trigger('query', detail);
    root.dispatchEvent(new CustomEvent('attention-query', {detail, bubbles: true}));
    return;
  }
  const perPixel = cell.size / cell.box.width;
  showWindow(root, cell.row - dy * perPixel, cell.col - dx * perPixel, cell.size);
});
element.addEventListener('click', (event) => {
  const button = event.target.closest('button[data-zoom]');
  const root = button && button.closest('.attn-large');
  const svg = root && root.querySelector('figure[data-layer] svg');
  if (!svg) return;
  const w = svg.dataset, cell = {figure: svg.closest('figure'), fx: 0.5, fy: 0.5, row: Number(w.row),
                                 col: Number(w.col), size: Number(w.size)};
  if (button.dataset.zoom === 'all') showWindow(root, 0, 0, tokensOf(root).length);
  else zoom(cell, button.dataset.zoom === 'in' ? 0.5 : 2);
});
"""


def grid_images(attentions: torch.Tensor, rows_at_once: int = 128) -> np.ndarray:
    """(L, H, T, T) -> (L, H + 1, t, t) uint8 palette indices: each head, then the average over the layer's heads,
    max-pooled to t <= GRID_TILE pixels a side.

    One pass over the weights, a band of queries at a time (small enough to stay in the CPU's cache while its heads
    are pooled and averaged), reading only the keys up to the band's last query: the rest is masked (zero)."""
    n_layer, n_head, T, _ = attentions.shape
    factor = pool_factor(T, GRID_TILE)
    band = max(1, rows_at_once // factor) * factor  # whole blocks of queries
    t = -(-T // factor)
    pooled = torch.zeros(n_layer, n_head + 1, t, t)
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


def head_caption(layer: int, head: str) -> str:
    return f"layer {layer}, average over heads" if head == "mean" else f"layer {layer}, head {head}"


def grid_html(attentions, tokens: list[str], selected: tuple[int, str] = (0, "0")) -> str:
    """All heads as small heatmaps: one row per layer, one column per head, and a last column with their average.
    `attentions`: (L, H, T, T), a tensor or an array."""
    images = grid_images(torch.as_tensor(attentions))  # (L, H + 1, t, t)
    n_layer, n_head = images.shape[0], images.shape[1] - 1
    columns = f"grid-template-columns: 18px repeat({n_head + 1}, max-content)"
    cells = [f'<div class="attn-grid" style="{columns}">', "<div></div>"]
    cells += [f'<div class="col-title">head {h}</div>' for h in range(n_head)]
    cells.append('<div class="col-title">average</div>')
    size = 96 if len(tokens) <= 24 else GRID_TILE
    labels = tokens if len(tokens) <= TILE_LABELS_UP_TO else []
    for layer in range(n_layer):
        cells.append(f'<div class="row-title">layer {layer}</div>')
        for column, head in enumerate([*map(str, range(n_head)), "mean"]):
            chosen = ' class="selected"' if (layer, head) == selected else ""
            attrs = f'data-layer="{layer}" data-head="{head}"{chosen}'
            image = data_uri(png_bytes(images[layer, column]))
            cells.append(heatmap_svg(image, labels, labels, size, head_caption(layer, head) + " (click to enlarge)",
                                     attrs))  # fmt: skip
    return "".join(cells) + "</div>" + legend_html()


def large_size(length: int) -> int:
    """Pixels a side of an enlarged map of `length` tokens: 24 a token for short texts, 240 to 512."""
    return max(240, min(512, 24 * length))


def figure_body(matrix: torch.Tensor, tokens: list[str], caption: str, window: Window) -> str:
    """Caption and heatmap of one enlarged (T, T) map, showing `window`: one pixel per weight up to FULL_RESOLUTION
    tokens a side, max-pooled beyond."""
    factor = pool_factor(window.size, FULL_RESOLUTION)
    part = max_pooled(matrix[window.row : window.row + window.size, window.col : window.col + window.size], factor)
    image = heatmap_png(part.numpy(), future_blocks(window.rows, window.cols, factor))
    pixel = "one pixel per weight" if factor == 1 else f"a pixel is the largest of {factor} x {factor} weights"
    where = "" if window.size == len(tokens) and factor == 1 else (
        f" <small>(queries {window.row}-{window.row + window.size - 1}, keys {window.col}-"
        f"{window.col + window.size - 1} of {len(tokens)}; {pixel})</small>")  # fmt: skip
    attrs = f'data-row="{window.row}" data-col="{window.col}" data-size="{window.size}"'
    queries, keys = tokens[window.row : window.row + window.size], tokens[window.col : window.col + window.size]
    return (
        f"<figcaption>{html.escape(caption)}{where}</figcaption>"
        f"{heatmap_svg(image, queries, keys, large_size(len(tokens)), caption, attrs, min_font=9.0)}"
    )


ZOOM_BAR = (
    '<div class="attn-zoom"><button data-zoom="in">zoom in</button><button data-zoom="out">zoom out</button>'
    '<button data-zoom="all">whole map</button><span>or the wheel over a map; drag to pan</span></div>'
)


def head_html(attentions, tokens: list[str], layer: int, head: str, shown: dict, window: Window | None = None) -> str:
    """The chosen head and the average over the heads of its layer, side by side, showing `window` (default: all).
    `shown` ({"model", "text", "key"}) goes with the page, for HEAD_JS's requests of hover values and other windows."""
    attentions = torch.as_tensor(attentions)
    window = window or Window.fit(len(tokens))
    heads = [head, "mean"] if head != "mean" else ["mean"]
    figures = "".join(
        f'<figure data-layer="{layer}" data-head="{h}">'
        f"{figure_body(head_matrix(attentions, layer, h), tokens, head_caption(layer, h), window)}</figure>"
        for h in heads
    )
    data = " ".join(f'data-{k}="{html.escape(v, quote=True)}"' for k, v in
                    [("model", shown["model"]), ("text", shown["text"]), ("view", shown["key"]),
                     ("tokens", json.dumps(tokens))])  # fmt: skip
    zoom = ZOOM_BAR if len(tokens) > SMALLEST_WINDOW else ""
    return (
        f'<div class="attn-large" {data}>{zoom}{figures}<div class="attn-tip" hidden></div></div>{legend_html()}'
        "<p style='font-size:12px;opacity:.8'>Rows: the token that looks (query). Columns: the tokens it looks at "
        "(keys). Hover for the exact weight; click a row to choose that query token.</p>"
    )


def legend_html() -> str:
    stops = ", ".join(f"rgb{tuple(int(v) for v in COLOURS[i])}" for i in range(0, 256, 51))
    grey = f"rgb{MASKED_RGB}"
    return (
        f'<div class="attn-legend">0<span class="bar" style="background: linear-gradient(90deg, {stops})"></span>1'
        "<span>(colour: square root of the weight, so that small weights show; 0.25 is mid-way)</span>"
        f'<span class="bar" style="width:12px;background:{grey}"></span>masked (future token)</div>'
    )


__all__ = [
    "TraceStep", "token_labels", "trace_steps", "trace_table", "Window", "max_pooled", "future_blocks",
    "head_matrix", "query_weights", "colour_indices", "png_bytes", "heatmap_png", "grid_images", "grid_html",
    "figure_body", "head_caption", "head_html", "GRID_CSS", "PICK_JS", "HEAD_JS",
]  # fmt: skip
