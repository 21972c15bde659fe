"""HTML for the "What does this head do?" section, drawn from the plain-number answers of the API (the `next_tokens`,
`ablate`, `importance`, `head_roles`, `logit_lens` and `compare` endpoints): the page shows what a notebook gets. The
looks in view.css (the tables' in core/view.css); pick_token.js makes a token strip clickable, pick_head.js a table's
heads, values.js shows exact values.

Nothing here computes a model's numbers or knows of Gradio.
"""

import html
from urllib.parse import urlencode

from minigpt.demo.core.view import asset, diverging_css, head_table, map_table, viridis_css
from minigpt.demo.head_tools.words import CLICK_A_CELL, ROLES, job_sentence

INSIGHT_CSS = asset("head_tools/view.css")
PICK_TOKEN_JS = asset("head_tools/pick_token.js")  # a click on a token of a strip picks its position (the `pick` event)
PICK_HEAD_JS = asset("head_tools/pick_head.js")  # a click on a head's cell in a table: that head's map (`pick`)
VALUES_JS = asset("core/exact_value.js") + asset("head_tools/values.js")  # a tap: an exact value; a strip: its rise


def token_strip(tokens: list[str], chosen: int | None = None) -> str:
    """The tokens in a row, each clickable (it picks the position), the chosen one outlined."""
    cells = "".join(
        f'<td class="tok{" chosen" if i == chosen else ""}" data-position="{i}" tabindex="0" role="button" '
        f'title="position {i}">{html.escape(t)}</td>'
        for i, t in enumerate(tokens)
    )
    return f'<div class="strip"><table><tr><th>token</th>{cells}</tr></table></div>'


MODEL_KIND, SAMPLED_KIND = ' data-kind="model"', ' data-kind="sampled"'  # the two columns of next-token bars


def bar_cell(probability: float, width: int, kind: str = "") -> str:
    return (
        f"<td style='text-align:left' data-probability='{probability!r}'{kind}><span class='bar' "
        f"style='width:{max(1, round(probability * width))}px'></span> {probability:.3f}</td>"
    )


def probability_bars(top: list[dict], width: int = 220, sampled: dict | None = None) -> str:
    """The next tokens as bars: the model's probabilities, and beside them (`sampled`) those the sampler draws with
    under its temperature, top-k and top-p."""
    header = "<tr><th>next token</th><th>model's probability</th>"
    if sampled:
        header += (
            f"<th>sampled with temperature {sampled['temperature']:g}, top-k {sampled['top_k'] or 'off'}, "
            f"top-p {sampled['top_p']:g}</th>"
        )
    rows = "".join(
        f"<tr><td>{html.escape(t['token'])}</td>{bar_cell(t['probability'], width, MODEL_KIND)}"
        + (bar_cell(sampled["probabilities"][n], width, SAMPLED_KIND) if sampled else "")
        + "</tr>"
        for n, t in enumerate(top)
    )
    return f"<table>{header}</tr>{rows}</table>"


def next_tokens_html(answer: dict, lens: dict) -> str:
    """The clickable tokens, the top-10 next tokens at the chosen position as bars, the probability of the token that
    follows, and the logit lens at the same position."""
    position, tokens = answer["position"], answer["tokens"]
    follows = answer.get("next")
    actual = (
        f"The token that follows, {html.escape(follows['token'])!s}, got probability {follows['probability']:.4f}."
        if follows
        else "This is the last token: nothing follows it in the text."
    )
    layers = "".join(
        f"<tr><th>{html.escape(step['after'])}</th>"
        + "".join(f"<td>{html.escape(t['token'])} <small>{t['probability']:.2f}</small></td>" for t in step["top"])
        + "</tr>"
        for step in lens["layers"]
    )
    return (
        f'<div class="insight">{token_strip(tokens, position)}'
        f"<p>After token {position} <b>{html.escape(tokens[position])}</b> (click another token to move):</p>"
        f'<div class="maps"><div>{probability_bars(answer["top"], 160, answer.get("sampled"))}<p>{actual}</p></div>'
        f"<div><b>Logit lens</b>: the top-3 tokens the residual stream would predict after each layer (final norm and "
        f"LM head applied to it); the last row is the model's prediction.<table>{layers}</table></div></div></div>"
    )


