"""HTML for the circuit found (the `find_circuit` answer): the sentences its numbers say; the circuit as a graph (SVG:
`embed` at the bottom, each layer's heads and its MLP above it, `logits` at the top; an edge's width and opacity by its
score, the q, k or v it enters written at the head); a slider for how many of the top edges to keep, the faithfulness
measured at each of its positions drawn as a bar and as a curve; the kept edges' scores on demand (their sizes, each
said to help or work against the answer) and a link saving the circuit in EAP-IG's graph JSON. find_circuit_view.js
redraws the graph from the curve's numbers as the slider moves (no call) and makes a head a button that moves the
page's selection (the `pick` event), or with "Build your circuit by clicking" on, makes each head and edge a button
that puts it in the Test-your-own-circuit box, written as `heads.stated_circuit` reads it (`edge_name`); the looks in
find_circuit_view.css. Nothing here computes or knows of Gradio."""

import html
import json
from urllib.parse import quote

from minigpt.demo.circuits.words import effect_words
from minigpt.demo.core.view import asset

FIND_CIRCUIT_CSS = asset("circuits/find_circuit_view.css")
FIND_CIRCUIT_JS = asset("circuits/find_circuit_view.js")

INPUT_COLOURS = {"q": "#1f77b4", "k": "#d62728", "v": "#2ca02c", None: "#475569"}
PORT_OFFSET = {"q": -11, "k": 0, "v": 11}  # where an input enters a head, from its centre
ROW = 72  # between the rows of the graph: embed, each layer's heads, its MLP, ..., logits
COLUMN = 54  # between the heads of a layer
RADIUS = 16


def esc(value) -> str:
    return html.escape(str(value), quote=True)


class Layout:
    """Where each node of an n_layer x n_head model sits: rows from the bottom (embed; per layer its heads, then its
    MLP; logits), the heads of a layer side by side, the MLPs to their right (out of the way of the edges that pass
    them), embed and logits centred."""

    def __init__(self, n_layer: int, n_head: int):
        self.n_layer, self.n_head = n_layer, n_head
        self.width = max(360, (n_head + 2) * COLUMN + 40)
        self.height = (2 * n_layer + 1) * ROW + 2 * 34

    def row_y(self, row: int) -> float:
        return self.height - 34 - row * ROW  # row 0 (embed) at the bottom

    def place(self, name: str) -> tuple[float, float]:
        middle = self.width / 2 - COLUMN / 2  # the heads' middle: the MLPs take a column on the right
        if name == "embed":
            return middle, self.row_y(0)
        if name == "logits":
            return middle, self.row_y(2 * self.n_layer + 1)
        if name.startswith("mlp "):
            return middle + (self.n_head + 1) / 2 * COLUMN, self.row_y(2 * int(name.split()[1]) + 2)
        layer, head = map(int, name.split("."))
        return middle + (head - (self.n_head - 1) / 2) * COLUMN, self.row_y(2 * layer + 1)

    def names(self) -> list[str]:
        heads = [f"{layer}.{head}" for layer in range(self.n_layer) for head in range(self.n_head)]
        return ["embed", *heads, *(f"mlp {layer}" for layer in range(self.n_layer)), "logits"]


def shown_edges(answer: dict, index: int) -> set[int]:
    """The ranks of the ranking's edges drawn at the slider's position `index`: the top k, less those into parts
    whose output no kept edge reads."""
    point = answer["curve"][index]
    unread = set(point["unread"])
    return {e["rank"] for e in answer["ranking"] if e["rank"] < point["k"] and e["rank"] not in unread}


def edge_name(edge: dict) -> str:
    """An edge as the Test-your-own-circuit box writes it (`heads.stated_circuit` reads it): "0.2 -> 1.1 k"."""
    return f"{edge['sender']} -> {edge['receiver']}" + (f" {edge['input']}" if edge["input"] else "")


def edge_curve(layout: Layout, edge: dict) -> str:
    """An edge's curve: from its sender's top to its receiver's bottom (the input's port on a head)."""
    (x1, y1), (x2, y2) = layout.place(edge["sender"]), layout.place(edge["receiver"])
    y1, y2 = y1 - 13, y2 + (RADIUS + 17 if edge["input"] else 13)  # into a head: under its port's letter
    x2 += PORT_OFFSET.get(edge["input"], 0)
    bend = max(24.0, (y1 - y2) / 2)
    return f"M{x1:.1f},{y1:.1f} C{x1:.1f},{y1 - bend:.1f} {x2:.1f},{y2 + bend:.1f} {x2:.1f},{y2:.1f}"


