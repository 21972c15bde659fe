"""HTML for the circuits section, drawn from the plain-number answers of the API (`logit_attribution`, `patching`,
`composition`, `head_circuit`): attribution bars and a layer x head grid, patching maps, the composition graph (SVG),
one head's OV and positional QK circuits and its map with an earlier head ablated, and the lesson's circuits step.
The looks in view.css; view.js makes a head (a cell, a node) clickable. Nothing here computes a model's numbers
or knows of Gradio."""

import html

from minigpt.demo.core.view import asset, diverging_css, head_table

CIRCUITS_CSS = asset("circuits/view.css")
CIRCUITS_JS = asset("circuits/view.js")  # a click on a head (a cell of a grid, a node of the graph): the `pick` event

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
        f'<div class="insight circuits attribution">{findings_html(answer)}<p>After token {answer["position"]} '
        f"<b>{esc(answer['tokens'][answer['position']])}</b>: {target} = <b>{answer['logit']:.3f}</b>, the sum of "
        f"every component's direct share below and the final norm's bias ({answer['bias_term']:+.3f}). Largest: "
        f'{named}.</p><div class="maps"><figure><figcaption><b>Embeddings, attention biases, MLPs</b></figcaption>'
        f"{bar_rows(others)}</figure>{grid}</div></div>"
    )


def unsigned(value: float) -> float:
    """A value that rounds to 0.00 without its sign: no "-0.00" in a table."""
    return abs(value) if round(value, 2) == 0 else value


ESTIMATES_SAID = "; estimates in italics: click one for its exact value"


def estimated_cell(cell: str | None) -> str:
    """An estimate's cell: marked, and clickable for its exact value (view.js: the `exact` event)."""
    return "" if cell is None else f' class="estimate" data-cell="{esc(cell)}" tabindex="0" role="button"'


def residual_table(effects: list[list[float]], tokens: list[str], exact_at=None, exact_cells=frozenset()) -> str:
    """Layer x position effects of residual patching, the tokens above their columns; with `exact_at` (a list: the
    grid is estimated), the cells of other positions but `exact_cells` ((layer, position)) marked as estimates, each
    clickable for its exact value."""
    scale = max((abs(v) for row in effects for v in row), default=0.0)
    head = "<tr><th></th>" + "".join(f'<th title="position {i}">{esc(t)}</th>' for i, t in enumerate(tokens)) + "</tr>"

    def cell(layer: int, i: int, v: float) -> str:
        estimate = exact_at is not None and i not in exact_at and (layer, i) not in exact_cells
        said = "estimate" if estimate else "effect"
        marks = estimated_cell(f"resid {layer} {i}" if estimate else None)
        tip = f"layer {layer}, position {i}: {said} {v:.4f}"
        return f'<td style="{diverging_css(v, scale)}" title="{tip}"{marks}>{unsigned(v):.2f}</td>'

    rows = "".join(
        f"<tr><th>layer {layer}</th>" + "".join(cell(layer, i, v) for i, v in enumerate(row)) + "</tr>"
        for layer, row in enumerate(effects)
    )
    said = f" ({ESTIMATES_SAID[2:]})" if exact_at is not None else ""
    return (
        f"<figure><figcaption><b>Residual stream entering each layer, patched at one position</b>{said}</figcaption>"
        f'<div class="scroll"><table class="residual">{head}{rows}</table></div></figure>'
    )


def findings_html(answer: dict) -> str:
    """The sentences the answer's numbers support (words.py), first: what was measured and what it found."""
    items = "".join(f"<li>{esc(sentence)}</li>" for sentence in answer.get("findings", []))
    return f'<ul class="findings">{items}</ul>' if items else ""


def effect_cell(value: float, attention: float | None, scale: float, title: str, cell: str | None = None) -> str:
    """One effect; `cell`: an estimate's, named as exact_cell names it (clickable for its exact value)."""
    tip = f"{title}: {'estimate' if cell else 'effect'} {value:+.4f}"
    tip += "" if attention is None else f", attention on the key {attention:.3f}"
    marks = estimated_cell(cell)
    return f'<td style="{diverging_css(value, scale)}" title="{esc(tip)}"{marks}>{unsigned(value):+.2f}</td>'


def path_table(path: dict) -> str:
    """Path patching's grid: a row per sender, a column per input of the receiver (q, k, v), the effect in each cell
    (the receiver's attention on the key on hover), the spread over prompts beside it where there is one."""
    spread = path.get("effects_spread")
    scale = max((abs(v) for row in path["effects"] for v in row), default=0.0) or 1.0
    rows = []
    for row, sender in enumerate(path["senders"]):
        cells = "".join(
            effect_cell(path["effects"][row][column], path["attention"][row][column], scale, f"{sender} into {into}")
            + ("" if spread is None else f'<td class="spread">±{spread[row][column]:.2f}</td>')
            for column, into in enumerate(path["inputs"])
        )
        whole = ' class="whole"' if row == len(path["senders"]) - 1 else ""
        rows.append(f'<tr data-sender="{esc(sender)}"{whole}><th>{esc(sender)}</th>{cells}</tr>')
    columns = "".join(f"<th>{into}</th>" + ("" if spread is None else "<th></th>") for into in path["inputs"])
    return f"<table class='grid'><tr><th>sender</th>{columns}</tr>{''.join(rows)}</table>"


