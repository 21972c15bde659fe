"""The sentences the circuits views say, written from an answer's numbers: what was measured, on which text or prompt
set, and what it found. Nothing here is fixed in advance: a head, an input or a path is named because its number says
so, and a sentence that a number could contradict is not written (a small effect is reported as small, not as absent).
Each answer carries its `findings`; the views draw them. The found circuit's (the `find_circuit` answer's, last): what
was measured (the task, the prompts, the scores, the ablation), what the circuit keeps, its faithfulness with the
metric's three values behind it, and the inputs of the heads that write to the logits; the scores named as estimates,
the faithfulness as what the exact run measured on these prompts. No Gradio, no torch."""

import math

from minigpt.demo.head_tools.words import job_clause

# The section's introduction on the page, and Find the circuit's.
CIRCUITS_INTRO = (
    "## Circuits: how heads work together\nOn the text and model above. Which components write the answer "
    "(attribution), which heads carry it (patching a corrupted text), through which input and from where (path "
    "patching), how heads read each other (composition), and what one head does to tokens and positions. "
    "Click a head in any grid or in the graph to see its circuits."
)
FOUND_INTRO = (
    "### Find the circuit: the fewest edges that keep the behaviour\nEvery edge between the model's parts "
    "scored at once (attribution), the top ones kept until an exact run keeps 90% of the behaviour. Move the "
    "slider to keep more or fewer edges; click a head to select it."
)

PART_WORDS = {"output": "output", "q": "query", "k": "key", "v": "value", "pattern": "attention pattern"}
INPUT_WORDS = {"q": "query", "k": "key", "v": "value"}
CARRIES = 0.3  # an effect at least this share of the answer is said to carry it
NAMED = 0.1  # a part restoring at least this much is named
MOST = 0.5  # a position carrying at least this much of the answer is named where the information sits


def share(value: float) -> str:
    return f"{value:.0%}"


def spread_of(spread, *index, percent: bool = False) -> str:
    """(± the spread over prompts), where there is one."""
    if spread is None:
        return ""
    value = spread
    for i in index:
        value = value[i]
    return f" (± {value:.0%})" if percent else f" (± {value:.2f})"


def over(answer: dict) -> str:
    """ ", over the text and N variants ..." where the answer is a prompt set's mean."""
    prompts = answer.get("prompts") or {}
    return f", {prompts['described']}" if prompts.get("count", 1) > 1 else ""


def ranked(grid: list[list[float]]) -> list[tuple[float, str]]:
    """(value, "L.H") of a layer x head grid, largest first."""
    return sorted(
        ((v, f"{layer}.{head}") for layer, row in enumerate(grid) for head, v in enumerate(row)), reverse=True
    )


def direct_words(value: float, name: str, logit: str) -> str:
    """Which head writes the most of `logit` directly, its sign read: a head's negative share works against it."""
    if value > 0:
        return f"{name} writes the most of {logit} directly"
    return f"none writes for {logit} directly: every head's share works against it, {name}'s the least"


def heads_sentence(answer: dict) -> str:
    part = PART_WORDS[answer["part"]]
    (best, name), (second, other) = ranked(answer["heads"])[:2]
    at = name.split(".")
    spread = spread_of(answer.get("heads_spread"), int(at[0]), int(at[1]), percent=True)
    if best < CARRIES:
        return (
            f"Patching one head's {part} at a time, none restores much of the answer{over(answer)}: at most "
            f"{share(best)}{spread} ({name}). The answer is spread over several heads, or carried by other parts "
            "(the MLPs, the embeddings): the residual stream below says where it sits."
        )
    return (
        f"Patching one head's {part} at a time{over(answer)}, head {name} restores {share(best)}{spread} of the "
        f"answer; the next, {other}, {share(second)}."
    )


def residual_sentence(answer: dict) -> str | None:
    """Where the answer's information sits in the stream, layer by layer: the positions whose patch restores most."""
    said = []
    tokens = answer["tokens"]
    for layer, row in enumerate(answer["residual"]):
        places = [i for i, v in enumerate(row) if v >= MOST]
        if places:
            where = ", ".join(f"{i} ({tokens[i]!r})" for i in places)
            said.append(f"entering layer {layer} at position {where}")
    if not said:
        return None
    return "Patching the residual stream at one position, the answer's information sits " + "; ".join(said) + "."


