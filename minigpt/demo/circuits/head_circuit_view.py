"""HTML for one head's circuits (the `head_circuit` answer): what its numbers say first, then its OV circuit over
tokens (the picture with its axes named and the text's tokens marked, and each of the text's tokens' top targets), its
QK circuit's match of previous tokens, its positional QK circuit, and its map before and after earlier heads are
ablated. The looks in view.css. Nothing here computes a model's numbers or knows of Gradio."""

from minigpt.demo.circuits.view import esc, findings_html
from minigpt.demo.core.view import map_table

MAP_SIZE = 316  # px: the OV circuit's picture
MARGIN = 60  # px: room for the axes' labels, in two lanes


def top_row(row: dict) -> str:
    """One source token and the logits it raises most, each with its value."""
    cells = [f"<td>{esc(t['token'])} <small>{t['value']:+.2f}</small></td>" for t in row["top"]]
    return f"<tr><th>{esc(row['source'])}</th>{''.join(cells)}</tr>"


def lanes(places: list[float], gap: float = 10.0) -> list[int]:
    """0 or 1 for each of `places` (sorted): the second lane where a label would touch the one before it."""
    found, last = [], {0: -gap, 1: -gap}
    for place in places:
        lane = 0 if place - last[0] >= gap else 1
        found.append(lane)
        last[lane] = place
    return found


def marked_axes_svg(ov: dict) -> str:
    """The OV picture with its axes named (rows: the token attended to; columns: the logit raised) and a tick with
    the token's label (its first 3 characters, all of it on hover) at the row and the column of each of the text's
    tokens, labels that would touch set a lane further out."""
    V, size = len(ov["tokens"]), MAP_SIZE
    cell = size / V
    tokens = sorted(ov["text_tokens"])
    places = [(token + 0.5) * cell for token in tokens]
    ticks = []
    for token, at, lane in zip(tokens, places, lanes(places)):
        whole = esc(ov["tokens"][token])
        label = esc(ov["tokens"][token][:3])
        ticks.append(
            f'<g><title>{whole}</title><line x1="{MARGIN - 4}" y1="{MARGIN + at:.1f}" x2="{MARGIN}" '
            f'y2="{MARGIN + at:.1f}" class="tick"/><text x="{MARGIN - 6 - 18 * lane}" y="{MARGIN + at + 3.5:.1f}" '
            f'class="row-label">{label}</text><line x1="{MARGIN + at:.1f}" y1="{MARGIN - 4}" x2="{MARGIN + at:.1f}" '
            f'y2="{MARGIN}" class="tick"/><text x="{MARGIN + at:.1f}" y="{MARGIN - 7 - 12 * lane}" '
            f'class="column-label">{label}</text></g>'
        )
    full = MARGIN + size
    return (
        f'<svg class="ov-map" viewBox="0 0 {full} {full + 16}" width="{full}" height="{full + 16}" role="img" '
        'aria-label="OV circuit: rows, the token attended to; columns, the logit it raises">'
        f'<image href="{ov["image"]}" x="{MARGIN}" y="{MARGIN}" width="{size}" height="{size}" '
        'preserveAspectRatio="none" style="image-rendering: pixelated"/>'
        f"{''.join(ticks)}"
        f'<text x="{MARGIN + size / 2}" y="{full + 13}" class="axis">columns: the logit raised →</text>'
        f'<text x="8" y="{MARGIN + size / 2}" class="axis" transform="rotate(-90 8 {MARGIN + size / 2})">'
        "rows: the token attended to →</text></svg>"
    )


def ov_html(ov: dict) -> str:
    rows = "".join(map(top_row, ov["rows"]))
    read = "through what the layers before it write (the effective embedding)" if ov["source"] == "effective" else (
        "from the bare token embedding"
    )  # fmt: skip
    if not ov["whole"]:
        return (
            f"<figure><figcaption><b>OV circuit</b>, read {read}: the text's tokens' rows (the vocabulary is too "
            f"large to draw whole), the logits each raises most.</figcaption><div class='scroll'><table>{rows}"
            "</table></div></figure>"
        )
    baseline = ov["baseline"]
    scores = (
        f'copying score <b data-copying="{ov["copying_score"]!r}">{ov["copying_score"]:.3f}</b> (random circuits: '
        f"{baseline['positive_share']:.3f}); Elhage et al.'s Σλ/Σ|λ| {ov['elhage_score']:+.3f} (random: "
        f"{baseline['elhage']:+.3f}); {ov['self_top']} of {ov['rows_counted']} tokens raise themselves most"
    )
    return (
        f"<figure><figcaption><b>OV circuit</b>, read {read}: all {len(ov['tokens'])} tokens (yellow: raised, "
        f"purple: lowered; ±{ov['scale']:.2f}), the text's tokens marked.</figcaption>{marked_axes_svg(ov)}"
        f"<p class='scores'>{scores}.</p><details><summary>The text's tokens: the logits each raises most</summary>"
        f"<table><tr><th>the text's tokens</th><th colspan='3'>raise most</th></tr>{rows}</table></details></figure>"
    )


def qk_html(answer: dict) -> str:
    qk, positional = answer.get("token_qk"), answer["positional_qk"]
    matching = (
        f"<p><b>QK circuit over tokens</b>: a query's pick among keys that follow each token — its own token for "
        f"<b>{qk['matching']:.0%}</b> of tokens (chance {qk['chance']:.1%}).</p>"
        if qk
        else ""
    )
    previous = sum(offset == 1 for offset in positional["argmax_offset"])
    return (
        f"<figure>{matching}<details><summary><b>Positional QK circuit</b></summary><figcaption>From the bare "
        "position embeddings (what earlier layers write is left out): attention from positions alone, first "
        f"{positional['positions']} positions (rows: the query; yellow: its most attended key). Weight on the "
        f"previous position: {positional['previous_token']:.3f} on average; rows whose top key is the previous "
        f"position: {previous} of {positional['positions']}.</figcaption>"
        f'<img class="qk" src="{positional["image"]}" alt="positional QK circuit"></details></figure>'
    )


def ablation_html(ablation: dict | None, layer: int, head: int) -> str:
    if not ablation:
        return ""
    gone = ", ".join(f"{a}.{b}" for a, b in ablation["ablated"])
    on_targets = lambda key: (  # noqa: E731
        "" if ablation[f"induction_{key}"] is None else f": {ablation[f'induction_{key}']:.3f} on induction targets"
    )
    figures = "".join(
        f'<figure data-map="{key}"><figcaption><b>{title}</b>{on_targets(key)}</figcaption>'
        f"{map_table(ablation[key], ablation['tokens'], key)}</figure>"
        for key, title in (
            ("before", f"Head {layer}.{head}"),
            ("after", f"Head {layer}.{head} with {gone} ablated ({ablation['mode']})"),
        )
    )
    return (
        f'<div class="ablation"><p>Head {layer}.{head}\'s map on this text, then again with <b>{esc(gone)}</b> '
        f'switched off ({esc(ablation["mode"])} ablation).</p><div class="maps">{figures}</div></div>'
    )


def head_circuit_html(answer: dict) -> str:
    """The chosen head's circuits: the sentences first, then its OV and QK circuits and its map with heads ablated."""
    layer, head = answer["layer"], answer["head"]
    return (
        f'<div class="insight circuits head-circuit" data-layer="{layer}" data-head="{head}">'
        f"<h4>Head {layer}.{head}</h4>{findings_html(answer)}"
        f'<div class="maps">{ov_html(answer["ov"])}{qk_html(answer)}</div>'
        f"{ablation_html(answer['ablation'], layer, head)}</div>"
    )
