"""The attention maps as HTML: the grid of every head (one small heatmap per head, a row per layer), the enlarged head
beside its layer's average, their axis labels and colour legend. The numbers and images come from
attention_maps.py; the page's behaviour is in head.js (hover, zoom, pan, row clicks) and pick_tile.js (tile clicks),
the looks in view.css. Nothing here computes a model's numbers or knows of Gradio."""

import html
import json
import math

import torch

from minigpt.demo.core.attention_maps import (
    COLOURS,
    FULL_RESOLUTION,
    GRID_TILE,
    MASKED_RGB,
    SMALLEST_WINDOW,
    TILE_LABELS_UP_TO,
    Window,
    data_uri,
    future_blocks,
    grid_images,
    head_matrix,
    heatmap_png,
    max_pooled,
    png_bytes,
    pool_factor,
)
from minigpt.demo.core.view import asset

MAPS_CSS = asset("maps/view.css")
PICK_TILE_JS = asset("maps/pick_tile.js")  # a click on a tile of the grid: that head, large (the grid's `pick` event)
SELECT_TILE_JS = asset("maps/select_tile.js")  # the outlined tile follows the maps' layer and head pickers
HEAD_JS = asset("maps/head.js")  # the enlarged maps: hover, zoom, pan, a click on a row (the `query` event)


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


def heatmap_svg(
    image: str,
    queries: list[str],
    keys: list[str],
    size: int,
    title: str,
    attrs: str = "",
    min_font: float = 6.0,
    marked_row: int | None = None,
) -> str:
    """A heatmap image (data URI) `size` pixels wide, with the query and key tokens it covers on its axes (none: no
    labels), and row `marked_row` of the image outlined (the selected query)."""
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
        f'height="{size}" preserveAspectRatio="none" style="image-rendering: pixelated"/>'
        f"{row_mark(marked_row, margin, cell, size)}</svg>"
    )


def row_mark(row: int | None, margin: float, cell: float, size: int) -> str:
    """An outline around row `row` of a heatmap (head.js moves it when a row is clicked)."""
    if row is None:
        return ""
    return (
        f'<rect class="row-mark" x="{margin:.1f}" y="{margin + row * cell:.1f}" width="{size}" height="{cell:.2f}" '
        'fill="none" stroke="#f97316" stroke-width="2" pointer-events="none"/>'
    )


def head_caption(layer: int, head: str) -> str:
    return f"layer {layer}, average over heads" if head == "mean" else f"layer {layer}, head {head}"


def grid_html(attentions, tokens: list[str], selected: tuple[int, str] = (0, "0")) -> str:
    """All heads as small heatmaps: one row per layer, one column per head, and a last column with their average.
    `attentions`: (L, H, T, T), a tensor or an array."""
    images = grid_images(torch.as_tensor(attentions))  # (L, H + 1, t, t)
    n_layer, n_head = images.shape[0], images.shape[1] - 1
    columns = f"grid-template-columns: 18px repeat({n_head + 1}, minmax(64px, 260px))"  # the page's width, tiles scaled
    cells = [f'<div class="attn-grid" style="{columns}">', "<div></div>"]
    cells += [f'<div class="col-title">head {h}</div>' for h in range(n_head)]
    cells.append('<div class="col-title">average</div>')
    size = 96 if len(tokens) <= 24 else GRID_TILE
    labels = tokens if len(tokens) <= TILE_LABELS_UP_TO else []
    for layer in range(n_layer):
        cells.append(f'<div class="row-title">layer {layer}</div>')
        for column, head in enumerate([*map(str, range(n_head)), "mean"]):
            chosen = ' class="selected"' if (layer, str(head)) == (selected[0], str(selected[1])) else ""
            label = head_caption(layer, head) + ": enlarge"
            # a tile is a button: focusable (Tab), opened with Enter or Space as with a click (pick_tile.js)
            attrs = f'data-layer="{layer}" data-head="{head}" tabindex="0" role="button" aria-label="{label}"{chosen}'
            image = data_uri(png_bytes(images[layer, column]))
            cells.append(
                heatmap_svg(image, labels, labels, size, head_caption(layer, head) + " (click to enlarge)", attrs)
            )
    return "".join(cells) + "</div>" + legend_html()


