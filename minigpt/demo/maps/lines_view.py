"""The line view of a layer's attention (bertviz's head view): the tokens twice, queries on the left and keys on the
right, a line from each query to each key it sees whose opacity is the weight; one head, or every head of the layer
in its own colour. Hover a token on the left to see only its lines (lines_view.js). Nothing here computes a model's
numbers or knows of Gradio: the weights come from the recorded pass."""

import html

from minigpt.demo.core.view import asset

LINES_JS = asset("maps/lines_view.js")

MAX_LINE_TOKENS = 64  # beyond, the lines are too many and too close to read: the maps are the view

FAINTEST = 0.005  # lines of smaller weights are not drawn (they would be invisible)

HEAD_COLOURS = ("#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4", "#42d4f4", "#f032e6", "#9a6324",
                "#469990", "#800000", "#808000", "#000075")  # fmt: skip

ROW, LABEL, GAP = 18, 110, 180  # pixels: a token's row, the label column, the gap the lines cross


def head_colour(head: int) -> str:
    return HEAD_COLOURS[head % len(HEAD_COLOURS)]


def lines_html(weights: dict[int, list[list[float]]], tokens: list[str], layer: int, query: int | None = None) -> str:
    """`weights`: head -> its (T, T) weights (rows: queries); drawn over each other, each head in its colour. The
    selected `query`'s token is marked. Every line carries its query, key, head and weight (data-*)."""
    length = len(tokens)
    if length > MAX_LINE_TOKENS:
        return (
            f'<p class="lines-note">The line view draws texts of up to {MAX_LINE_TOKENS} tokens; this one has '
            f"{length}: the maps above show it.</p>"
        )
    height, right = length * ROW + 8, LABEL + GAP
    parts = []
    for side, x, anchor in (("q", LABEL - 6, "end"), ("k", right + 6, "start")):
        for i, token in enumerate(tokens):
            chosen = " chosen" if side == "q" and i == query else ""
            parts.append(
                f'<text class="{side}{chosen}" data-i="{i}" x="{x}" y="{i * ROW + ROW / 2 + 4}" '
                f'text-anchor="{anchor}">{html.escape(token[:12])}</text>'
            )
    for head, matrix in weights.items():
        colour = head_colour(head)
        for i, row in enumerate(matrix):
            for j, weight in enumerate(row[: i + 1]):
                if weight < FAINTEST:
                    continue
                parts.append(
                    f'<line x1="{LABEL}" y1="{i * ROW + ROW / 2}" x2="{right}" y2="{j * ROW + ROW / 2}" '
                    f'stroke="{colour}" stroke-opacity="{weight!r}" stroke-width="2" data-q="{i}" data-k="{j}" '
                    f'data-head="{head}"/>'
                )
    legend = ", ".join(f'<span class="swatch" style="background:{head_colour(h)}"></span>head {h}' for h in weights)
    caption = (
        f"Layer {layer}: {legend}. Left: the token that looks (query); right: the tokens it looks at (keys). A line's "
        f"opacity is its weight (weights under {FAINTEST} not drawn). Hover a token on the left for its lines only."
    )
    return (
        f'<div class="attn-lines"><p class="lines-note">{caption}</p>'
        f'<svg width="{right + LABEL}" height="{height}" data-layer="{layer}">{"".join(parts)}</svg></div>'
    )