def input_effects(path: dict, row: int) -> dict[str, float]:
    return dict(zip(path["inputs"], path["effects"][row]))


def path_sentences(path: dict, answer: dict) -> list[str]:
    """What reaches the receiver through which input, from the grid of every sender into q, k and v."""
    receiver = "{}.{}".format(*path["receiver"])
    whole = input_effects(path, len(path["senders"]) - 1)  # the last row: the whole stream entering its layer
    carrying = [name for name, value in whole.items() if value >= CARRIES]
    said = [
        f"Path patching into head {receiver}{over(answer)}: the whole clean stream entering its layer restores "
        + ", ".join(f"{value:+.2f} through its {INPUT_WORDS[name]}" for name, value in whole.items())
        + "."
    ]
    if not carrying:
        said.append(f"No single input of {receiver} carries the answer on this pair.")
    for name in carrying:
        parts = [(input_effects(path, row)[name], sender) for row, sender in enumerate(path["senders"][:-1])]
        parts.sort(reverse=True)
        named = [f"{sender} {value:+.2f}" for value, sender in parts if abs(value) >= NAMED]
        heads = [(value, sender) for value, sender in parts if "." in sender]
        sentence = f"Of the parts that write into what {receiver}'s {INPUT_WORDS[name]} reads, "
        sentence += ("restore the most: " + ", ".join(named)) if named else "none alone restores 0.10 or more"
        if heads:
            top_value, top_head = max(heads)
            sentence += f"; the most any single head restores alone: {top_value:+.2f} ({top_head})"
        said.append(sentence + ".")
    if path.get("two_step"):
        said.append(two_step_sentence(path["two_step"], receiver))
    return said


def two_step_sentence(step: dict, receiver: str) -> str:
    route = f"{step['sender']} → {step['intermediate']} → {receiver}'s {INPUT_WORDS[step['input']]}"
    if abs(step["effect"]) >= NAMED:
        return (
            f"Through an intermediate: {route} restores {step['effect']:+.2f} of the answer: what {step['sender']} "
            f"writes reaches {receiver} through {step['intermediate']}."
        )
    return f"Through an intermediate: {route} restores {step['effect']:+.2f}: little of the answer takes that route."


def estimate_sentence(answer: dict) -> str | None:
    """What is estimated and how, when exact patching would cost the page too many runs."""
    if not answer.get("estimate"):
        return None
    grids = {"heads": "each head's output", "heads_by_position": "each head at each position",
             "residual": "the residual stream"}  # fmt: skip
    named = " and ".join(grids[g] for g in answer["estimated"])
    said = (
        f"Estimates: exact patching would run the model {answer['exact_runs']:,} times on this text, so {named} "
        f"{'is' if len(answer['estimated']) == 1 else 'are'} attribution patching's first-order estimates (one "
        "forward pass on each text, one backward pass)"
    )
    if answer.get("checked"):
        said += ", but for the cells named below, patched exactly"
    if answer.get("residual_exact_at"):
        said += "; the residual stream at the changed positions is exact (there the estimate fails)"
    elif "residual" in answer["estimated"] and answer.get("differing_positions"):
        where = ", ".join(map(str, answer["differing_positions"]))
        said += (
            f"; at the changed position{'s' if len(answer['differing_positions']) > 1 else ''} ({where}) the residual "
            "stream's estimate can be wrong even in sign (the stream there is another token's): click those cells "
            "for their exact value"
        )
        return said + "."
    return said + ". Click a cell for its exact value."


def checked_sentence(answer: dict) -> str | None:
    """The estimated cells the page names, patched exactly, each beside its estimate."""
    checked = answer.get("checked")
    if not checked:
        return None
    said = [f"{c['name']} {share(c['exact'])} (estimated {share(c['estimate'])})" for c in checked]
    return "Patched exactly, as the estimates misjudge the largest effects: " + ", ".join(said) + "."


def exact_cell_sentence(answer: dict) -> str | None:
    cell = answer.get("exact_cell")
    if not cell:
        return None
    exact = 0.0 if round(cell["exact"], 2) == 0 else cell["exact"]  # no "-0%"
    said = f"Exact patching of {cell['name']} restores {share(exact)} of the answer"
    if answer.get("estimate") and cell["grid"] in answer["estimated"] and cell["shown"] is not None:
        said += f" (the estimate shown: {share(cell['shown'])})"
    return said + "."


