"""What the demo shows of a model's attention: every head's weights, a shape trace of one attention sublayer, and
the HTML that draws them.

The weights come from the shared forward pass of the text (forward_pass.py): the model's eager path
(`output_attentions=True`), which MiniGPT takes per call even when it was loaded with sdpa, so the demo loads its
weights once. The heatmaps are small PNGs inside SVG (token labels on the
axes) rather than plotting-library figures: all heads of a 128-token text draw in tens of milliseconds, and the large
maps show each weight on hover with a few lines of JavaScript (`HOVER_JS`).

Shapes: L layers, H heads, T tokens (queries), S attended tokens (keys; S = T here), C width, D = C // H.
"""

import base64
import html
import io
import math
from dataclasses import dataclass

import numpy as np
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


# ---- drawing -------------------------------------------------------------------------------------------------------

MASKED_RGB = (224, 224, 224)  # future tokens (above the diagonal): grey, so the causal triangle is visible


def _viridis() -> np.ndarray:
    """(256, 3) uint8 colour table: weight 0 dark purple, 1 yellow."""
    from matplotlib import colormaps  # imported here: only the table is needed, once

    return (colormaps["viridis"](np.linspace(0.0, 1.0, 256))[:, :3] * 255).round().astype(np.uint8)


COLOURS = _viridis()


def heatmap_png(weights: np.ndarray) -> str:
    """A (T, S) weight matrix as a T x S-pixel PNG data URI, one pixel per weight (the browser scales it up).
    The colour follows the square root of the weight: over 128 tokens most weights are near 1/128, and a linear
    scale would draw them all the same dark colour."""
    rgb = COLOURS[np.clip(np.rint(np.sqrt(np.clip(weights, 0, 1)) * 255), 0, 255).astype(np.intp)]  # (T, S, 3)
    rgb[np.triu(np.ones(weights.shape, dtype=bool), k=1)] = MASKED_RGB
    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, format="PNG", compress_level=1)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _axis_labels(tokens: list[str], origin: float, cell: float, font: float, stride: int) -> str:
    """SVG text: keys along the top (rotated), queries down the left side."""
    parts = []
    for i in range(0, len(tokens), stride):
        label = html.escape(tokens[i][:8])
        centre = origin + (i + 0.5) * cell
        parts.append(f'<text x="{origin - 2:.1f}" y="{centre:.1f}" text-anchor="end">{label}</text>')
        parts.append(f'<text transform="translate({centre:.1f} {origin - 2:.1f}) rotate(-90)">{label}</text>')
    return f'<g font-size="{font:.1f}" dominant-baseline="central" fill="currentColor">{"".join(parts)}</g>'


