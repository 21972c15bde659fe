"""The exercises' words: the section's introduction; and, written from the measurements' numbers, each question's prompt
(what to predict, and what the learner is told before answering) and the one sentence that explains its answer. Nothing
is fixed in advance: a head, an input, a token or a step is named because its number says so. No Gradio, no torch."""

import math

from minigpt.demo.circuits.words import jobs_sentence

INTRO = (
    "## Exercises: predict, then see the model's answer\nQuestions built from the model's own numbers on the text: "
    "which head does what, what a number becomes when a head is ablated, which input carries the answer, and a circuit "
    "to build. Answer first (pick a head, type a number, pick a choice, write a circuit), then check: the reveal shows "
    "the measurement and links to the view that shows it. Your answers stay in this browser; download a summary for a "
    "teacher. Teachers: docs/exercises.md."
)


NO_REPEAT_CHANGE = "the last token but one changed: the text's end repeats nothing earlier"
INPUT_WORDS = {"q": "query (what it looks for)", "k": "key (where it looks)", "v": "value (what it copies)"}


def quoted(token: str) -> str:
    return repr(token)


def runner_up(ranked: list[tuple[float, str]], fmt: str) -> str:
    """ "(next: 0.2, +0.19)" from (value, name) pairs, largest first; nothing with one entry."""
    if len(ranked) < 2:
        return ""
    value, name = ranked[1]
    return f" (next: {name}, {format(value, fmt)})"


def tie_words(tied: list[str]) -> str:
    """What a tie means for the grade, or nothing when one head (or choice) is ahead."""
    if len(tied) < 2:
        return ""
    return f" The measurement ties: {', '.join(tied)} score the same to within 0.1%, so any of them is right."


def previous_token_prompt() -> str:
    return (
        "Which head is the previous-token head on this text: the one that puts the most attention, averaged over its "
        "queries, on the token just before each query? Pick it in the grid."
    )


def previous_token_explained(ranked: list[tuple[float, str]], chance: float, tied: list[str]) -> str:
    best, name = ranked[0]
    return (
        f"Head {name} puts {best:.2f} of its attention on the previous token, averaged over the text's queries, the "
        f"most of any head{runner_up(ranked, '.2f')}; attention spread evenly would put {chance:.2f} there."
        + tie_words(tied)
    )


def writer_prompt(token: str, least: float) -> str:
    return (
        f"The model's most likely next token after this text is {quoted(token)}. Which head writes the most of its "
        "logit directly into the output (direct logit attribution)? Pick it in the grid. (A head that writes at least "
        f"{least:.0%} of the sizes of the logit's direct parts and less than {least:.0%} of them below the most counts "
        "as right too.)"
    )


def writer_explained(
    ranked: list[tuple[float, str]], shares: list[tuple[float, str]], token: str, logit: float, right: list[str], least
) -> str:
    """`ranked`: each head's direct part, `shares`: its share of the sizes of the logit's direct parts, largest
    first; `right`: the heads counted right (within `least` of the largest share, and at least `least`)."""
    best, name = ranked[0]
    share = dict((n, s) for s, n in shares)
    said = (
        f"Head {name} writes {best:+.2f} of the logit of {quoted(token)} ({logit:.2f} in all) directly, "
        f"{share[name]:.0%} of the sizes of its direct parts, the most of any head"
        + (f" (next: {ranked[1][1]}, {ranked[1][0]:+.2f}, {share[ranked[1][1]]:.0%})." if len(ranked) > 1 else ".")
    )
    if len(right) > 1:
        close = ", ".join(f"{n} {share[n]:.0%}" for n in right)
        said += (
            f" The measurement ties at the circuit walk's resolution: {close}, each at least {least:.0%} (the share "
            f"the walk needs to name a writer) and less than {least:.0%} apart, so any of them is right."
        )
    return said


def writer_undominated(best: tuple[float, str], share: float, token: str, logit: float, largest, least) -> str:
    """Why the writer question is not asked: no head dominates (`best`: the largest head's (part, name), `share` its
    share of the sizes of the direct parts; `largest`: the largest direct part's (name, value)), the walk's words."""
    value, name = best
    return (
        f"No head dominates the logit of {quoted(token)} ({logit:.2f}) on this text: the largest head's part is "
        f"{name}'s {value:+.2f}, {share:.0%} of the sizes of its direct parts, below the {least:.0%} the circuit walk "
        f"needs to name a writer; the largest part is {largest[0]}'s ({largest[1]:+.2f}). A text whose end repeats "
        "a phrase the model copies (“Romeo and Juliet, Romeo and Jul”) usually has one."
    )