def patching_findings(answer: dict) -> list[str]:
    found = [s for s in (estimate_sentence(answer), exact_cell_sentence(answer)) if s]
    heads = heads_sentence(answer)
    found.append(
        f"By the estimates, {heads[0].lower()}{heads[1:]}" if "heads" in answer.get("estimated", []) else heads
    )
    if checked_sentence(answer):
        found.append(checked_sentence(answer))
    where = residual_sentence(answer)
    if where:
        found.append(where)
    if answer.get("path"):
        found += path_sentences(answer["path"], answer)
    return found


def attribution_findings(answer: dict) -> list[str]:
    target = repr(answer["token"]["token"])
    if answer.get("prompts", {}).get("count", 1) > 1 and not answer.get("token_given"):
        target = "each prompt's top token"
    (best, name), (second, other) = ranked(answer["heads"])[:2]
    components = sorted(answer["components"], key=lambda c: -abs(c["value"]))
    top = components[0]
    spread = spread_of(answer.get("heads_spread"), *map(int, name.split(".")))
    said = f"Of the heads, {direct_words(best, name, f'the logit of {target}')}{over(answer)}: {best:+.2f}{spread}"
    said += f"; the next, {other}, {second:+.2f}."
    if top["component"] != f"head {name}":
        said += f" The largest direct part of all is {top['component']} ({top['value']:+.2f})."
    return [said, "Direct means straight into the output: a head whose work a later head reads can score little here."]


def ov_sentence(ov: dict, name: str) -> str | None:
    if ov.get("copying_score") is None:
        return None
    read = (
        "read through what the layers before it write"
        if ov["source"] == "effective"
        else "read from the bare embedding"
    )
    copies = ov["copying_score"] >= ov["baseline"]["positive_share"] + (1 - ov["baseline"]["positive_share"]) / 2
    said = (
        f"{name}'s OV circuit, {read}, has a copying score of {ov['copying_score']:.2f} (its eigenvalues' positive "
        f"share; random circuits of its shape: {ov['baseline']['positive_share']:.2f}; Elhage et al.'s Σλ/Σ|λ|: "
        f"{ov['elhage_score']:+.2f}), and {ov['self_top']} of {ov['rows_counted']} tokens raise themselves most: "
    )
    said += "it copies what it attends to." if copies else "it does not copy what it attends to."
    if ov.get("bare_copying_score") is not None and ov["source"] == "effective":
        said += (
            f" From the bare embedding it would score {ov['bare_copying_score']:.2f}: that view leaves out what the "
            "layers before it make of each token."
        )
    return said


def qk_sentence(qk: dict | None, name: str, layer: int) -> str:
    if layer == 0:
        return (
            f"{name} is in layer 0: it reads tokens and positions only, so it cannot match a key's previous token "
            "(what an induction head does needs an earlier head to write it first)."
        )
    if qk is None:
        return f"The vocabulary is too large to measure {name}'s QK circuit over every pair of tokens."
    said = (
        f"Its queries pick, among keys, the one that follows their own token for {share(qk['matching'])} of tokens "
        f"(chance: {qk['chance']:.1%})"
    )
    return said + (": it matches the previous token, as an induction head does." if qk["matching"] >= 0.5 else ".")


def ablation_sentence(ablation: dict | None, name: str) -> str | None:
    if not ablation:
        return None
    gone = ", ".join(f"{a}.{b}" for a, b in ablation["ablated"])
    if not ablation["induction_queries"]:
        return (
            f"With {gone} {ablation['mode']}-ablated: the text has no query ending a repeated run of 3 tokens, so "
            "there is no induction to measure; write a phrase twice."
        )
    queries, before, after = (ablation[key] for key in ("induction_queries", "induction_before", "induction_after"))
    return (
        f"With {gone} {ablation['mode']}-ablated, {name}'s weight on induction targets ({queries} queries ending a "
        f"repeated run of 3 tokens) goes from {before:.2f} to {after:.2f}."
    )


def head_circuit_findings(answer: dict) -> list[str]:
    name = f"Head {answer['layer']}.{answer['head']}"
    said = [ov_sentence(answer["ov"], name), qk_sentence(answer.get("token_qk"), name, answer["layer"])]
    said.append(ablation_sentence(answer.get("ablation"), name))
    return [sentence for sentence in said if sentence]


# ---- the circuit found ----

