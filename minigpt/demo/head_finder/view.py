"""The Head Finder drawn: every head's metrics in one sortable table (the chance levels on top), and one head's
dashboard (its metrics against chance, its distance histogram, the corpus windows where it does its role most, its map
on the learner's text). HTML from the endpoints' JSON; the table's sorting and clicks are view.js."""

import html
import math
from urllib.parse import urlencode

import torch

from minigpt.demo.core.attention_maps import Window
from minigpt.demo.core.view import asset, viridis_css
from minigpt.demo.maps.view import figure_body, head_caption
from minigpt.heads.metrics import METRICS
from minigpt.heads.role_scores import above_chance

FINDER_CSS = asset("head_finder/view.css")
FINDER_JS = asset("head_finder/view.js")

HEADINGS = {
    "previous_token": "previous",
    "self": "self",
    "sink": "sink",
    "induction": "induction",
    "entropy": "entropy",
    "distance_mean": "distance",
    "distance_spread": "spread",
    "ablation": "ablation Δloss",
}
ROLE_WORDS = {
    "previous_token": "a previous-token head",
    "self": "a self head",
    "sink": "a sink head (it rests on the first token)",
    "induction": "an induction head",
}


def number(value) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"


def shade(name: str, value, chance: float, largest: float) -> str:
    """A cell's colour: the roles from chance (dark) to 1 (bright); the others against the column's largest value."""
    if value is None or value != value:
        return ""
    if name in ("previous_token", "self", "sink", "induction"):
        strength = (value - chance) / (1 - chance) if chance < 1 else 0.0
    else:
        strength = value / largest if largest > 0 else 0.0
    return viridis_css(max(0.0, strength) ** 0.5)


def finder_html(answer: dict) -> str:
    """The table: one row per head, a column per metric, the chance levels first; a click on a heading sorts."""
    rows, chance = answer["heads"], answer["chance"]
    largest = {name: max((abs(r[name]) for r in rows if r[name] is not None), default=0.0) for name in METRICS}
    headings = "".join(
        f'<th data-sort="1" data-column="{column}" title="{html.escape(answer["definitions"][name])}">'
        f"{HEADINGS[name]}</th>"
        for column, name in enumerate(METRICS, start=3)  # after layer, head and role
    )
    chance_row = "<tr class='chance'><td colspan='2'>even (chance)</td><td></td>" + "".join(
        f"<td>{number(chance[name])}</td>" for name in METRICS
    )
    body = "".join(
        f'<tr data-layer="{r["layer"]}" data-head="{r["head"]}" data-order="{order}">'
        f'<td data-value="{r["layer"]}">{r["layer"]}</td><td data-value="{r["head"]}">{r["head"]}</td>'
        f"<td>{role_cell(r, answer.get('probe'))}</td>"
        + "".join(
            f'<td data-value="{"nan" if r[name] is None else r[name]}" '
            f'style="{shade(name, r[name], chance[name], largest[name])}">{number(r[name])}</td>'
            for name in METRICS
        )
        + "</tr>"
        for order, r in enumerate(rows)
    )
    corpus = answer["corpus"]
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in answer["notes"])
    said = "read from the disk cache" if answer["cached"] else f"measured in {answer['seconds']:.1f} s"
    return (
        f"<div class='finder' data-model='{html.escape(answer['model'], quote=True)}' data-corpus='{corpus['key']}'>"
        f"<p><b>{html.escape(answer['model'])}</b> over {html.escape(corpus['description'])}: {corpus['tokens']:,} "
        f"tokens in {corpus['windows']:,} windows; {answer['queries']:,} queries; ablation over "
        f"{answer['ablation_tokens']:,} predicted tokens (plain loss {answer['plain_loss']:.3f}); {said}.</p>"
        f"{f'<ul>{notes}</ul>' if notes else ''}"
        "<p>Click a heading to sort the heads by it; click a head to open its dashboard below. Colours: the roles "
        "from chance (dark) to 1 (bright); the other columns against their largest value. A role is what the head "
        "does on this corpus; “copies on the probe”: on random tokens written twice (Head roles, lesson step 11) it "
        "is an induction head too.</p>"
        "<div class='scroll'><table><thead><tr><th data-sort='1' data-column='0'>layer</th>"
        f"<th data-sort='1' data-column='1'>head</th><th>role</th>{headings}</tr>{chance_row}</tr></thead>"
        f"<tbody>{body}</tbody></table></div>{definitions_html(answer['definitions'])}</div>"
    )