def importance_prompt(measured: int, length: int) -> str:
    over = "the text" if measured == length else f"the text's first {measured} tokens"
    return (
        f"Zero-ablate one head at a time (its output set to zeros). Which head's ablation raises the model's mean loss "
        f"over {over} the most? Pick it in the grid."
    )


def importance_explained(ranked: list[tuple[float, str]], loss: float, tied: list[str]) -> str:
    best, name = ranked[0]
    return (
        f"Zero-ablating head {name} alone raises the mean loss by {best:+.3f} nats (from {loss:.3f}), the most of any "
        f"head{runner_up(ranked, '+.3f')}." + tie_words(tied)
    )


TOLERANCE_WHY = (
    "±0.1: right when you have the size of the change (none, about half, nearly all); finer than that is more than "
    "anyone reads off a map or a bar, and far coarser than the measurement's own error (float32, about 1e-6)."
)


def ablated_probability_prompt(head: str, token: str, before: float) -> str:
    return (
        f"After this text the model gives its top next token {quoted(token)} a probability of {before:.3f}. Predict "
        f"that probability with head {head} zero-ablated (its output set to zeros)."
    )


def ablated_probability_explained(head: str, token: str, before: float, after: float) -> str:
    moved = "up from" if after > before else "down from"
    return f"With head {head} zero-ablated the model gives {quoted(token)} {after:.3f}, {moved} {before:.3f}."


def ablated_attention_prompt(receiver: str, sender: str, key: int, key_token: str, query_token: str, before: float):
    return (
        f"Head {receiver} puts {before:.3f} of the last token's ({quoted(query_token)}) attention on token {key} "
        f"({quoted(key_token)}, the token after the first copy of the text's repeated end: what an induction head "
        f"copies). Predict that weight with the earlier head {sender} zero-ablated."
    )


def ablated_attention_explained(receiver: str, sender: str, key: int, key_token: str, before: float, after: float):
    moved = "up from" if after > before else "down from"
    said = (
        f"With head {sender} zero-ablated, head {receiver} puts {after:.3f} of the last token's attention on token "
        f"{key} ({quoted(key_token)}), {moved} {before:.3f}"
    )
    if after < before / 2:
        said += f": {sender} writes part of what {receiver} needs to find it"
    return said + "."


def carrying_input_prompt(receiver: str, corrupted: str, what: str) -> str:
    return (
        f"Corrupt the text to “{corrupted}” ({what}). Put the clean text's whole residual stream back into one input "
        f"of head {receiver} at a time (path patching): through which input does it restore the answer the most, "
        "its query, its key or its value?"
    )


def carrying_input_explained(receiver: str, effects: dict[str, float], truth: str, tied: list[str]) -> str:
    said = ", ".join(f"{effects[name]:+.2f} through its {name}" for name in ("q", "k", "v"))
    return (
        f"The whole clean stream restores {said} into head {receiver}: its {INPUT_WORDS[truth]} carries the answer on "
        "this pair." + tie_words(tied)
    )


def ov_top_prompt(head: str, source: str, position: int, weight: float, on_start: float, close: float) -> str:
    most = "most" if weight >= on_start else f"most after the start token ({on_start:.2f})"
    return (
        f"From the last token, head {head} puts its {most} weight on token {position} ({quoted(source)}: "
        f"{weight:.2f}, measured on this text). Its OV circuit says "
        f"how reading a token raises each logit: reading {quoted(source)}, which of these tokens does it raise the "
        f"most? (A token raised less than {close} below the most counts as right too.)"
    )


def close_words(close: float) -> str:
    return f"{close} in a logit changes two tokens' odds by about {math.exp(close) - 1:.0%}"


def ov_top_explained(head: str, source: str, ranked: list[tuple[float, str]], right: list[str], close: float) -> str:
    best, token = ranked[0]
    said = (
        f"Reading {quoted(source)}, head {head}'s OV circuit raises {quoted(token)} the most of every token "
        f"({best:+.2f}){runner_up([(v, quoted(t)) for v, t in ranked], '+.2f')}."
    )
    if len(right) > 1:
        raised = dict((t, v) for v, t in ranked)
        close_ones = ", ".join(f"{quoted(t)} {raised[t]:+.2f}" for t in right)
        said += (
            f" The measurement ties: {close_ones} are less than {close} apart ({close_words(close)}), so any of them "
            "is right."
        )
    return said