def large_size(length: int) -> int:
    """Pixels a side of an enlarged map of `length` tokens: 24 a token for short texts, 240 to 512."""
    return max(240, min(512, 24 * length))


def figure_body(matrix: torch.Tensor, tokens: list[str], caption: str, window: Window, query: int | None = None) -> str:
    """Caption and heatmap of one enlarged (T, T) map, showing `window`: every weight its own cell up to
    FULL_RESOLUTION tokens a side, max-pooled beyond; the row of `query` outlined when the window shows it."""
    factor = pool_factor(window.size, FULL_RESOLUTION)
    part = max_pooled(matrix[window.row : window.row + window.size, window.col : window.col + window.size], factor)
    image = heatmap_png(part.numpy(), future_blocks(window.rows, window.cols, factor))
    pixel = "every weight its own cell" if factor == 1 else f"each cell the largest of {factor} x {factor} weights"
    where = (
        ""
        if window.size == len(tokens) and factor == 1
        else (
            f" <small>(queries {window.row}-{window.row + window.size - 1}, keys {window.col}-"
            f"{window.col + window.size - 1} of {len(tokens)}; {pixel})</small>"
        )
    )
    attrs = (
        f'data-row="{window.row}" data-col="{window.col}" data-size="{window.size}" tabindex="0" role="button" '
        f'aria-label="{html.escape(caption)}: the arrow keys move the query row, Enter chooses it"'
    )
    queries, keys = tokens[window.row : window.row + window.size], tokens[window.col : window.col + window.size]
    marked = query - window.row if query is not None and window.row <= query < window.row + window.size else None
    return (
        f"<figcaption>{html.escape(caption)}{where}</figcaption>"
        f"{heatmap_svg(image, queries, keys, large_size(len(tokens)), caption, attrs, 9.0, marked)}"
    )


ZOOM_BAR = (
    '<div class="attn-zoom"><button data-zoom="in">zoom in</button><button data-zoom="out">zoom out</button>'
    '<button data-zoom="all">whole map</button><span>or the wheel over a map; drag to pan</span></div>'
)


def head_html(
    attentions,
    tokens: list[str],
    layer: int,
    head: str,
    shown: dict,
    window: Window | None = None,
    query=None,
    moved: str | None = None,
) -> str:
    """The chosen head and the average over the heads of its layer, side by side, showing `window` (default: all),
    the row of `query` (the selected query token) outlined. `shown` ({"model", "text", "key"}) goes with the page, for
    HEAD_JS's requests of hover values and other windows. `moved`: a line saying the selected head is not in this
    model, and which is shown instead."""
    attentions = torch.as_tensor(attentions)
    window = window or Window.fit(len(tokens))
    heads = [head, "mean"] if head != "mean" else ["mean"]
    figures = "".join(
        f'<figure data-layer="{layer}" data-head="{h}">'
        f"{figure_body(head_matrix(attentions, layer, h), tokens, head_caption(layer, h), window, query)}</figure>"
        for h in heads
    )
    data = " ".join(
        f'data-{k}="{html.escape(v, quote=True)}"'
        for k, v in [
            ("model", shown["model"]),
            ("text", shown["text"]),
            ("view", shown["key"]),
            ("tokens", json.dumps(tokens)),
            ("query", "" if query is None else str(query)),
        ]
    )
    zoom = ZOOM_BAR if len(tokens) > SMALLEST_WINDOW else ""
    note = f'<p class="attn-moved" role="status">{html.escape(moved)}</p>' if moved else ""
    return (
        f'{note}<div class="attn-large" {data}>{zoom}{figures}<div class="attn-tip" hidden></div>'
        f'<p class="attn-value" aria-live="polite"></p>{row_picker(tokens, query)}'
        '<div class="attn-why-box" aria-live="polite"></div></div>'
        f"{legend_html()}"
        "<p class='attn-help'>Rows: the token that looks (query). Columns: the tokens it looks at (keys). Hover, tap "
        "or click a cell for its exact weight (shown under the maps); a click or tap also chooses that row's query "
        "token and says why the head looks there (its score split into what each part of the stream puts into the "
        "query and the key). With the keyboard: Tab to a map, the arrow keys move the query row, Enter chooses it.</p>"
    )