def edge_data(edge: dict) -> str:
    return (
        f'data-rank="{edge["rank"]}" data-sender="{esc(edge["sender"])}" data-receiver="{esc(edge["receiver"])}" '
        f'data-input="{edge["input"] or ""}" data-edge="{esc(edge_name(edge))}"'
    )


def edge_path(layout: Layout, edge: dict, scale: float, shown: bool) -> str:
    """One edge, drawn: its width and opacity by its score, its colour by the input it enters."""
    strength = abs(edge["score"]) / scale
    into = f" ({edge['input']})" if edge["input"] else ""
    dash = ' stroke-dasharray="5 3"' if edge["score"] > 0 else ""  # works against the answer
    return (
        f'<path class="edge{"" if shown else " hidden"}" {edge_data(edge)} d="{edge_curve(layout, edge)}" '
        f'stroke="{INPUT_COLOURS[edge["input"]]}" stroke-width="{0.8 + 5 * strength:.2f}" '
        f'stroke-opacity="{0.3 + 0.7 * strength:.2f}"{dash}><title>{esc(edge["sender"])} → {esc(edge["receiver"])}'
        f"{into}: {effect_words(edge['score'])}, score size {abs(edge['score']):.4g} (rank {edge['rank'] + 1})"
        "</title></path>"
    )


def edge_hit(layout: Layout, edge: dict, shown: bool) -> str:
    """An edge's target for a finger or a key: a wide transparent stroke under the drawn edge (a thin edge is hard to
    hit); find_circuit_view.js makes it a button while the learner builds a circuit, and halos it when it is in the
    learner's circuit."""
    return (
        f'<path class="edge-hit{"" if shown else " hidden"}" {edge_data(edge)} d="{edge_curve(layout, edge)}" '
        f'role="button" aria-label="edge {esc(edge_name(edge))}"><title>{esc(edge_name(edge))}</title></path>'
    )


def node_svg(layout: Layout, name: str, used: set[str]) -> str:
    """A node; a head is a button (data-layer, data-head: a click moves the page's selection to it, or while the
    learner builds a circuit, adds it to theirs)."""
    x, y = layout.place(name)
    state = "in" if name in used else "out"
    if name[0].isdigit():
        layer, head = name.split(".")
        return (
            f'<g class="node head {state}" data-name="{name}" data-layer="{layer}" data-head="{head}" tabindex="0" '
            f'role="button" aria-label="head {name}: select it"><circle cx="{x:.1f}" cy="{y:.1f}" r="{RADIUS}">'
            f"<title>head {name}</title></circle>"
            f'<text x="{x:.1f}" y="{y + 5:.1f}">{name}</text></g>'
        )
    width = 64 if name.startswith("mlp") else 76
    return (
        f'<g class="node part {state}" data-name="{esc(name)}"><rect x="{x - width / 2:.1f}" y="{y - 13:.1f}" '
        f'width="{width}" height="26" rx="6"><title>{esc(name)}</title></rect>'
        f'<text x="{x:.1f}" y="{y + 5:.1f}">{esc(name)}</text></g>'
    )


def ports_svg(layout: Layout, entered: set[tuple[str, str]]) -> str:
    """The q, k and v letters under each head, where its edges enter; shown where a drawn edge enters."""
    ports = []
    for layer in range(layout.n_layer):
        for head in range(layout.n_head):
            name = f"{layer}.{head}"
            x, y = layout.place(name)
            for into, offset in PORT_OFFSET.items():
                hidden = "" if (name, into) in entered else " hidden"
                ports.append(
                    f'<text class="port{hidden}" data-port="{name} {into}" x="{x + offset:.1f}" '
                    f'y="{y + RADIUS + 13:.1f}" fill="{INPUT_COLOURS[into]}">{into}</text>'
                )
    return "".join(ports)