def loss_strip(tokens: list[str], before: list[float], after: list[float] | None = None, element_id: str = "") -> str:
    """Per-token loss under the tokens (entry t: the loss of token t + 1); with `after`, a second row coloured by the
    change (red: worse, blue: better)."""
    token_cells = "".join(f"<td>{html.escape(t)}</td>" for t in tokens[1:])
    before_cells = "".join(f"<td>{v:.2f}</td>" for v in before)
    first_row = "loss" if after is None else "loss before"
    rows = f"<tr><th>token</th>{token_cells}</tr><tr><th>{first_row}</th>{before_cells}</tr>"
    if after is not None:
        scale = max((abs(a - b) for a, b in zip(after, before)), default=0.0)
        after_cells = "".join(
            f'<td style="{diverging_css(a - b, scale)}" data-change="{a - b:.6f}" '
            f'title="change {a - b:+.4f}">{a:.2f}</td>'
            for a, b in zip(after, before)
        )
        rows += f"<tr><th>loss after</th>{after_cells}</tr>"
    return f'<div class="strip" id="{element_id}"><table>{rows}</table></div>'


def ablation_html(answer: dict) -> str:
    heads = ", ".join(f"{layer}.{head}" for layer, head in answer["heads"]) or "no head"
    change = answer["total_after"] - answer["total_before"]
    tops = "".join(
        f"<div><b>{title} ablation</b> (next token after position {answer['position']})"
        f"{probability_bars(answer[key], 160)}</div>"
        for title, key in (("Before", "top5_before"), ("After", "top5_after"))
    )
    return (
        f'<div class="insight"><p>Ablated ({answer["mode"]}): <b>{heads}</b>. Mean loss over the text '
        f"{answer['total_before']:.4f} → {answer['total_after']:.4f} (<b>{change:+.4f}</b> nats per token).</p>"
        f"{loss_strip(answer['tokens'], answer['loss_before'], answer['loss_after'], 'loss-strip')}"
        f'<div class="maps">{tops}</div></div>'
    )


def generation_html(generation: dict) -> str:
    return (
        f'<div class="insight maps"><div><b>Generated, plain</b> (seed {generation["seed"]})<pre>'
        f"{html.escape(generation['plain'])}</pre></div><div><b>Same seed, heads ablated</b><pre>"
        f"{html.escape(generation['ablated'])}</pre></div></div>"
    )


def importance_html(answer: dict) -> str:
    table = head_table(answer["importance"], "Loss increase when each head alone is ablated", diverging=True, digits=3)
    return (
        f'<div class="insight">{table}'
        f"<p>Plain loss over the text: {answer['loss']:.4f} nats per token ({answer['mode']} ablation). Red: the "
        "model needs the head here; blue: it does better without it.</p></div>"
    )


# Each role: its title, one plain sentence, and a tiny example: five tokens and, per query row, the key it marks.
def example_pattern(tokens: str, marks: dict[int, int]) -> str:
    """A 5 x 5 grid labelled with its tokens: rows are queries, columns keys, the marked key of each row filled,
    future keys grey."""
    label = lambda token: f'<span class="tok">{html.escape(token)}</span>'  # noqa: E731
    rows = ["<div>" + label("") + "".join(label(t) for t in tokens) + "</div>"]  # the keys, above their columns
    for q, token in enumerate(tokens):
        cells = "".join(
            f'<span class="ex {"on" if marks.get(q) == k else "off" if k <= q else "future"}"></span>'
            for k in range(len(tokens))
        )
        rows.append(f"<div>{label(token)}{cells}</div>")
    legend = "rows: the token looking; columns: the tokens it may look at; yellow: where this role looks"
    return f'<div class="example" title="{legend}">{"".join(rows)}</div>'