def heatmap_svg(weights: np.ndarray, tokens: list[str], size: int, title: str, attrs: str = "") -> str:
    """One heatmap `size` pixels wide with the tokens on both axes (every k-th when they would overlap)."""
    cell = size / len(tokens)
    font = min(11.0, max(6.0, cell * 0.8))
    stride = max(1, math.ceil(font / cell))
    margin = 6 + font * 0.6 * min(8, max(len(t) for t in tokens))  # room for the longest label
    full = size + margin
    return (
        f'<svg width="{full:.0f}" height="{full:.0f}" viewBox="0 0 {full:.1f} {full:.1f}" {attrs}>'
        f"<title>{html.escape(title)}</title>{_axis_labels(tokens, margin, cell, font, stride)}"
        f'<image class="heat" href="{heatmap_png(weights)}" x="{margin:.1f}" y="{margin:.1f}" width="{size}" '
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

# Hover over a large map: the query and key tokens under the pointer and their weight.
HOVER_JS = """
element.addEventListener('mousemove', (event) => {
  const tip = element.querySelector('.attn-tip');
  if (!tip) return;
  const map = event.target.closest('figure[data-weights]');
  const image = map && map.querySelector('image.heat');
  if (!image) { tip.hidden = true; return; }
  map._weights = map._weights || JSON.parse(map.dataset.weights);
  const tokens = JSON.parse(map.dataset.tokens);
  const box = image.getBoundingClientRect();
  const q = Math.floor((event.clientY - box.top) / box.height * tokens.length);
  const k = Math.floor((event.clientX - box.left) / box.width * tokens.length);
  if (q < 0 || k < 0 || q >= tokens.length || k >= tokens.length) { tip.hidden = true; return; }
  const value = k > q ? 'masked (a future token)' : map._weights[q][k].toFixed(3);
  tip.textContent = `query ${q} "${tokens[q]}" -> key ${k} "${tokens[k]}": ${value}`;
  const root = element.querySelector('.attn-large').getBoundingClientRect();
  tip.style.left = (event.clientX - root.left + 14) + 'px';
  tip.style.top = (event.clientY - root.top + 14) + 'px';
  tip.hidden = false;
});
element.addEventListener('mouseleave', () => {
  const tip = element.querySelector('.attn-tip');
  if (tip) tip.hidden = true;
});
"""


def grid_html(weights: np.ndarray, tokens: list[str], selected: tuple[int, str] = (0, "0")) -> str:
    """All heads as small heatmaps: one row per layer, one column per head, and a last column with their average."""
    n_layer, n_head = weights.shape[:2]
    columns = f"grid-template-columns: 18px repeat({n_head + 1}, max-content)"
    cells = [f'<div class="attn-grid" style="{columns}">', "<div></div>"]
    cells += [f'<div class="col-title">head {h}</div>' for h in range(n_head)]
    cells.append('<div class="col-title">average</div>')
    size = 96 if len(tokens) <= 24 else 160
    for layer in range(n_layer):
        cells.append(f'<div class="row-title">layer {layer}</div>')
        columns = [(str(h), weights[layer, h], f"layer {layer}, head {h}") for h in range(n_head)]
        columns.append(("mean", weights[layer].mean(axis=0), f"layer {layer}, average over heads"))
        for head, matrix, title in columns:
            chosen = ' class="selected"' if (layer, head) == selected else ""
            attrs = f'data-layer="{layer}" data-head="{head}"{chosen}'
            cells.append(heatmap_svg(matrix, tokens, size, title + " (click to enlarge)", attrs))
    return "".join(cells) + "</div>" + legend_html()


def large_map_html(matrix: np.ndarray, tokens: list[str], caption: str) -> str:
    """One heatmap, large, carrying its weights and tokens for the hover read-out (HOVER_JS)."""
    import json

    data = html.escape(json.dumps(np.round(matrix, 4).tolist()), quote=True)
    labels = html.escape(json.dumps(tokens), quote=True)
    size = max(240, min(480, 24 * len(tokens)))
    return (
        f'<figure data-weights="{data}" data-tokens="{labels}"><figcaption>{html.escape(caption)}</figcaption>'
        f"{heatmap_svg(matrix, tokens, size, caption)}</figure>"
    )


def head_html(weights: np.ndarray, tokens: list[str], layer: int, head: str) -> str:
    """The chosen head and the average over the heads of its layer, side by side, with hover values."""
    maps = [large_map_html(weights[layer].mean(axis=0), tokens, f"layer {layer}, average over heads")]
    if head != "mean":
        maps.insert(0, large_map_html(weights[layer, int(head)], tokens, f"layer {layer}, head {head}"))
    return (
        f'<div class="attn-large">{"".join(maps)}<div class="attn-tip" hidden></div></div>{legend_html()}'
        "<p style='font-size:12px;opacity:.8'>Rows: the token that looks (query). Columns: the tokens it looks at "
        "(keys). Hover for the weight.</p>"
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
    "TraceStep", "token_labels", "trace_steps", "trace_table", "heatmap_png", "grid_html",
    "head_html", "GRID_CSS", "PICK_JS", "HOVER_JS",
]  # fmt: skip
