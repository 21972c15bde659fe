"""HTML for the circuits section, drawn from the plain-number answers of the API (`logit_attribution`, `patching`,
`composition`, `head_circuit`): attribution bars and a layer x head grid, patching maps, the composition graph (SVG),
one head's OV and positional QK circuits and its map with an earlier head ablated, and the lesson's circuits step.
The looks in circuits.css; circuits.js makes a head (a cell, a node) clickable. Nothing here computes a model's numbers
or knows of Gradio."""

import html
from urllib.parse import urlencode

from minigpt.demo.views.assets import asset
from minigpt.demo.views.insights import diverging_css, head_table, map_table

CIRCUITS_CSS = asset("circuits.css")
CIRCUITS_JS = asset("circuits.js")  # a click on a head (a cell of a grid, a node of the graph): the `pick` event

SPECIMEN_TEXT = "Romeo and Juliet, Romeo and Jul"  # the lesson's example: 1.1 writes the answer "i"
KIND_COLOURS = {"q": "#1f77b4", "k": "#d62728", "v": "#2ca02c"}


def esc(value) -> str:
    return html.escape(str(value))


def bar_rows(items: list[tuple[str, float]], width: int = 180) -> str:
    """Signed bars: red to the right for a rise, blue to the left for a fall, each with its value."""
    scale = max((abs(v) for _, v in items), default=0.0) or 1.0
    rows = []
    for label, value in items:
        size = max(1, round(abs(value) / scale * width / 2))
        side = "up" if value >= 0 else "down"
        rows.append(
            f'<tr><th>{esc(label)}</th><td class="signed"><span class="bar {side}" style="width:{size}px"></span>'
            f'</td><td data-value="{value!r}">{value:+.3f}</td></tr>'
        )
    return f'<table class="bars">{"".join(rows)}</table>'


def attribution_html(answer: dict) -> str:
    """The components' direct shares of the logit as bars (the heads summed per layer beside their grid), the
    heads in a layer x head grid, the largest named."""
    target = esc(repr(answer["token"]["token"]))
    if answer["other_token"]:
        target = f"logit({target}) − logit({esc(repr(answer['other_token']['token']))})"
    else:
        target = f"the logit of {target}"
    others = [(c["component"], c["value"]) for c in answer["components"] if not c["component"].startswith("head ")]
    named = ", ".join(f"<b>{esc(c['component'])}</b> ({c['value']:+.3f})" for c in answer["largest"])
    grid = head_table(answer["heads"], "Each head's direct contribution (click a head: its circuits)", True, 3)
    return (
        f'<div class="insight circuits attribution"><p>After token {answer["position"]} '
        f"<b>{esc(answer['tokens'][answer['position']])}</b>: {target} = <b>{answer['logit']:.3f}</b>, the sum of "
        f"every component's direct share below and the final norm's bias ({answer['bias_term']:+.3f}). Largest: "
        f'{named}.</p><div class="maps"><figure><figcaption><b>Embeddings, attention biases, MLPs</b></figcaption>'
        f"{bar_rows(others)}</figure>{grid}</div></div>"
    )


def unsigned(value: float) -> float:
    """A value that rounds to 0.00 without its sign: no "-0.00" in a table."""
    return abs(value) if round(value, 2) == 0 else value


def residual_table(effects: list[list[float]], tokens: list[str]) -> str:
    """Layer x position effects of residual patching, the tokens above their columns."""
    scale = max((abs(v) for row in effects for v in row), default=0.0)
    head = "<tr><th></th>" + "".join(f'<th title="position {i}">{esc(t)}</th>' for i, t in enumerate(tokens)) + "</tr>"
    rows = "".join(
        f"<tr><th>layer {layer}</th>"
        + "".join(
            f'<td style="{diverging_css(v, scale)}" title="layer {layer}, position {i}: {v:.4f}">{unsigned(v):.2f}</td>'
            for i, v in enumerate(row)
        )
        + "</tr>"
        for layer, row in enumerate(effects)
    )
    return (
        "<figure><figcaption><b>Residual stream entering each layer, patched at one position</b></figcaption>"
        f'<div class="scroll"><table class="residual">{head}{rows}</table></div></figure>'
    )