def role_cell(row: dict, probe: dict | None) -> str:
    """A head's role on the corpus, and "copies on the probe" where random tokens written twice (Head roles, lesson
    step 11) show it doing induction the corpus gives no chance to: two roles, each with what it was measured on."""
    role = html.escape(HEADINGS.get(row["role"], "") if row["role"] else "")
    if probe is None or row["role"] == "induction":
        return role
    score = probe["induction"][row["layer"]][row["head"]]
    if not above_chance(score, probe["chance"]):
        return role
    copies = (
        f'<span class="probe" title="induction {score:.2f} on random tokens written twice (chance '
        f'{probe["chance"]:.2f}): lesson step 11">copies on the probe</span>'
    )
    return f"{role}{' · ' if role else ''}{copies}"


def definitions_html(definitions: dict) -> str:
    items = "".join(f"<dt>{HEADINGS[n]}</dt><dd>{html.escape(d)}</dd>" for n, d in definitions.items())
    return f"<details><summary>What each column measures</summary><dl>{items}</dl></details>"


def rank_words(rank: int | None, heads: int) -> str:
    return "–" if rank is None else f"{rank} of {heads}"


def histogram_svg(edges: list[int], block_size: int, mass: list[float], even: list[float]) -> str:
    """The head's weight at each distance i − j (bars), against a head spreading its weight evenly (dashed)."""
    width, height, bar = 24, 90, 20
    top = max([*mass, *even, 1e-9])
    labels = [str(a) for a in edges]  # a bin's left edge: 0 .. 15 alone, then 16-31, 32-63, ... (its title says)
    spans = [str(a) if b - a == 1 else f"{a}–{b - 1}" for a, b in zip(edges, [*edges[1:], block_size])]
    parts = []
    for i, (m, e, label, span) in enumerate(zip(mass, even, labels, spans)):
        x = i * width
        h, he = height * m / top, height * e / top
        parts.append(
            f'<rect x="{x + 2}" y="{height - h:.1f}" width="{bar}" height="{h:.1f}"><title>distance {span}: '
            f"{m:.3f} (even: {e:.3f})</title></rect>"
            f'<rect class="even" x="{x + 2}" y="{height - he:.1f}" width="{bar}" height="{he:.1f}"/>'
            f'<text x="{x + 12}" y="{height + 12}" text-anchor="middle">{html.escape(label)}</text>'
        )
    size = f'width="{len(mass) * width}" height="{height + 16}"'
    return f'<svg class="histogram" {size} role="img" aria-label="distance histogram">{"".join(parts)}</svg>'


def snippet_html(example: dict) -> str:
    """An example's tokens, each coloured by the head's weight from the query (outlined); the most-weighted key
    underlined; '…' where tokens are left out."""
    pieces = []
    for segment in example["segments"]:
        if pieces or segment[0]["position"] > 0:
            pieces.append('<span class="gap">…</span>')
        for item in segment:
            classes = " ".join(
                c
                for c, on in (
                    ("query", item["position"] == example["query"]),
                    ("top", item["position"] == example["top_key"]),
                )
                if on
            )
            pieces.append(
                f'<span class="{classes}" style="{viridis_css(item["weight"] ** 0.5)}" '
                f'title="position {item["position"]}: weight {item["weight"]:.4f}">{html.escape(item["token"])}</span>'
            )
    return f'<div class="snippet" data-window="{example["window"]}">{"".join(pieces)}</div>'