def graph_svg(answer: dict, index: int) -> str:
    """The circuit at the slider's position `index`: every edge of the ranking drawn, those not kept hidden (the
    script shows them as the slider moves); the nodes a kept edge touches in colour, the others faint."""
    layout = Layout(answer["n_layer"], answer["n_head"])
    shown = shown_edges(answer, index)
    kept = [e for e in answer["ranking"] if e["rank"] in shown]
    used = {e["sender"] for e in kept} | {e["receiver"] for e in kept}
    entered = {(e["receiver"], e["input"]) for e in kept if e["input"]}
    scale = max((abs(e["score"]) for e in answer["ranking"]), default=0.0) or 1.0
    edges = "".join(edge_path(layout, e, scale, e["rank"] in shown) for e in reversed(answer["ranking"]))
    hits = "".join(edge_hit(layout, e, e["rank"] in shown) for e in reversed(answer["ranking"]))
    nodes = "".join(node_svg(layout, name, used) for name in layout.names())
    return (
        f'<svg class="circuit-graph" viewBox="0 0 {layout.width} {layout.height}" width="{layout.width}" '
        f'height="{layout.height}" role="group" aria-label="the circuit found, as a graph">'
        f'<g class="edge-hits">{hits}</g><g class="edges">{edges}</g>{ports_svg(layout, entered)}'
        f'<g class="nodes">{nodes}</g></svg>'
    )


TICK_DIGIT = 8.4  # the width of a digit of the curve's tick labels at their largest (14 px monospace, on a phone)


def curve_svg(answer: dict, index: int, width: int = 320, height: int = 130) -> str:
    """Faithfulness at each position of the slider (each measured: one exact run), the target dashed, the position
    shown marked; a point is a button that moves the slider there."""
    curve = answer["curve"]
    # The right margin holds half of the last tick's label, centred on the last point ("110" was cut to "11(" on a
    # phone): its digits at the phone's 14 px monospace (0.6 em each), and 4 more
    left, right, top, bottom = 40, 4 + TICK_DIGIT * len(str(curve[-1]["k"])) / 2, 10, 26
    x = lambda i: left + i * (width - left - right) / max(1, len(curve) - 1)  # noqa: E731
    y = lambda f: top + (1.1 - min(1.1, max(-0.1, f))) / 1.2 * (height - top - bottom)  # noqa: E731
    line = " ".join(f"{x(i):.1f},{y(p['faithfulness']):.1f}" for i, p in enumerate(curve))
    points = "".join(
        f'<circle class="point{" current" if i == index else ""}" data-index="{i}" cx="{x(i):.1f}" '
        f'cy="{y(p["faithfulness"]):.1f}" r="5"><title>top {p["k"]} edges: faithfulness {p["faithfulness"]:.3f}'
        "</title></circle>"
        for i, p in enumerate(curve)
    )
    ticks = "".join(
        f'<text class="tick" x="{x(i):.1f}" y="{height - 8}">{p["k"]}</text>'
        for i, p in enumerate(curve)
        if i in (0, len(curve) - 1) or p["k"] == answer["found_k"]
    )
    axis = "".join(f'<text class="axis" x="{left - 10}" y="{y(v) + 4:.1f}">{v:g}</text>' for v in (0, 1))
    target = y(answer["target"])
    return (
        f'<svg class="curve" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="faithfulness against the number of top edges kept">'
        f'<line class="target" x1="{left}" x2="{width - right}" y1="{target:.1f}" y2="{target:.1f}"/>'
        f'<polyline points="{line}"/>{points}{ticks}{axis}</svg>'
    )


def readout_html(answer: dict, index: int) -> str:
    """The slider's position in words and as a bar: k, the edges and heads left, the faithfulness measured."""
    point = answer["curve"][index]
    share = max(0.0, min(1.0, point["faithfulness"]))
    return (
        f'<div class="readout"><div class="faith-bar" title="faithfulness {point["faithfulness"]:.3f}">'
        f'<span style="width:{share * 100:.1f}%"></span><i style="left:{answer["target"] * 100:.1f}%"></i></div>'
        f'<p><span class="k">Top <b>{point["k"]}</b> edges by score</span>: <b class="kept">{point["kept_edges"]}'
        f'</b> kept, <b class="heads">{len(point["heads"])}</b> of {answer["total_heads"]} heads; faithfulness '
        f'<b class="faith">{point["faithfulness"]:.3f}</b></p></div>'
    )


def edges_table(answer: dict) -> str:
    rows = "".join(
        f"<tr><td>{esc(e['sender'])}</td><td>{esc(e['receiver'])}</td><td>{e['input'] or ''}</td>"
        f"<td>{abs(e['score']):.4f}</td><td>{effect_words(e['score'])}</td></tr>"
        for e in answer["edges"]
    )
    return (
        f"<details><summary>The found circuit's {answer['kept_edges']} edges and their scores</summary>"
        '<div class="scroll"><table class="edges"><tr><th>sender</th><th>receiver</th><th>input</th>'
        f"<th>score size</th><th>the edge</th></tr>{rows}</table></div></details>"
    )