METHOD_WORDS = {"eap-ig": "EAP-IG (attribution with integrated gradients)", "eap": "EAP (attribution patching)"}
ABLATION_WORDS = {
    "mean": "its mean output over the prompts",
    "corrupted": "its output on the corrupted prompt",
}
TOP_NAMED = 3  # the largest-scored edges named
WRITERS_NAMED = 2  # the heads writing to the logits whose inputs are named


def effect_words(score: float) -> str:
    """What an edge's score says of it: in EAP-IG's convention a score is the metric's estimated change when the edge
    is ablated, so a negative one helps the answer and a positive one works against it."""
    if score == 0:
        return "changes nothing, to first order"
    return "helps the answer" if score < 0 else "works against the answer"


def edge_words(edge: dict) -> str:
    into = f"'s {INPUT_WORDS[edge['input']]}" if edge["input"] else ""
    return f"{edge['sender']} → {edge['receiver']}{into}"


def measured_sentence(answer: dict) -> str:
    prompts = answer["prompts"]
    if answer["task"] == "induction":
        what = f"On {prompts['described']} ({prompts['length']} tokens each, the start token included)"
        corrupted = "each corrupted by another first half"
    else:
        what = f"On “{answer['text']}” {prompts['described']}"
        corrupted = f"against “{answer['corrupted_text']}” and its variants"
    return (
        f"{what}, {corrupted}: every edge of the model's graph scored by {METHOD_WORDS[answer['method']]}, and the "
        f"fewest top edges kept whose exact run reaches {answer['target']:.2f} of the behaviour, every other edge "
        f"carrying, in place of its sender's output, {ABLATION_WORDS[answer['ablation']]}."
    )


def kept_sentence(answer: dict) -> str:
    heads = answer["heads"]
    named = f" ({', '.join(heads)})" if heads and len(heads) <= 12 else ""
    reached = "" if answer["faithfulness"] >= answer["target"] else f", below the target {answer['target']:.2f}"
    return (
        f"The top-k circuit keeps {answer['kept_edges']} of the model's {answer['total_edges']} edges "
        f"({share(answer['kept_edges'] / answer['total_edges'])}) and {len(heads)} of its {answer['total_heads']} "
        f"heads{named}. Its exact run keeps {share(answer['faithfulness'])} of the behaviour (faithfulness "
        f"{answer['faithfulness']:.3f}{reached}): the {answer['metric']} is {answer['model_metric']:.3f} for the "
        f"model, {answer['ablated_metric']:.3f} with every edge ablated"
        + (
            f", {answer['base_metric']:.3f} on the corrupted prompts, which the faithfulness is measured against."
            if answer.get("normalise") == "corrupted"
            else "."
        )
    )


def strongest_sentence(answer: dict) -> str | None:
    edges = sorted(answer["edges"], key=lambda e: -abs(e["score"]))[:TOP_NAMED]
    if not edges:
        return None
    named = ", ".join(f"{edge_words(e)} ({abs(e['score']):.3g}, {effect_words(e['score'])})" for e in edges)
    return (
        "Its largest attribution scores (estimates of how much ablating each edge would change the metric, in its "
        f"units): {named}."
    )


def logits_effect(answer: dict, head: str) -> str:
    """Whether `head`'s edge into the logits helps the answer or works against it, and by how much (estimated)."""
    score = next(e["score"] for e in answer["edges"] if e["sender"] == head and e["receiver"] == "logits")
    if score == 0:
        return effect_words(score)
    moves = "fall" if score < 0 else "rise"
    estimate = f"that edge ablated, the {answer['metric']} would {moves} by {abs(score):.3g}"
    return f"{effect_words(score)} (estimated: {estimate})"


def writers_sentences(answer: dict) -> list[str]:
    """For the heads that write to the logits in the circuit (the largest scores first): which parts feed which of
    their inputs."""
    writers = [e["sender"] for e in sorted(answer["edges"], key=lambda e: -abs(e["score"]))]
    writers = [s for s in dict.fromkeys(writers) if s[0].isdigit() and any(
        e["sender"] == s and e["receiver"] == "logits" for e in answer["edges"]
    )][:WRITERS_NAMED]  # fmt: skip
    said = []
    for head in writers:
        inputs = []
        for into, word in INPUT_WORDS.items():
            senders = [e["sender"] for e in answer["edges"] if e["receiver"] == head and e["input"] == into]
            if senders:
                inputs.append(f"its {word} from {', '.join(senders)}")
        reads = "; ".join(inputs) if inputs else "no kept edge into it (it reads what the ablation puts in)"
        said.append(f"{head} writes to the logits in the circuit and {logits_effect(answer, head)}; into it: {reads}.")
    return said