def row_picker(tokens: list[str], query) -> str:
    """The query rows as buttons a finger can hit (a map's rows are a few pixels tall on a phone): a tap chooses that
    row's query token, as a tap on the row does (head.js). Shown on narrow or touch screens (view.css)."""
    buttons = "".join(
        f'<button type="button" class="query-pick{" chosen" if i == query else ""}" data-query="{i}" '
        f'title="query {i}">{html.escape(token)}</button>'
        for i, token in enumerate(tokens)
    )
    return (
        f'<div class="row-picker" role="group" aria-label="Choose the query row"><span>Query row:</span>{buttons}</div>'
    )


def legend_html() -> str:
    stops = ", ".join(f"rgb{tuple(int(v) for v in COLOURS[i])}" for i in range(0, 256, 51))
    grey = f"rgb{MASKED_RGB}"
    return (
        f'<div class="attn-legend">0<span class="bar" style="background: linear-gradient(90deg, {stops})"></span>1'
        "<span>(colour: square root of the weight, so that small weights show; 0.25 is mid-way)</span>"
        f'<span class="bar" style="width:12px;background:{grey}"></span>masked (future token)</div>'
    )


OVER_TRAINING_JS = asset("maps/over_training.js")  # a click (Enter) on a step's map shows the page at that step

STRIP_MAP = 150  # pixels a side of each step's map in the strip: the pattern, not the digits (the maps below have them)


def over_training_html(answer: dict, shown_model: str, roles_curve: str | None = None) -> str:
    """The /head_over_training answer as a strip: the head's map at each snapshot step and at the end, left to right,
    the one shown now outlined; each a button that shows the page at that step. `roles_curve`: the model's roles
    curve (a data URI), beside the strip."""
    tokens, layer, head, factor = answer["tokens"], answer["layer"], answer["head"], answer["pooled"]
    labels = tokens if len(tokens) <= TILE_LABELS_UP_TO and factor == 1 else []
    masked = future_blocks(range(len(tokens)), range(len(tokens)), factor)
    figures = []
    for step in answer["steps"]:
        image = heatmap_png(torch.tensor(step["weights"]).numpy(), masked)
        now = " now" if step["model"] == shown_model else ""
        score = f"{answer['score_name']} {step['score']:.2f}"
        title = f"{head_caption(layer, str(head))} at {step['label']} ({score}): show the page at this step"
        attrs = f'tabindex="0" role="button" aria-label="{html.escape(title)}"'
        figures.append(
            f'<figure class="step-map{now}" data-model="{html.escape(step["model"])}" {attrs}>'
            f"<figcaption>{html.escape(step['label'])} <small>{html.escape(score)}</small></figcaption>"
            f"{heatmap_svg(image, labels, labels, STRIP_MAP, title)}</figure>"
        )
    curve = (
        f"<figure class=\"roles-curve\"><figcaption>The heads' roles over training (the model's roles log)</figcaption>"
        f'<img src="{roles_curve}" alt="Each head\'s role scores at each evaluation"></figure>'
        if roles_curve
        else ""
    )
    moving = answer["most_changed"]
    cue = (
        f'<p class="most-changed">Across these snapshots, <b>head {moving["layer"]}.{moving["head"]}</b>\'s '
        f"{answer['score_name']} score on this text rises the most (by {moving['change']:.2f}). "
        f'<button type="button" class="follow" data-layer="{moving["layer"]}" data-head="{moving["head"]}">Follow '
        f"head {moving['layer']}.{moving['head']}</button></p>"
        if (moving["layer"], moving["head"]) != (layer, head)
        else f"<p class='most-changed'>Of every head, this one's {answer['score_name']} score on this text rises "
        "the most across these snapshots.</p>"
    )
    return (
        f'<div class="over-training">{cue}<p>{html.escape(head_caption(layer, str(head)))} of '
        f"{html.escape(answer['model'])} on this text, at each saved training step, with its {answer['score_name']} "
        "score on the text: click one to show the page at that step.</p>"
        f'<div class="side"><div class="strip">{"".join(figures)}</div>{curve}</div></div>'
    )