def ov_top_all_close(head: str, source: str, ranked: list[tuple[float, str]], close: float) -> str:
    raised = ", ".join(f"{quoted(t)} {v:+.2f}" for v, t in ranked)
    return (
        f"Reading {quoted(source)}, head {head}'s OV circuit raises every choice within {close} of the most ({raised}; "
        f"{close_words(close)}): no token stands out to ask which it raises most."
    )


def formation_prompt(head: str, first: int, last: int, every: int, chance: float, threshold: float) -> str:
    return (
        f"During training, the roles log measured every head's induction score from step {first} to step {last} "
        f"(every {every} steps or so). At which step did head {head}'s score first reach {threshold:.2f}, halfway from "
        f"chance ({chance:.2f}) to 1?"
    )


def formation_explained(head: str, step: int, score: float, before: tuple[int, float] | None, threshold: float) -> str:
    earlier = f", up from {before[1]:.2f} at step {before[0]}" if before else ", at the first evaluation"
    return (
        f"Head {head}'s induction score first reached {threshold:.2f} at step {step}: {score:.2f}{earlier} (the log "
        "measures only at its evaluations, so the crossing lies between those two)."
    )


def formation_tolerance_why(every: int) -> str:
    return (
        f"±{every} steps: the log measures only every {every} steps or so, so the step a score crosses is known to "
        "within one evaluation."
    )


def verdict(correct: bool, answer, truth) -> str:
    return f"Right: {answer}." if correct else f"Not quite: you said {answer}, the model's answer is {truth}."


CIRCUIT_HOW = (
    "Write heads ('0.2 1.1': every edge among them, the embeddings, the MLPs and the logits) or edges and paths "
    "('embed -> 0.2 v, 0.2 -> 1.1 k, 1.1 -> logits': each arrow an edge, an edge into a head naming its input q, k or "
    "v). Every head written counts, in a list or at either end of an edge."
)


def circuit_measured_on(found: dict) -> str:
    prompts = found["prompts"]
    return f"{prompts['described']} ({prompts['length']} tokens each)"


def circuit_prompt(heads: int, keeps: float, found: dict) -> str:
    return (
        f"Build a circuit of at most {heads} head{'s' if heads != 1 else ''} that keeps at least {keeps:.2f} of the "
        f"answer on the induction task: the {found['metric']} on {circuit_measured_on(found)}, every edge you leave "
        f"out carrying its sender's {found['ablation']} output; 1 keeps all of the whole model's, 0 none beyond every "
        f"edge ablated. One exists: the circuit search's minimal circuit has {heads} head{'s' if heads != 1 else ''} "
        f"and keeps {found['minimal']['faithfulness']:.3f}."
    )


def circuit_no_behaviour(found: dict, least: float) -> str:
    return (
        f"This model does not do the induction task yet: the {found['metric']} is {found['model_metric']:.3f} for the "
        f"model and {found['ablated_metric']:.3f} with every edge ablated, less than {least:.2f} apart, so a share of "
        "the difference kept means nothing. Ask it of a model that copies (the specimen, the induction lab)."
    )


def minimal_words(heads: list[str], minimal: dict) -> str:
    return (
        f"the circuit search's minimal circuit (heads {', '.join(heads) or 'none'}, {len(minimal['edges'])} edges) "
        f"keeps {minimal['faithfulness']:.3f}"
    )


def too_many_heads(named: list[str], most: int) -> str:
    return (
        f"Your circuit names {len(named)} heads ({', '.join(named)}): the question asks for at most {most}. Leave out "
        f"{len(named) - most} (every head written counts, in a list or at either end of an edge)."
    )


def circuit_explained(named: list[str], yours: dict, keeps: float, minimal: str, right: bool) -> str:
    """The verdict, then what each of the learner's heads was measured to do on the question's prompts (the answer's
    `jobs`, as /test_circuit words them), then the minimal circuit (`minimal`: its words, its heads' jobs)."""
    heads = f"head{'s' if len(named) != 1 else ''} {', '.join(named)}" if named else "no head"
    verdict = f"at least the {keeps:.2f} asked" if right else f"less than the {keeps:.2f} asked"
    return (
        f"Your circuit ({heads}, {yours['kept_edges']} edges) keeps {yours['found_on']['faithfulness']:.3f} on the "
        f"question's prompts, {verdict}.{jobs_sentence(yours, named, 'each of your heads')} Beside it, {minimal}"
    )