def probe_sentence(probe: dict) -> str:
    """The probe's losses, worded by which way they went."""
    first, repeated = probe["first_half_loss"], probe["repeated_half_loss"]
    change = (first - repeated) / first if first else 0.0
    if change > 0:
        result = f"the repeated half is {change:.0%} easier: the model uses what it saw (in-context copying)"
    else:
        result = f"the repeated half is no easier ({-change:.0%} harder): the model does not copy from its context"
    return (
        f"Induction probe: {probe['count']} sequences of {probe['length']} random tokens, each repeated twice. Loss on "
        f"the first half {first:.3f}, on the repeated half {repeated:.3f} nats per token: {result}."
    )


def roles_html(answer: dict, click: str | None = CLICK_A_CELL) -> str:
    """Each role: what it is, a tiny example, every head's score (outlined: clearly doing it), chance, the top heads;
    then the induction probe. `click`: what a click on a cell does, said once above the tables (None: nothing)."""
    maps = []
    for role, (title, sentence, tokens, marks) in ROLES.items():
        chance = answer["chance"][role]
        marked = {(h["layer"], h["head"]) for h in answer["above_chance"] if h["role"] == role}
        named = ", ".join(f"{t['layer']}.{t['head']} ({t['score']:.3f})" for t in answer["top_heads"][role])
        threshold = f"{answer['threshold'][role]:.3f}, halfway from chance to 1"
        found = (
            f"Clearly doing it (outlined: at least {threshold}): {len(marked)} head(s)."
            if marked
            else f"No head is clearly doing it (none at {threshold})."
        )
        maps.append(
            f'<div class="role"><p><b>{html.escape(title)}</b>: {html.escape(sentence)}</p>'
            f"{example_pattern(tokens, marks)}"
            f"{head_table(answer[role], 'Score of each head (1: all its attention on the pattern)', marked=marked)}"
            f"<p>Chance (attention spread evenly): {chance:.2f}. {found} Top heads: {named}.</p></div>"
        )
    return (
        f'<div class="insight">{f"<p>{html.escape(click)}</p>" if click else ""}'
        f'<div class="maps">{"".join(maps)}</div>{jobs_html(answer)}{text_induction_html(answer)}'
        f"<p>{html.escape(probe_sentence(answer['probe']))}</p></div>"
    )


MEASURED_ON = {"induction": "the probe's random tokens written twice"}  # every other role: on the text


def jobs_html(answer: dict) -> str:
    """Each head's measured job (`role_scores.measured_jobs`): the role it is furthest above chance on, an offset back
    included (a head that looks two tokens back is named so, not left below the previous-token outline)."""
    lines = [
        f"<li>{html.escape(job_sentence(f'{layer}.{head}', job, MEASURED_ON.get(job['role'], 'your text')))}</li>"
        for layer, row in enumerate(answer["jobs"])
        for head, job in enumerate(row)
    ]
    return f'<div class="role jobs"><p><b>What each head does most</b>, measured:</p><ul>{"".join(lines)}</ul></div>'


INDUCTION_EXAMPLE = "Romeo and Juliet, Romeo and Jul"  # a text that shows induction: a phrase written twice


