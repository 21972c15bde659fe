""" "Why does the head attend here?" drawn from an /attention_why answer (maps/why.py), under the enlarged maps when a
cell is clicked (head.js): the sentences, the table as a picture (its largest entries first, each a bar in a signed
colour: blue raises the score, red lowers it), each side's totals, and the key's totals beside the runner-up key's.
The looks: maps/view.css (.attn-why). Nothing here computes a model's numbers or knows of Gradio."""

import html

from minigpt.demo.maps.words import part_words

RAISES, LOWERS = "#2563eb", "#dc2626"  # a positive entry raises the score, a negative one lowers it


def bar(value: float, largest: float) -> str:
    """A signed bar: its length the value's size against the largest shown, its colour the sign."""
    width = 0 if largest == 0 else 100 * abs(value) / largest
    colour = RAISES if value >= 0 else LOWERS
    return f'<span class="why-bar"><span style="width:{width:.1f}%;background:{colour}"></span></span>'


def bar_rows(rows: list[tuple[str, float]]) -> str:
    """Rows of (label, value) as a list of signed bars, in the order given."""
    largest = max((abs(v) for _, v in rows), default=0)
    return "".join(
        f'<li><span class="why-label">{html.escape(label)}</span>{bar(value, largest)}'
        f'<span class="why-number">{value:+.2f}</span></li>'
        for label, value in rows
    )


def totals_rows(totals: dict) -> list[tuple[str, float]]:
    """A side's totals, largest first."""
    return sorted(totals.items(), key=lambda item: -abs(item[1]))


def compared_html(answer: dict) -> str:
    """The key's key-side totals beside the runner-up's, the parts that differ most first."""
    other = answer["runner_up"]
    if other is None:
        return ""
    mine, theirs = answer["key_totals"], other["key_totals"]
    order = sorted(mine, key=lambda part: -abs(mine[part] - theirs[part]))
    largest = max([abs(v) for v in (*mine.values(), *theirs.values())] or [0])
    rows = "".join(
        f'<tr><th scope="row">{html.escape(part)}</th><td>{bar(mine[part], largest)} {mine[part]:+.2f}</td>'
        f"<td>{bar(theirs[part], largest)} {theirs[part]:+.2f}</td></tr>"
        for part in order
    )
    key, runner = answer["key_info"], other
    head = (
        f"<tr><th>key side</th><th>{html.escape(repr(key['token']))} (key {key['position']}): {key['score']:.2f}</th>"
        f"<th>{html.escape(repr(runner['token']))} (key {runner['position']}): {runner['score']:.2f}</th></tr>"
    )
    return f'<table class="why-compared"><caption>Against the other key</caption>{head}{rows}</table>'


def why_html(answer: dict) -> str:
    """The whole answer: sentences, largest entries, each side's totals, the comparison."""
    key = answer["key_info"]
    title = (
        f"Why {answer['head_name']} looks from {answer['tokens'][answer['query']]!r} (query {answer['query']}) at "
        f"{key['token']!r} (key {key['position']}): score {answer['score']:.2f}, weight {answer['weight']:.3g}"
    )
    findings = "".join(f"<li>{html.escape(sentence)}</li>" for sentence in answer["findings"])
    entries = [
        (f"{entry['query_part']} (query) × {entry['key_part']} (key)", entry["value"]) for entry in answer["largest"]
    ]
    words = ", ".join(f"{part}: {part_words(part)}" for part in answer["parts"] if part_words(part) != part)
    return (
        f'<section class="attn-why" data-query="{answer["query"]}" data-key="{key["position"]}">'
        f"<h4>{html.escape(title)}</h4><ul class='why-findings'>{findings}</ul>"
        f'<div class="why-columns"><div><h5>The largest entries of the table (query part × key part)</h5>'
        f'<ol class="why-bars">{bar_rows(entries)}</ol></div>'
        f'<div><h5>Query side, in all</h5><ol class="why-bars">{bar_rows(totals_rows(answer["query_totals"]))}</ol>'
        f'</div><div><h5>Key side, in all</h5><ol class="why-bars">{bar_rows(totals_rows(answer["key_totals"]))}'
        f"</ol></div></div>{compared_html(answer)}"
        f"<p class='why-note'>Blue raises the score, red lowers it. Every entry is what one part of the stream puts "
        f"into the query times what one part puts into the key, over √D; they sum to the score. Parts: "
        f"{html.escape(words)}. The same numbers: the API's /attention_why.</p></section>"
    )
