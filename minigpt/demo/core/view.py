"""What every section's views share: the mark that ties a view to the (model, text) it was computed for (current.js
greys it once the page shows another), a visitor's mistake drawn in a view's place, the colours of a number (the maps'
viridis, red and blue for a change), the layer x head table and the small map as cells; their looks in view.css. And
`asset`, which reads a view's .js or .css file from its section's folder, and `page_doc`, a doc of docs/ readable on the
page. No model and no Gradio here."""

import html
import re
from pathlib import Path

from minigpt.demo.core.attention_maps import COLOURS

DEMO = Path(__file__).resolve().parent.parent  # minigpt/demo: a file is named by its section's folder and its name


def asset(name: str) -> str:
    """The text of one of the views' .js or .css files, named from minigpt/demo ("maps/head.js")."""
    return (DEMO / name).read_text(encoding="utf-8")


SHARED_CSS = asset("core/view.css")
DOCS = DEMO.parent.parent / "docs"  # the repository's docs/, beside app.py (a Space holds it; an installed package not)


def page_doc(name: str) -> str | None:
    """docs/`name` as Markdown the page can show (no repository URL to link to: the doc travels with the app): its
    pictures and links to the other docs named by their file (the page serves neither), links to the web kept. None
    where the app runs without docs/ (installed as a package)."""
    path = DOCS / name
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"!\[([^\]]*)\]\(([^)\s]+)\)", r"*(picture: \1, docs/\2)*", text)
    named = lambda link: f"docs/{link[2]}" if link[1] == link[2] else f"{link[1]} (docs/{link[2]})"  # noqa: E731
    return re.sub(r"\[([^\]]+)\]\((?!https?:)([^)\s#]+)(#[^)\s]*)?\)", named, text)


def scoped(element_id: str, css: str) -> str:
    """`css` for one element of the page alone: its rules nested in `#element_id` (as Gradio scoped a component's own
    CSS), so that they reach nothing else and outrank the page's other rules by that id."""
    return f"#{element_id} {{\n{css}}}\n"


CURRENT_JS = asset("core/current.js")  # on the current-text line: greys every view of another (model, text)


def belongs_to(key: str, label: str, body: str) -> str:
    """A view's HTML marked with the (model, token ids) it was computed for: `key` identifies them, `label` names
    them for a learner. CURRENT_JS greys it when the page shows another text."""
    return f'<div class="view-of" data-view="{html.escape(key)}" data-label="{html.escape(label)}">{body}</div>'


def belongs_to_model(model: str, body: str, measured_on: str = "its corpus") -> str:
    """A view that depends on the model alone, not on the text (the Head Finder: its corpus is the model's; the
    circuit found on random tokens): greyed by CURRENT_JS only when the page shows another model."""
    label = f"the {model} model and {measured_on}"
    return f'<div class="view-of" data-model-view="{html.escape(model)}" data-label="{html.escape(label)}">{body}</div>'


def current_html(key: str, label: str, length: int, model: str = "") -> str:
    """The line saying which text and model every view below belongs to."""
    return (
        f'<div class="current-view" data-view="{html.escape(key)}" data-model="{html.escape(model)}">Showing '
        f"{html.escape(label)}, {length} tokens (the start token included): every view below is of this text.</div>"
    )


def lost_html(label: str) -> str:
    """The line after a text that could not be shown: no view below belongs to it."""
    return (
        f'<div class="current-view lost" data-view="">Could not show {html.escape(label)} (the message says why). '
        "The views below belong to the text named on each; fix the text and press Show attention.</div>"
    )


def error_html(message: str) -> str:
    """A visitor's mistake drawn where the view would be (so that no earlier result stays up under it)."""
    return f'<p class="view-error">{html.escape(message)}</p>'


def viridis_css(value: float) -> str:
    """CSS colour of a value in [0, 1] on the maps' scale, and a text colour that reads on it."""
    r, g, b = COLOURS[round(min(max(value, 0.0), 1.0) * 255)]
    return f"background: rgb({r},{g},{b}); color: {'#000' if value > 0.6 else '#fff'}"


def diverging_css(value: float, scale: float) -> str:
    """Red for a rise, blue for a fall, white for none; `scale` is the value drawn at full strength."""
    strength = 0.0 if scale <= 0 else min(abs(value) / scale, 1.0)
    fade = round(255 * (1 - strength))
    colour = f"255,{fade},{fade}" if value > 0 else f"{fade},{fade},255"
    return f"background: rgb({colour}); color: #000"


def head_table(
    scores: list[list[float]],
    title: str,
    diverging: bool = False,
    digits: int = 2,
    marked: set | frozenset = frozenset(),
    relative: bool = False,
    pickable: bool = True,
) -> str:
    """A layer x head grid of numbers, each cell coloured by its value (0..1 on viridis, or red / blue for +/-); a
    click on a cell opens that head's map (pick_head.js), unless not `pickable`. `marked` (layer, head) cells are
    outlined."""
    scale = max((abs(v) for row in scores for v in row), default=0.0)
    colour = (lambda v: diverging_css(v, scale)) if diverging else viridis_css
    if relative and scale > 0:  # small scores coloured against the largest, not all dark
        colour = lambda v: viridis_css(v / scale)  # noqa: E731
    shown = f"{{:{'+' if diverging else ''}.{digits}f}}"  # signed for a change, plain for a score
    rows = ["<tr><th></th>" + "".join(f"<th>head {h}</th>" for h in range(len(scores[0]))) + "</tr>"]
    pick = ' tabindex="0" role="button"' if pickable else ""
    click = " (click: its map)" if pickable else ""
    for layer, row in enumerate(scores):
        cells = "".join(
            f'<td class="{"pick" if pickable else "score"}{" marked" if (layer, h) in marked else ""}" '
            f'data-layer="{layer}" data-head="{h}"{pick} style="{colour(v)}" '
            f'title="layer {layer}, head {h}: {v:.4f}{click}">{shown.format(v)}</td>'
            for h, v in enumerate(row)
        )
        rows.append(f"<tr><th>layer {layer}</th>{cells}</tr>")
    return f"<figure><figcaption><b>{html.escape(title)}</b></figcaption><table>{''.join(rows)}</table></figure>"


def map_table(matrix: list[list[float]], tokens: list[str], key: str, diverging: bool = False) -> str:
    """A (T, T) map as a table of cells (rows: queries, columns: keys), each coloured by its value (weights on the
    maps' scale; a difference red / blue against the largest) with its exact value on hover; future keys blank."""
    scale = max((abs(v) for row in matrix for v in row), default=0.0)
    colour = (lambda v: diverging_css(v, scale)) if diverging else (lambda v: viridis_css(v**0.5))  # noqa: E731
    short = lambda token: f'<th title="{html.escape(token)}">{html.escape(token[:3])}</th>'  # noqa: E731  (cells stay square)
    head = "<tr><th></th>" + "".join(short(t) for t in tokens) + "</tr>"
    rows = "".join(
        f"<tr>{short(tokens[q])}"
        + "".join(
            f'<td class="cell" style="{colour(v)}" title="{v!r}"></td>' if k <= q else '<td class="cell future"></td>'
            for k, v in enumerate(row)
        )
        + "</tr>"
        for q, row in enumerate(matrix)
    )
    return f'<table class="map-cells" data-key="{key}">{head}{rows}</table>'