def eap_download(answer: dict) -> str:
    """A link that saves the circuit in EAP-IG's graph JSON layout (EAP-IG's Graph.from_json reads it), where the
    answer carries it."""
    if not answer.get("eap_graph"):
        return ""
    href = "data:application/json;charset=utf-8," + quote(json.dumps(answer["eap_graph"]))
    return (
        f'<p class="eap-download"><a download="circuit_{esc(answer["model"])}_eap_ig.json" href="{href}">Save the '
        "circuit in EAP-IG’s graph JSON</a> (every edge with its score; heads.circuit_from_eap_json reads it back)</p>"
    )


def cell(measured: dict | None) -> str:
    if measured is None:
        return "<td>–</td>"
    spread = f"({measured['low']:.2f} to {measured['high']:.2f})"
    return f'<td>{measured["faithfulness"]:.3f} <span class="range">{spread}</span></td>'


def faithfulness_table(answer: dict) -> str:
    """The found circuit and the minimal one, side by side on each prompt set: found on, then held out."""
    minimal = answer.get("minimal")
    if not answer.get("found_on"):
        return ""
    sets = [answer["found_on"], *answer.get("held_out", [])]
    pruned = {h["prompts"]: h for h in minimal["held_out"]} if minimal else {}
    if minimal:
        pruned["found on"] = {**answer["found_on"], "faithfulness": minimal["faithfulness"], "low": float("nan")}
    rows = "".join(
        f"<tr><th>{esc(m['prompts'])}{' (held out)' if m['prompts'] != 'found on' else ''}</th>"
        f"<td>{m['count']} × {m['length']}</td>{cell(m)}"
        + (
            f"<td>{pruned['found on']['faithfulness']:.3f}</td>"
            if m["prompts"] == "found on" and minimal
            else cell(pruned.get(m["prompts"]))
            if minimal
            else ""
        )
        + "</tr>"
        for m in sets
    )
    minimal_head = f"<th>minimal circuit ({len(minimal['edges'])} edges)</th>" if minimal else ""
    return scrolled_table(
        "faithfulness-sets",
        "Faithfulness on the prompts it was found on and on held-out prompts (each prompt's range in brackets)",
        "<tr><th>prompts</th><th>count × tokens</th>"
        f"<th>found circuit ({answer['kept_edges']} edges)</th>{minimal_head}</tr>{rows}",
    )


def scrolled_table(kind: str, caption: str, rows: str) -> str:
    """A table that may be wider than a phone, scrolled sideways in its own box, its caption above the box (inside,
    a caption is as wide as the table and scrolls away with it)."""
    table = f'<div class="scroll"><table class="{kind}">{rows}</table></div>'
    return f'<figure class="table-figure"><figcaption>{esc(caption)}</figcaption>{table}</figure>'


def parts_table(answer: dict) -> str:
    """What each part of the minimal circuit adds: the faithfulness lost without it, and where it is needed."""
    minimal = answer.get("minimal")
    if not minimal or not minimal["parts"]:
        return ""
    rows = "".join(
        f"<tr><td>{esc(p['name'])}</td><td>{p['kind']}</td><td>{p['adds']:+.3f}</td><td>{esc(p['needed_on'])}</td></tr>"
        for p in minimal["parts"]
    )
    return (
        f"<details open><summary>The minimal circuit's {len(minimal['heads'])} heads and {len(minimal['edges'])} "
        "edges: what each adds</summary>"
        '<div class="scroll"><table class="parts"><tr><th>part</th><th>kind</th><th>faithfulness lost without it '
        "(found-on prompts)</th><th>below the target without it on</th></tr>"
        f"{rows}</table></div></details>"
    )


def build_controls() -> str:
    """The switch that makes the graph's clicks build the learner's circuit in the Test-your-own-circuit box (off: a
    head click selects the head), and the line that says what a click did."""
    return (
        '<div class="build"><button type="button" class="build-button" aria-pressed="false">Build your circuit by '
        "clicking</button> <span>on: a click (a tap, Enter) on a head or an edge puts it in the <i>Test your own "
        'circuit</i> box, again takes it out</span><p class="build-note" aria-live="polite" hidden></p></div>'
    )


