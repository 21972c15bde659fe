"""Why a head attends where it does, as plain JSON (/attention_why): `minigpt.heads.qk_attribution`'s split of one
cell's score into query part x key part, each side's totals, every key's score and weight, the runner-up key's totals
beside the key's, and the sentences those numbers support (maps/words.py). The work is bounded: the split holds K x P
x D numbers (keys, parts, head width), at most `work_budgets.WHY_NUMBERS`; the table goes whole into the answer up to
TABLE_PARTS parts a side (GPT-2's last layer: 157), its largest entries always."""

from minigpt.demo.core.texts import TextView
from minigpt.demo.core.work_budgets import why_keys
from minigpt.demo.maps.words import why_findings
from minigpt.errors import VisitorError
from minigpt.heads import qk_attribution

TABLE_PARTS = 160  # a table of up to 160 x 160 entries goes into the answer whole
LARGEST = 12  # the largest entries (by size) listed, largest first


def rounded(values) -> list[float]:
    return [round(float(v), 5) for v in values]


def key_entry(view: TextView, found, position: int) -> dict:
    return {
        "position": position,
        "token": view.tokens[position],
        "score": round(float(found.scores[position]), 5),
        "weight": round(float(found.weights[position]), 6),
    }


def largest_entries(found, table) -> list[dict]:
    P = len(found.parts)
    order = table.flatten().abs().argsort(descending=True)[:LARGEST].tolist()
    return [
        {
            "query_part": found.parts[i // P],
            "key_part": found.parts[i % P],
            "value": round(float(table.flatten()[i]), 5),
        }
        for i in order
    ]


def checked_query(view: TextView, layer: int, query: int) -> None:
    """A query whose split fits the work bound, or a message saying which queries do."""
    most = why_keys(view.lm.model.config, layer)
    if query + 1 > most:
        raise VisitorError(
            f"Why at query {query} would split {query + 1} keys' scores into every part of layer {layer}'s stream: "
            f"this server splits at most {most} keys for this model. Choose a query from 0 to {most - 1}."
        )


def attention_why(view: TextView, layer: int, head: int, query: int, key: int | None) -> dict:
    """The answer for head (layer, head), query and key (checked positions; None: the key the query weighs most)."""
    if key is not None and key > query:
        raise VisitorError(
            f"key {key} comes after the query {query}: it is masked (a future token), so it has no score. Choose a "
            f"key from 0 to {query}."
        )
    checked_query(view, layer, query)
    found = qk_attribution(view.lm.model, list(view.ids), layer, head, query, key)
    key = found.key
    parts, whole = found.parts, len(found.parts) <= TABLE_PARTS
    runner = found.runner_up() if found.weights[key] == found.weights.max() else int(found.weights.argmax())
    runner_up = None
    if runner is not None:
        other = found.table_of(runner)
        runner_up = {
            **key_entry(view, found, runner),
            "query_totals": dict(zip(parts, rounded(other.sum(1)))),
            "key_totals": dict(zip(parts, rounded(other.sum(0)))),
        }
    answer = {
        **view.about,
        "layer": layer,
        "head": head,
        "head_name": f"{layer}.{head}",
        "query": query,
        "key": key,
        "key_info": key_entry(view, found, key),
        "score": round(found.score, 5),
        "weight": round(float(found.weights[key]), 6),
        "parts": parts,
        "table": [rounded(row) for row in found.table] if whole else None,
        "largest": largest_entries(found, found.table),
        "query_totals": dict(zip(parts, rounded(found.query_totals))),
        "key_totals": dict(zip(parts, rounded(found.key_totals))),
        "keys": [key_entry(view, found, position) for position in range(query + 1)],
        "runner_up": runner_up,
        "divisors": {"query": round(float(found.divisors[query]), 5), "key": round(float(found.divisors[key]), 5)},
        "notes": list(view.notes)
        + ([] if whole else [f"The table has {len(parts)} parts a side: its {LARGEST} largest entries are given."]),
    }
    answer["findings"] = why_findings(answer)
    return answer