def text_induction_html(answer: dict) -> str:
    """Induction on the learner's own text (the one definition: queries ending a repeated run of 3 tokens, on the
    token after that run's earlier copy), beside the probe's; a layer-0 head's score said for what it is; a text
    without such a run gets a one-click example."""
    example = "?" + urlencode({"model": answer["model"], "text": INDUCTION_EXAMPLE, "step": 11})
    if "induction_on_text" not in answer:
        return (
            "<p>No token of your text ends a run of 3 tokens seen before, so induction is measured on the probe alone. "
            f'A text that repeats a phrase shows it: <a href="{html.escape(example)}">“{INDUCTION_EXAMPLE}”</a>.</p>'
        )
    scores, chance = answer["induction_on_text"], answer["induction_on_text_chance"]
    best = max((score, layer, head) for layer, row in enumerate(scores) for head, score in enumerate(row))
    probe = answer["induction"][best[1]][best[2]]
    clear = chance + (1 - chance) / 2  # halfway from chance to 1, as every role's outline
    marked = {(layer, head) for layer, row in enumerate(scores) for head, score in enumerate(row) if score >= clear}
    layer_zero = (
        f" Head {best[1]}.{best[2]} is in layer 0: it sees tokens and positions only, so its weight there is a match "
        "of tokens, not induction (which needs an earlier head's work)."
        if best[1] == 0
        else ""
    )
    return (
        f'<div class="role"><p><b>Induction on your text</b>: each head\'s weight, from the '
        f"{answer['repeated_queries']} tokens of your text that end a run of 3 tokens seen before, on the token that "
        "followed that run's earlier copy (what an induction head copies).</p>"
        f"{head_table(scores, 'Score of each head on your text', marked=marked)}"
        f"<p>Chance: {chance:.2f}. Head {best[1]}.{best[2]}: {best[0]:.2f} on your text, {probe:.2f} on the probe's "
        f"random tokens written twice.{layer_zero}</p></div>"
    )


MAX_COMPARED_MAP = 48  # tokens a side of the maps Compare draws as cells; beyond, only the per-head table


def compare_maps_html(answer: dict, maps: dict) -> str:
    """The chosen head's map on each text and their difference (first minus second, over the common positions)."""
    length, layer, head = answer["compared_tokens"], maps["layer"], maps["head"]
    if length > MAX_COMPARED_MAP:
        return f"<p>The maps are drawn for texts of up to {MAX_COMPARED_MAP} common tokens; here {length}.</p>"
    difference = maps["difference"]
    parts = [
        ("First text", map_table(maps["first"], answer["tokens"], "first")),
        ("Second text", map_table(maps["second"], answer["other_tokens"], "second")),
        ("Difference (first − second)", map_table(difference, answer["tokens"][:length], "difference", True)),
    ]
    figures = "".join(f"<figure><figcaption><b>{t}</b></figcaption>{body}</figure>" for t, body in parts)
    told = f"<p><b>Layer {layer}, head {head}</b> (the head chosen above) on both texts:</p>"
    return f"{told}<div class='maps'>{figures}</div>"


def compare_html(answer: dict, maps: dict | None = None) -> str:
    """Compare's answer: `maps` (the chosen layer and head, and its map on each text) drawn beside their difference,
    the per-head table, each text's per-token loss."""
    texts = "".join(
        f"<p><b>{which} text</b>, mean loss {sum(losses) / max(1, len(losses)):.4f}</p>{loss_strip(tokens, losses)}"
        for which, tokens, losses in (
            ("First", answer["tokens"], answer["loss"]),
            ("Second", answer["other_tokens"], answer["other_loss"]),
        )
    )
    title = (
        f"Mean |difference| of each head's map over the first {answer['compared_tokens']} tokens (first text "
        "minus second; colour: against the largest)"
    )
    notes = "".join(f"<p>{html.escape(note)}</p>" for note in answer["notes"])
    table = head_table(answer["difference_per_head"], title, digits=3, relative=True)
    return f'<div class="insight">{notes}{compare_maps_html(answer, maps) if maps else ""}{table}{texts}</div>'


def sampled_html(tokens: list[str], probabilities: list[float | None], note: str) -> str:
    """Generated tokens coloured by the probability they were sampled with (viridis; the prompt uncoloured)."""
    spans = "".join(
        f"<span>{html.escape(t)}</span>"
        if p is None
        else f'<span style="{viridis_css(p)}" title="p = {p:.4f}" data-probability="{p:.6f}">{html.escape(t)}</span>'
        for t, p in zip(tokens, probabilities)
    )
    return f'<div class="insight sampled"><p>{html.escape(note)}</p><p>{spans}</p></div>'