def path_html(path: dict | None) -> str:
    if not path:
        return ""
    layer, head = path["receiver"]
    rows = "".join(
        f'<tr data-input="{row["input"]}" data-sender="{esc(row["sender"])}"><td>{esc(row["sender"])}</td>'
        f"<td>{row['input']}</td><td>{row['attention_clean']:.3f}</td><td>{row['attention_corrupted']:.3f}</td>"
        f'<td class="patched">{row["attention_patched"]:.3f}</td><td>{row["effect"]:+.3f}</td></tr>'
        for row in path["paths"]
    )
    return (
        f'<figure class="path"><figcaption><b>Path patching into head {layer}.{head}</b>: its attention from the last '
        f"query on key {path['key_position']} ({esc(repr(path['key_token']))})</figcaption><table><tr><th>sender "
        "(clean)</th><th>into</th><th>clean</th><th>corrupted</th><th>patched</th><th>effect on the answer</th></tr>"
        f"{rows}</table><p>'resid {layer}' is the whole clean stream entering layer {layer}, fed to one input of the "
        "head alone; every other head reads the corrupted text. The input that restores the attention is the one "
        "the earlier heads compose with.</p></figure>"
    )


def patching_html(answer: dict) -> str:
    """The head map and the residual map of patching, and the path patching table."""
    clean, corrupted = answer["clean_answer"]["token"], answer["corrupted_answer"]["token"]
    heads = answer["heads"]
    best = max(((v, layer, h) for layer, row in enumerate(heads) for h, v in enumerate(row)), default=(0, 0, 0))
    grid = head_table(heads, "Heads patched one at a time (click a head: its circuits)", True, 3)
    notes = "".join(f"<p>{esc(note)}</p>" for note in answer["notes"])
    return (
        f'<div class="insight circuits patching">{notes}<p>Clean text predicts {esc(repr(clean))}, corrupted text '
        f"{esc(repr(corrupted))}. LD = logit({esc(repr(clean))}) − logit({esc(repr(corrupted))}): "
        f"{answer['clean_difference']:.3f} on the clean text, {answer['corrupted_difference']:.3f} on the corrupted "
        "one. Each cell: (LD patched − LD corrupted) / (LD clean − LD corrupted): 1 restores the clean answer, 0 "
        f"changes nothing. Head <b>{best[1]}.{best[2]}</b> restores the most: <b>{best[0]:.1%}</b>.</p>"
        f'<div class="maps">{grid}{path_html(answer["path"])}</div>'
        f"{residual_table(answer['residual'], answer['tokens'])}</div>"
    )


def graph_svg(answer: dict, width: int = 420, row: int = 44) -> str:
    """Heads as nodes, a column per layer; an edge per composition score above the baseline (the strongest drawn
    thickest), coloured by kind (Q blue, K red, V green)."""
    L, H = answer["n_layer"], answer["n_head"]
    column = (width - 80) / max(1, L - 1)
    x = lambda layer: 40 + layer * column  # noqa: E731
    y = lambda head: 30 + head * row  # noqa: E731
    baseline = answer["baseline"]
    top = max((e["score"] for e in answer["edges"]), default=baseline)
    lines = []
    for edge in reversed(answer["edges"]):  # the strongest drawn last, on top
        (a, b), (c, d) = edge["writer"], edge["reader"]
        strength = (edge["score"] - baseline) / max(top - baseline, 1e-9)
        offset = {"q": -6, "k": 0, "v": 6}[edge["kind"]]
        lines.append(
            f'<line x1="{x(a):.0f}" y1="{y(b):.0f}" x2="{x(c):.0f}" y2="{y(d) + offset:.0f}" '
            f'stroke="{KIND_COLOURS[edge["kind"]]}" stroke-width="{0.5 + 4 * strength:.2f}" '
            f'stroke-opacity="{0.25 + 0.75 * strength:.2f}"><title>{edge["kind"].upper()}-composition '
            f"{a}.{b} → {c}.{d}: {edge['score']:.3f} (baseline {baseline:.3f})</title></line>"
        )
    nodes = "".join(
        f'<g class="node" data-layer="{layer}" data-head="{head}"><circle cx="{x(layer):.0f}" cy="{y(head)}" r="13">'
        f"<title>head {layer}.{head} (click: its circuits)</title></circle>"
        f'<text x="{x(layer):.0f}" y="{y(head) + 4}">{layer}.{head}</text></g>'
        for layer in range(L)
        for head in range(H)
    )
    height = 30 + (H - 1) * row + 30
    return (
        f'<svg class="graph" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" aria-label="composition graph">{"".join(lines)}{nodes}</svg>'
    )