def path_html(path: dict | None) -> str:
    """Every sender into each of the receiver's q, k and v: the effect on the answer in each cell (the receiver's
    attention on the key in its tooltip), the whole stream last, and the two-step path where one was asked for."""
    if not path:
        return ""
    layer, head = path["receiver"]
    step = path.get("two_step")
    two = (
        f'<p class="two-step">Two-step: {esc(step["sender"])} → {esc(step["intermediate"])} → {layer}.{head}\'s '
        f"{step['input']}: <b>{step['effect']:+.3f}</b></p>"
        if step
        else ""
    )
    return (
        f'<figure class="path"><figcaption><b>Path patching into head {layer}.{head}</b>: each sender\'s clean output '
        f"fed to one input of the head alone (rows: sender; columns: its query, key, value). Cell: the share of the "
        f"answer restored. Its attention from the last query on key {path['key_position']} "
        f"({esc(repr(path['key_token']))}): {path['attention_clean']:.3f} clean, {path['attention_corrupted']:.3f} "
        f"corrupted (each cell's patched value on hover).</figcaption><div class='scroll'>{path_table(path)}</div>"
        f"{two}<p>'resid {layer}' is the whole clean stream entering layer {layer}; every other head reads the "
        "corrupted text.</p></figure>"
    )


def corrupted_html(answer: dict) -> str:
    """The corrupted text the patching ran on, and where it differs from the text."""
    differing = answer.get("differing_positions", [])
    changes = ", ".join(
        f"{i}: {esc(repr(answer['tokens'][i]))} → {esc(repr(answer['corrupted_tokens'][i]))}" for i in differing
    )
    count = f"{len(differing)} position{'s' if len(differing) != 1 else ''} differ{'s' if len(differing) == 1 else ''}"
    return f'<p class="corrupted">Corrupted text: “{esc(answer["corrupted_text"])}” ({count}: {changes}).</p>'


def checked_cells(answer: dict, grid: str) -> set[tuple[int, ...]]:
    """The cells of an estimated grid that hold exact values (patched exactly: `checked`)."""
    return {tuple(c["index"]) for c in answer.get("checked") or [] if c["grid"] == grid}


def clickable(estimated: bool, exact: set, layer: int, head: int, position: int) -> str | None:
    """An estimated cell's name for a click (exact_cell), None where the cell holds an exact value."""
    return f"{layer}.{head} {position}" if estimated and (layer, head, position) not in exact else None


def by_position_html(answer: dict, threshold: float = 0.05) -> str:
    """Each head at each position, for the heads that matter somewhere (an effect of `threshold` or more)."""
    cells, estimated = answer.get("heads_by_position"), "heads_by_position" in answer.get("estimated", [])
    if not cells:
        return ""
    exact = checked_cells(answer, "heads_by_position")
    tokens = answer["tokens"]
    shown = [
        (layer, head, row) for layer, heads in enumerate(cells) for head, row in enumerate(heads)
        if max(abs(v) for v in row) >= threshold
    ]  # fmt: skip
    if not shown:
        return ""
    scale = max(abs(v) for _, _, row in shown for v in row) or 1.0
    header = "<tr><th></th>" + "".join(f'<th title="position {i}">{esc(t)}</th>' for i, t in enumerate(tokens))
    rows = "".join(
        f'<tr><th class="pick" data-layer="{layer}" data-head="{head}" tabindex="0" role="button">{layer}.{head}</th>'
        + "".join(
            effect_cell(v, None, scale, f"{layer}.{head} at position {i}", clickable(estimated, exact, layer, head, i))
            for i, v in enumerate(row)
        )
        + "</tr>"
        for layer, head, row in shown
    )
    return (
        "<figure><figcaption><b>Each head patched at one position</b> (the heads with an effect of 0.05 or more "
        f"somewhere{ESTIMATES_SAID if estimated else ''})</figcaption>"
        f"<div class='scroll'><table class='residual'>{header}</tr>{rows}</table></div></figure>"
    )


PART_TITLES = {"output": "output", "q": "query", "k": "key", "v": "value", "pattern": "attention pattern"}


def patching_html(answer: dict) -> str:
    """What the numbers say, the corrupted text used, the head map of the chosen part, each head at each position,
    path patching's grid and the residual map."""
    clean, corrupted = answer["clean_answer"]["token"], answer["corrupted_answer"]["token"]
    estimated = answer.get("estimated", [])
    title = f"Each head's {PART_TITLES[answer['part']]} patched alone (click a head: its circuits)"
    if "heads" in estimated:
        title = f"Each head's output patched alone, estimated by {answer['method']} (click a head: its circuits)"
    grid = head_table(answer["heads"], title, True, 3)
    notes = "".join(f"<p>{esc(note)}</p>" for note in answer["notes"])
    exact_at = (answer.get("residual_exact_at") or []) if "residual" in estimated else None
    return (
        f'<div class="insight circuits patching">{findings_html(answer)}{corrupted_html(answer)}{notes}<p>Clean text '
        f"predicts {esc(repr(clean))}, corrupted text {esc(repr(corrupted))}. LD = logit({esc(repr(clean))}) − "
        f"logit({esc(repr(corrupted))}): {answer['clean_difference']:.3f} on the clean text, "
        f"{answer['corrupted_difference']:.3f} on the corrupted one. Each cell: (LD patched − LD corrupted) / "
        "(LD clean − LD corrupted): 1 restores the clean answer, 0 changes nothing.</p>"
        f'<div class="maps">{grid}{path_html(answer["path"])}</div>{by_position_html(answer)}'
        f"{residual_table(answer['residual'], answer['tokens'], exact_at, checked_cells(answer, 'residual'))}</div>"
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
        f"width already score about {baseline:.3f}: only the distance above that baseline means anything. The scores "
        "come from the weights alone and compare single heads: they miss a route through an MLP, and they do not say "
        "what a text makes the heads do. Path patching (the grid of senders above) measures it on a text.</p></div>"
    )
