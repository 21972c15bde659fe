"""The sentences "why does this head attend here?" says (/attention_why), written from its answer's numbers: whether
the head attends to the key at all (its premise), which pair of parts makes the score, what the key side gives in all,
and how the key differs from the runner-up. Nothing fixed in advance: a part is named because its number says so. No
Gradio, no torch."""

ATTENDS = 0.1  # a key with at least this weight is one the head attends to; below it, "little weight" is said
MAKES = 0.5  # an entry with at least this share of a positive score is said to make it ("because")


def part_words(part: str) -> str:
    """A part's name as a sentence says it: 'mlp 0' -> 'MLP 0', '0.2' -> 'head 0.2'."""
    if part == "embed token":
        return "the token embedding"
    if part == "embed position":
        return "the position embedding"
    if part.startswith("mlp "):
        return "MLP " + part[4:]
    if part.startswith("attn bias "):
        return f"layer {part[10:]}'s attention bias"
    if part == "bias":
        return "the constant (the norm's shift and the bias)"
    return "head " + part


def written(part: str, where: str) -> str:
    """'what MLP 0 writes at 'b'', or the constant, which no part writes."""
    return f"{part_words(part)} at {where}" if part == "bias" else f"what {part_words(part)} writes at {where}"


def signed(value: float) -> str:
    return f"{value:+.2f}"


def premise(head: str, key: dict, top: dict) -> str:
    """Whether the head attends to the key: its weight, and the key it weighs most when that is another."""
    if key["weight"] >= ATTENDS:
        return f"{head} attends to {key['token']!r} (key {key['position']}) with weight {key['weight']:.2f}."
    return (
        f"{head} gives {key['token']!r} (key {key['position']}) little weight: {key['weight']:.2g}. It looks at "
        f"{top['token']!r} (key {top['position']}, weight {top['weight']:.2f}), whose score {top['score']:.1f} is "
        f"{top['score'] - key['score']:.1f} higher: below, what holds this key's score where it is."
    )


def made_by_one_pair(key: dict, answer: dict) -> bool:
    """Whether the head attends to the key and the table's largest entry makes most of a positive score."""
    score = answer["score"]
    return key["weight"] >= ATTENDS and score > 0 and answer["largest"][0]["value"] >= MAKES * score


def largest_words(head: str, key: dict, answer: dict) -> str:
    """The table's largest entry, said as the reason where it makes most of a positive score."""
    entry, score = answer["largest"][0], answer["score"]
    pair = (
        f"{written(entry['key_part'], repr(key['token']))} matches {written(entry['query_part'], 'the query')}: "
        f"{entry['value']:.2f} of the score {score:.1f}"
    )
    if made_by_one_pair(key, answer):
        return f"{head} attends to {key['token']!r} ({key['weight']:.2f}) because {pair}."
    return f"The table's largest entry: {pair} (no single pair makes this score)."


def key_side_words(answer: dict) -> str:
    """The key side's largest total, and every other part's together."""
    totals = answer["key_totals"]
    part = max(totals, key=lambda name: abs(totals[name]))
    rest = answer["score"] - totals[part]
    return (
        f"On the key side, {part_words(part)} gives {signed(totals[part])} in all; every other part together "
        f"{signed(rest)}."
    )


def runner_up_words(key: dict, other: dict | None, answer: dict) -> str | None:
    """How the key's score differs from the other key's (the runner-up, or the key weighed most), and the key-side
    part that differs most."""
    if other is None:
        return None
    mine, theirs = answer["key_totals"], other["key_totals"]
    part = max(mine, key=lambda name: abs(mine[name] - theirs[name]))
    which = "The runner-up" if other["weight"] <= key["weight"] else "The key weighed most"
    return (
        f"{which}, {other['token']!r} (key {other['position']}, weight {other['weight']:.2f}), scores "
        f"{other['score']:.1f}, {abs(key['score'] - other['score']):.1f} "
        f"{'less' if other['score'] <= key['score'] else 'more'}; on the key side {part_words(part)} differs most: "
        f"{signed(mine[part])} at {key['token']!r} against {signed(theirs[part])} at {other['token']!r}."
    )


def exact_words(answer: dict) -> str:
    return (
        "Exact with the layer norm's divisor fixed at each position (the query's "
        f"{answer['divisors']['query']:.2f}, the key's {answer['divisors']['key']:.2f}): the table sums to the model's "
        f"score {answer['score']:.3f} up to float32 rounding."
    )


def why_findings(answer: dict) -> list[str]:
    """The sentences of an /attention_why answer, in order: the premise (said within the reason where one pair
    makes the score), the reason, the key side, the runner-up, what is exact."""
    head, key, keys = answer["head_name"], answer["key_info"], answer["keys"]
    top = max(keys, key=lambda k: k["weight"])
    found = [] if made_by_one_pair(key, answer) else [premise(head, key, top)]
    found += [largest_words(head, key, answer), key_side_words(answer)]
    compared = runner_up_words(key, answer["runner_up"], answer)
    return [*found, *([compared] if compared else []), exact_words(answer)]