def composition_html(answer: dict, evidence: dict | None = None) -> str:
    """The circuit graph, the strongest edges named, how to read the scores, and (`evidence`: a patching answer of
    the same model) the patching evidence beside them."""
    baseline = answer["baseline"]
    named = "".join(
        f"<li>{e['kind'].upper()}: {e['writer'][0]}.{e['writer'][1]} → {e['reader'][0]}.{e['reader'][1]} "
        f"<b>{e['score']:.3f}</b> ({e['score'] / baseline:.2f}× the baseline)</li>"
        for e in answer["strongest"]
    )
    legend = " ".join(f'<span style="color:{c}">■ {k.upper()}</span>' for k, c in KIND_COLOURS.items())
    side = ""
    if evidence and evidence.get("model") == answer["model"] and evidence.get("path"):
        side = (
            '<div class="evidence"><b>The patching evidence</b> (on the text patched above)'
            f"{path_html(evidence['path'])}</div>"
        )
    elif evidence is None or evidence.get("model") != answer["model"]:
        side = (
            '<div class="evidence"><p>Run <b>Patch</b> above with a receiver head to see, beside these weights-only '
            "scores, which input of the head really carries the circuit on a text.</p></div>"
        )
    return (
        f'<div class="insight circuits composition"><div class="maps"><figure><figcaption>{legend} — edges above '
        f"the random baseline {baseline:.3f}</figcaption>{graph_svg(answer)}</figure>{side}</div>"
        f"<p>Strongest (layer norm weights folded into W_Q, W_K, W_V):</p><ol>{named}</ol>"
        "<p><b>How to read the scores.</b> A composition score ‖A B‖ / (‖A‖ ‖B‖) measures how much of what an earlier "
        "head writes (its OV circuit A) a later head reads with its query, key or value (B). Random matrices of this "
        f"width already score about {baseline:.3f}: only the distance above that baseline means anything, and on a "
        "small model it is modest. On the specimen, the previous-token head 0.2 → the induction head 1.1 is a "
        "K-composition edge only a little above the baseline, and head 0.0 scores about as much: the weights alone "
        "do not single out the previous-token head. Path patching on a text does (the key input restores 1.1's "
        "attention, q and v do not).</p></div>"
    )


def top_row(row: dict) -> str:
    """One source token and the logits it raises most, each with its value."""
    cells = [f"<td>{esc(t['token'])} <small>{t['value']:+.2f}</small></td>" for t in row["top"]]
    return f"<tr><th>{esc(row['source'])}</th>{''.join(cells)}</tr>"