def circuits_link(answer: dict) -> str:
    """A link that opens the page on this model with this head chosen, at the circuits views (docs/circuits.md)."""
    query = urlencode({"model": answer.get("model", ""), "layer": answer["layer"], "head": answer["head"]})
    return (
        f"<p class='circuits-link'><a href='?{html.escape(query)}#circuits'>This head's circuits</a>: its "
        "attribution, patching, composition with other heads, OV and positional QK circuits.</p>"
    )


def role_sentence(answer: dict) -> str:
    """What the head does, each role with what it was measured on, in the words the lesson and Head roles use: "On
    the model's validation data it is a sink head (it rests on the first token): sink 0.90 against chance 0.07. On
    random tokens written twice (...) its induction is 0.92 (chance 0.01): it copies when something repeats." """
    metrics, chance, corpus = answer["metrics"], answer["chance"], answer["corpus"]["description"]
    roles = "; and ".join(
        f"{ROLE_WORDS[r]}: {HEADINGS[r]} {metrics[r]:.2f} against chance {chance[r]:.2f}" for r in answer["roles"]
    )
    sentence = (
        f"On {corpus} it is {roles}."
        if roles
        else (
            f"On {corpus} no role is clear (none halfway from chance to 1): its strongest is "
            f"{HEADINGS[answer['role']]} ({metrics[answer['role']]:.2f}, chance {chance[answer['role']]:.2f})."
        )
    )
    probe = answer["probe"]
    copies = above_chance(probe["induction"], probe["chance"])
    sentence += (
        f" On random tokens written twice (the Head roles probe, lesson step 11) its induction is "
        f"{probe['induction']:.2f} (chance {probe['chance']:.2f}): "
        + ("it copies when something repeats." if copies else "it does not copy.")
    )
    if copies and "induction" not in answer["roles"]:
        sentence += f" This text gives it little to copy (induction {metrics['induction']:.2f} here)."
    return sentence


def dashboard_html(answer: dict, map_figure: str) -> str:
    """One head's dashboard: what it is, its metrics against chance with their rank, its distance histogram, the
    windows where it does its role most, and its map on the learner's text (`map_figure`)."""
    layer, head, role = answer["layer"], answer["head"], answer["role"]
    verdict = role_sentence(answer)
    rows = "".join(
        f"<tr><th>{HEADINGS[name]}</th><td>{number(value)}</td><td>{number(answer['chance'][name])}</td>"
        f"<td>{rank_words(answer['rank'][name], answer['heads'])}</td></tr>"
        for name, value in answer["metrics"].items()
    )
    examples = "".join(snippet_html(e) for e in answer["examples"]) or "<p>No window shows it.</p>"
    histogram = histogram_svg(
        answer["distance_edges"], answer["block_size"], answer["distance_histogram"], answer["distance_chance"]
    )
    return (
        f"<div class='finder dashboard' data-layer='{layer}' data-head='{head}'>"
        f"<h3>Layer {layer}, head {head}</h3><p>{html.escape(verdict)}</p>{circuits_link(answer)}<div class='columns'>"
        "<table><tr><th>metric</th><th>this head</th><th>even (chance)</th><th>rank</th></tr>"
        f"{rows}</table><div><b>Where its weight falls</b>: its share at each distance i − j from the query (bars; "
        f"dashed: even attention's). From 16 on, a bin holds twice the last: 16–31, 32–63, …<br>{histogram}</div></div>"
        f"<p><b>Where it is most {HEADINGS[role]}</b>: the corpus windows where one query puts the most weight on "
        "its role's key, beyond what even attention would; each token coloured by the weight the query (outlined) "
        f"gives it, the most-weighted underlined.</p>{examples}{map_figure}</div>"
    )


def dashboard_with_map(answer: dict) -> str:
    """The /head_dashboard answer drawn, with the head's map on the learner's text (the answer's `map`) enlarged."""
    weights, tokens = torch.tensor(answer["map"]["weights"]), answer["map"]["tokens"]
    caption = f"{head_caption(answer['layer'], str(answer['head']))} on your text"
    return dashboard_html(answer, f"<figure>{figure_body(weights, tokens, caption, Window.fit(len(tokens)))}</figure>")