def set_words(measured: dict) -> str:
    """One prompt set's faithfulness and its spread over its prompts."""
    return (
        f"{measured['prompts']}, {measured['faithfulness']:.3f} ({measured['count']} prompts of {measured['length']} "
        f"tokens, each prompt {measured['low']:.2f} to {measured['high']:.2f})"
    )


def held_out_sentence(answer: dict) -> str | None:
    """The top-k circuit off the prompts it was found on."""
    held = answer.get("held_out") or []
    if not held:
        return None
    base = "every edge ablated" if answer.get("normalise", "ablated") == "ablated" else "the corrupted run"
    low = min(held, key=lambda h: h["faithfulness"])
    verdict = (
        f"it holds off them (lowest: {low['prompts']})"
        if low["faithfulness"] >= answer["target"]
        else f"it falls below the target on {low['prompts']}"
    )
    return (
        f"Faithfulness (normalised against {base}) on the prompts it was found on: {set_words(answer['found_on'])}; "
        f"on prompts it was not found on: {'; '.join(set_words(h) for h in held)}: {verdict}."
    )


def minimal_sentence(answer: dict) -> str | None:
    """The minimal circuit: what the model needs, and what each head adds."""
    minimal = answer.get("minimal")
    if not minimal:
        return None
    sets = ", ".join(["the found-on prompts"] + [name for name in minimal["floors"] if name != "found on"])
    heads = [p for p in minimal["parts"] if p["kind"] == "head"]
    adds = "; ".join(
        f"{p['name']} adds {p['adds']:+.3f} on the found-on prompts"
        + ("" if p["needed_on"] == "found on" else f" and is needed on {p['needed_on']}")
        for p in heads
    )
    ended = "" if minimal["complete"] else " (the pruning stopped at its bound of exact runs: it may go further)"
    return (
        f"Pruned while it stays at the target on {sets}: the minimal circuit keeps {len(minimal['edges'])} edges and "
        f"{len(minimal['heads'])} heads ({', '.join(minimal['heads']) or 'none'}), faithfulness "
        f"{minimal['faithfulness']:.3f} on the found-on prompts{ended}. Without each of its heads: {adds or 'none'}."
        + jobs_sentence(answer, minimal["heads"])
    )


def jobs_sentence(answer: dict, heads: list[str], whose: str = "each") -> str:
    """What each head of a circuit was measured to do on the found-on prompts (`jobs`), where the answer has it: the
    found circuit's heads, and the visitor's (own_circuit)."""
    jobs = answer.get("jobs") or {}
    said = [job_clause(name, jobs[name]) for name in heads if name in jobs]
    return f" What {whose} does on the found-on prompts: {'; '.join(said)}." if said else ""


# A share of the difference between the model's metric and every edge ablated means something only where there is a
# difference: at least log 2 (for the log-probability, the answer twice as likely as with every edge ablated).
BEHAVIOUR_GAP = math.log(2)


def premise_sentence(metric: str, model_metric: float, ablated_metric: float) -> str:
    """Where the model does not do the task on the prompts (its metric within BEHAVIOUR_GAP of every edge ablated),
    the sentence that says so before any faithfulness; else ""."""
    if model_metric - ablated_metric >= BEHAVIOUR_GAP:
        return ""
    return (
        f"First, the premise fails: this model does not do the task on these prompts (the {metric} is "
        f"{model_metric:.3f} for the model and {ablated_metric:.3f} with every edge ablated, less than log 2 = "
        f"{BEHAVIOUR_GAP:.2f} apart), so a faithfulness below, a share of that difference, says nothing of what a "
        "circuit does."
    )


def found_findings(answer: dict) -> list[str]:
    """The sentences under the found circuit, in order: the premise first where it fails."""
    premise = premise_sentence(answer["metric"], answer["model_metric"], answer["ablated_metric"])
    said = [premise, measured_sentence(answer), kept_sentence(answer), held_out_sentence(answer)]
    said.append(minimal_sentence(answer))
    said = [s for s in said if s] + writers_sentences(answer)
    strongest = strongest_sentence(answer)
    return said + ([strongest] if strongest else [])