def ov_html(ov: dict) -> str:
    rows = "".join(map(top_row, ov["rows"]))
    if ov["whole"]:
        return (
            f"<figure><figcaption><b>OV circuit</b>: token attended to (rows) × logit raised (columns), all "
            f"{len(ov['tokens'])} tokens (yellow: raised, purple: lowered; ±{ov['scale']:.2f}). Copying score "
            f'<b data-copying="{ov["copying_score"]!r}">{ov["copying_score"]:.3f}</b> (1: it raises what it attends '
            f'to).</figcaption><img class="ov" src="{ov["image"]}" alt="OV circuit">'
            f"<table><tr><th>the text's tokens</th><th colspan='3'>raise most</th></tr>{rows}</table></figure>"
        )
    return (
        "<figure><figcaption><b>OV circuit</b>, the text's tokens' rows (the vocabulary is too large to draw whole): "
        f"the logits each raises most.</figcaption><div class='scroll'><table>{rows}</table></div></figure>"
    )


def ablation_html(ablation: dict | None, layer: int, head: int) -> str:
    if not ablation:
        return ""
    gone = ", ".join(f"{a}.{b}" for a, b in ablation["ablated"])
    figures = "".join(
        f'<figure data-map="{key}"><figcaption><b>{title}</b>: stripe {ablation[f"stripe_{key}"]:.3f}</figcaption>'
        f"{map_table(ablation[key], ablation['tokens'], key)}</figure>"
        for key, title in (("before", f"Head {layer}.{head}"), ("after", f"Head {layer}.{head} with {gone} ablated"))
    )
    return (
        f'<div class="ablation"><p>Head {layer}.{head}\'s map on this text, then again with <b>{esc(gone)}</b> '
        "switched off (zero ablation). Stripe: its mean weight from each repeated token on the token that followed "
        f"its earlier copy, {ablation['stripe_before']:.3f} → <b>{ablation['stripe_after']:.3f}</b>.</p>"
        f'<div class="maps">{figures}</div></div>'
    )


def head_circuit_html(answer: dict) -> str:
    """The chosen head's OV circuit and copying score, its positional QK circuit, and its map with a head ablated."""
    layer, head, qk = answer["layer"], answer["head"], answer["positional_qk"]
    positional = (
        f"<figure><figcaption><b>Positional QK circuit</b>: attention from position embeddings alone, first "
        f"{qk['positions']} positions (rows: the query; yellow: its most attended key). Weight on the previous "
        f"position: {qk['previous_token']:.3f} on average; rows whose top key is the previous position: "
        f"{sum(o == 1 for o in qk['argmax_offset'])} of {qk['positions']}.</figcaption>"
        f'<img class="qk" src="{qk["image"]}" alt="positional QK circuit"></figure>'
    )
    return (
        f'<div class="insight circuits head-circuit" data-layer="{layer}" data-head="{head}">'
        f"<h4>Head {layer}.{head}</h4>"
        f'<div class="maps">{ov_html(answer["ov"])}{positional}</div>'
        f"{ablation_html(answer['ablation'], layer, head)}</div>"
    )


def lesson_section_html(number: int, model: str) -> str:
    """The lesson's circuits step: where to see it on the page, with a link that opens the specimen's example."""
    link = "?" + urlencode({"model": "specimen", "text": SPECIMEN_TEXT, "layer": 1, "head": 1, "step": number})
    return (
        f'<section class="wide" data-step="circuits"><h4>{number}. The induction circuit, in the Circuits views</h4>'
        f'<p>Open <a href="{esc(link)}">“{esc(SPECIMEN_TEXT)}” on the specimen</a> (shown now: the '
        f"{esc(model)} model), then the <b>Circuits</b> section below the head tools: <b>Attribution</b> names 1.1 "
        "as the head that writes “i”; <b>Patch</b> with the corrupted text “Romeo and Julaet, Romeo and Jul” "
        "shows head 1.1 restoring almost all of the answer; on “Then Zorbak spoke. Then Zor” against “Then "
        "Zoxbak spoke. Then Zor”, path patching the clean stream into 1.1's key alone restores most of its "
        "attention on the first “b”, its query or value almost none; <b>Ablate and redraw</b> with 0.2 ablated "
        "shows 1.1's stripe fade; <b>Composition</b> shows the weights' side, barely above chance.</p></section>"
    )