def found_circuit_html(answer: dict) -> str:
    """The findings, the graph at the found circuit's k, the slider and its curve, the scores on demand."""
    curve = answer["curve"]
    index = next((i for i, p in enumerate(curve) if p["k"] == answer["found_k"]), len(curve) - 1)
    findings = "".join(f"<li>{esc(s)}</li>" for s in answer["findings"])
    notes = "".join(f"<p>{esc(n)}</p>" for n in answer.get("notes", []))
    data = esc(json.dumps({"curve": curve, "found": index, "total_heads": answer["total_heads"]}))
    drawn = len(answer["ranking"])
    more = (
        f"<p>The graph draws the {drawn} largest-scored of the {answer['total_edges']} edges at most.</p>"
        if drawn < answer["total_edges"]
        else ""
    )
    legend = " ".join(f'<span style="color:{c}">— {k}</span>' for k, c in INPUT_COLOURS.items() if k)
    return (
        f'<div class="found-circuit" data-found="{data}"><ul class="findings">{findings}</ul>{notes}'
        f'<div class="found-parts"><figure class="graph-figure"><figcaption>{legend} into a head’s query, key, value; '
        "grey: into an MLP or the logits; thicker: a larger score; dashed: one that works against the answer (ablated, "
        "the metric would rise). Click a head to select it."
        f"</figcaption>{build_controls()}{graph_svg(answer, index)}{more}</figure>"
        f'<div class="controls"><label for="keep-edges">How many of the top edges to keep</label>'
        f'<input id="keep-edges" class="keep-edges" type="range" min="0" max="{len(curve) - 1}" step="1" '
        f'value="{index}" aria-valuetext="top {curve[index]["k"]} edges">'
        f'<button type="button" class="found-button">Back to the circuit found (top {answer["found_k"]})</button>'
        f"{readout_html(answer, index)}<figure><figcaption>Faithfulness measured at each position of the slider (top "
        f"k edges kept; dashed: the target {answer['target']:.2f})</figcaption>{curve_svg(answer, index)}</figure>"
        f'<p class="chosen-note" hidden></p></div></div>{faithfulness_table(answer)}{parts_table(answer)}'
        f"{edges_table(answer)}{eap_download(answer)}</div>"
    )


# ---- your own circuit, beside the found one -------------------------------------------------------------------------


def own_sets_table(answer: dict) -> str:
    """Your circuit, the found one and its minimal one on each prompt set (each prompt's range in brackets)."""
    found, minimal = answer["found"], answer["found"]["minimal"]
    found_sets = {h["prompts"]: h for h in [found["found_on"], *found["held_out"]]}
    minimal_sets = {h["prompts"]: h for h in minimal["held_out"]}
    rows = "".join(
        f"<tr><th>{esc(m['prompts'])}{' (held out)' if m['prompts'] != 'found on' else ''}</th>"
        f"<td>{m['count']} × {m['length']}</td>{cell(m)}{cell(found_sets.get(m['prompts']))}"
        + (
            f"<td>{minimal['faithfulness']:.3f}</td>"
            if m["prompts"] == "found on"
            else cell(minimal_sets.get(m["prompts"]))
        )
        + "</tr>"
        for m in [answer["found_on"], *answer["held_out"]]
    )
    return scrolled_table(
        "faithfulness-sets",
        "Faithfulness of each circuit on the same prompts (each prompt's range in brackets)",
        "<tr><th>prompts</th><th>count × tokens</th>"
        f"<th>your circuit ({answer['kept_edges']} edges)</th><th>found ({found['kept_edges']} edges)</th>"
        f"<th>minimal ({minimal['kept_edges']} edges)</th></tr>{rows}",
    )


def own_parts_table(answer: dict) -> str:
    """What each part of your circuit adds: the faithfulness lost without it, and what is left."""
    if not answer["parts"]:
        return ""
    rows = "".join(
        f"<tr><td>{esc(p['name'])}</td><td>{p['kind']}</td><td>{p['adds']:+.3f}</td><td>{p['without']:.3f}</td></tr>"
        for p in answer["parts"]
    )
    return scrolled_table(
        "parts",
        "What each part of your circuit adds (found-on prompts; below 0: it works against the answer)",
        "<tr><th>part</th><th>kind</th><th>faithfulness lost without it</th><th>faithfulness without it</th></tr>"
        + rows,
    )


def own_circuit_html(answer: dict) -> str:
    """Your circuit measured: its sentences, then the three circuits on each prompt set, then its parts."""
    findings = "".join(f"<li>{esc(s)}</li>" for s in answer["findings"])
    notes = "".join(f"<p>{esc(n)}</p>" for n in answer.get("notes", []))
    return (
        f'<div class="found-circuit own-circuit"><ul class="findings">{findings}</ul>{notes}'
        f"{own_sets_table(answer)}{own_parts_table(answer)}</div>"
    )
