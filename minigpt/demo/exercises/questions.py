"""The exercises' questions, measured: each asks what one of the page's instruments measures on the text shown, and
carries its truth (the measured value), the numbers the reveal draws and the view that shows it. Every question is
built from the model's measurements on that text, never from an answer key, so it works on any model and text; a text
that cannot support a question says why (`Unasked`).

    head    pick a head: the previous-token head (its score on the text), the head that writes the answer (direct
            logit attribution; asked where one dominates, as the circuit walk decides), the head whose ablation hurts
            most (importance)
    number  predict a value: the top token's probability with a head ablated; a later head's attention on the
            induction key with an earlier head ablated; the training step a head's induction score formed at
    choice  pick one: the input (q, k or v) through which the whole clean stream restores the answer most (path
            patching); the token a head's OV circuit raises most for the token it reads (every choice within OV_CLOSE
            of the most right)
    circuit build one: a circuit of at most N heads that keeps at least X of the induction task's answer, N and X the
            model's own minimal circuit's (the circuit search's, `find_circuit`); graded by measuring it as
            `/test_circuit` does

No Gradio here; the words are words.py's."""

import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import torch

from minigpt.demo.circuits.circuit_walk import CORRUPTIONS, WRITER_SHARE, writer_share
from minigpt.demo.circuits.head_circuit import MAX_OV_VOCABULARY
from minigpt.demo.circuits.measures import (
    check_patch_length,
    one_token_changed,
    path_patching,
)
from minigpt.demo.circuits.words import BEHAVIOUR_GAP, jobs_sentence
from minigpt.demo.core.attention_maps import token_labels
from minigpt.demo.core.prompt_sets import special_tokens
from minigpt.demo.core.texts import TextView, first_upper, repeated_source
from minigpt.demo.core.work_budgets import importance_tokens
from minigpt.demo.exercises import words
from minigpt.errors import VISITORS_MISTAKES
from minigpt.heads import ablated_pass, head_importance, logit_attribution, ov_circuit, patch_heads, read_roles
from minigpt.heads.role_scores import chance_level, clear_threshold, previous_token_pattern, role_score
from minigpt.heads.stated_circuit import stated_heads

KINDS = {
    "previous_token": "head",
    "writer": "head",
    "importance": "head",
    "ablated_probability": "number",
    "ablated_attention": "number",
    "formation_step": "number",
    "carrying_input": "choice",
    "ov_top": "choice",
    "circuit": "circuit",
}  # each question type's kind, in the order a set asks them
TEXT_FREE = {
    "formation_step",
    "circuit",
}  # types whose question does not depend on the text: a set asks them once per model
TIE = 1e-3  # heads (or choices) within this share of the largest are tied: any of them is right
OV_CLOSE = 0.1  # OV choices raised within this of the most are right: it changes two tokens' odds by about 10%
TOLERANCE = 0.1  # of a probability or an attention weight (words.TOLERANCE_WHY says why)
OV_CHOICES = 4  # the OV question's choices: the top token and three of the text's
KEEPS_DIGITS = 2  # the circuit question's "keeps at least": the minimal circuit's faithfulness rounded down to these


class Unasked(Exception):
    """The text (or model) cannot support this question: the message says why."""


@dataclass
class Question:
    """One question and its answer. `params` (with the model and the text's ids) make its id; `accepted`: every
    right answer of a head or choice question (more than one where the measurement ties)."""

    type: str
    params: dict
    prompt: str
    answer_with: dict
    truth: object
    explanation: str
    evidence: dict
    link: dict = field(default_factory=dict)  # the page's link keys (layer, head, step) of the view that shows it
    accepted: list = field(default_factory=list)


def head_name(layer: int, head: int) -> str:
    return f"{layer}.{head}"


def ranked_heads(grid: torch.Tensor) -> list[tuple[float, str]]:
    """(value, "L.H") of a layer x head grid, largest first."""
    return sorted(
        ((float(v), head_name(layer, h)) for layer, row in enumerate(grid.tolist()) for h, v in enumerate(row)),
        key=lambda pair: -pair[0],
    )


def tied(ranked: list[tuple[float, object]], margin: float | None = None) -> list:
    """The names whose value is within `margin` of the largest (default: TIE of the largest's size)."""
    best = ranked[0][0]
    margin = TIE * abs(best) if margin is None else margin
    return [name for value, name in ranked if best - value <= margin]


def at(name: str) -> tuple[int, int]:
    layer, head = name.split(".")
    return int(layer), int(head)


class Measurements:
    """What the questions of one text read, each measured once, when a question first needs it. `corrupt(view,
    before)`: the text with one token changed, as the circuit walk changes it; `log_folder`: where the model's roles
    log is (None: it has none)."""

    def __init__(self, view: TextView, corrupt, log_folder: Path | None, found_circuit=None):
        self.view, self.corrupt, self.log_folder = view, corrupt, log_folder
        self.found_circuit = found_circuit  # () -> the circuit search's answer on the induction task (find_circuit)
        self.model, self.config, self.ids = view.lm.model, view.lm.model.config, list(view.ids)

    def label(self, token: int) -> str:
        return token_labels(self.view.lm.tokenizer, [token])[0]

    def head_choices(self) -> dict:
        L, H = self.config.n_layer, self.config.n_head
        return {"heads": [head_name(layer, h) for layer in range(L) for h in range(H)], "n_layer": L, "n_head": H}

    @cached_property
    def attribution(self):
        return logit_attribution(self.model, self.ids)

    @cached_property
    def previous_token(self) -> tuple[torch.Tensor, float]:
        pattern = previous_token_pattern(len(self.ids))
        return role_score(self.view.recorded.attentions.float(), pattern), chance_level(pattern)

    @cached_property
    def previous_head(self) -> str | None:
        """The previous-token head, where one is clearly doing it (halfway from chance to 1)."""
        scores, chance = self.previous_token
        best, name = ranked_heads(scores)[0]
        return name if len(self.ids) > 2 and best >= clear_threshold(chance) else None

    @cached_property
    def likeliest_previous(self) -> str:
        """The head that attends most to the previous token, clearly or not."""
        return ranked_heads(self.previous_token[0])[0][1]

    @cached_property
    def writer(self) -> str:
        """The head with the largest direct part of the top token's logit (the writer where it dominates)."""
        return tied(ranked_heads(self.attribution.heads))[0]

    @cached_property
    def writer_shares(self) -> list[tuple[float, str]]:
        """Each head's direct part as a share of the sizes of every direct part (the walk's `writer_share`), largest
        first."""
        found = self.attribution
        parts = found.values.tolist()
        return [(writer_share(value, parts, found.bias_term), name) for value, name in ranked_heads(found.heads)]

    def probability_with(self, heads: list[tuple[int, int]], token: int) -> float:
        recorded = self.view.recorded if not heads else ablated_pass(self.model, self.view.recorded, heads, "zero")
        return float(recorded.logits(self.model)[-1].float().softmax(-1)[token])

    @cached_property
    def corrupted(self) -> list[tuple[TextView, str]]:
        """The text with one token changed, for each of the walk's corruptions that changes the answer; on a text
        whose end repeats nothing, the one change it makes (the last token but one), said as such."""
        repeats = repeated_source(self.ids) is not None
        found, self.tried = [], []
        for before, what in CORRUPTIONS if repeats else CORRUPTIONS[:1]:
            try:
                found.append((self.corrupt(self.view, before), what if repeats else words.NO_REPEAT_CHANGE))
            except VISITORS_MISTAKES as error:  # what it tried, said if nothing was found
                self.tried.append(getattr(error, "tried", str(error)))
        return found

    @cached_property
    def carrier(self) -> str:
        """The head whose output, patched from the text into its first corruption, restores the most (the walk's)."""
        if not self.corrupted:
            tried = "; ".join(dict.fromkeys(self.tried))
            raise Unasked(
                f"{first_upper(tried)}. Patching needs a text with another answer: one that repeats a phrase, its "
                "second copy cut short (“Romeo and Juliet, Romeo and Jul”), works best."
            )
        return tied(ranked_heads(patch_heads(self.model, self.ids, self.corrupted[0][0].ids).effects))[0]


def head_question(
    m: Measurements, kind: str, params: dict, prompt: str, ranked, explained, evidence: dict, link, right=None
):
    """A head question on a layer x head measurement: every head to pick from, the tied best right (or `right`)."""
    right = tied(ranked) if right is None else right
    return Question(
        kind,
        params,
        prompt,
        m.head_choices(),
        right[0],
        explained(right),
        evidence,
        {**at_link(right[0]), **link},
        right,
    )


def at_link(name: str) -> dict:
    layer, head = at(name)
    return {"layer": layer, "head": head}


def previous_token(m: Measurements) -> list[Question]:
    scores, chance = m.previous_token
    ranked = ranked_heads(scores)
    if m.previous_head is None:
        raise Unasked(
            f"No head clearly attends to the previous token on this text: the best, {ranked[0][1]}, puts "
            f"{ranked[0][0]:.2f} there, less than halfway from chance ({chance:.2f}) to 1."
        )
    evidence = {"grid": scores.tolist(), "title": "Each head's attention on the previous token", "signed": False}
    explained = lambda right: words.previous_token_explained(ranked, chance, right)  # noqa: E731
    return [head_question(m, "previous_token", {}, words.previous_token_prompt(), ranked, explained, evidence, {})]


def close_writers(shares: list[tuple[float, str]]) -> list[str]:
    """The heads counted right for the writer, from each head's (share, name), largest first: each one the circuit
    walk could name (a share of at least WRITER_SHARE) less than WRITER_SHARE below the largest; none where no head
    dominates (the walk's criterion)."""
    best = shares[0][0]
    return [name for share, name in shares if share >= WRITER_SHARE and best - share < WRITER_SHARE]


def writer(m: Measurements) -> list[Question]:
    """Asked where a head dominates, as the circuit walk decides it; every close head right (close_writers)."""
    found = m.attribution
    ranked, token, shares = ranked_heads(found.heads), m.label(found.token), m.writer_shares
    right = close_writers(shares)
    if not right:
        largest = max(zip(found.labels, found.values.tolist()), key=lambda pair: abs(pair[1]))
        raise Unasked(words.writer_undominated(ranked[0], shares[0][0], token, found.logit, largest, WRITER_SHARE))
    evidence = {"grid": found.heads.tolist(), "title": f"Each head's direct share of the logit of {token!r}"}
    explained = lambda right: words.writer_explained(ranked, shares, token, found.logit, right, WRITER_SHARE)  # noqa: E731
    prompt = words.writer_prompt(token, WRITER_SHARE)
    params, link = {"token": found.token}, {"step": 13}
    return [head_question(m, "writer", params, prompt, ranked, explained, evidence, link, right)]


def importance(m: Measurements) -> list[Question]:
    measured = importance_tokens(m.config, len(m.ids))
    scores, loss = head_importance(m.model, m.view.recorded, "zero", tokens=measured)
    ranked = ranked_heads(scores)
    evidence = {"grid": scores.tolist(), "title": "The rise of the mean loss with each head zero-ablated (nats)"}
    explained = lambda right: words.importance_explained(ranked, loss, right)  # noqa: E731
    prompt = words.importance_prompt(measured, len(m.ids))
    return [head_question(m, "importance", {"tokens": measured}, prompt, ranked, explained, evidence, {})]


def fraction(unit: str) -> dict:
    return {"unit": unit, "min": 0.0, "max": 1.0, "tolerance": TOLERANCE, "why": words.TOLERANCE_WHY}


def ablated_probability(m: Measurements) -> list[Question]:
    """The top token's probability with the head that writes it ablated, and with the head that attends most to the
    previous token ablated."""
    token = m.attribution.token
    label, before = m.label(token), m.probability_with([], token)
    questions = []
    for name in dict.fromkeys((m.writer, m.likeliest_previous)):
        after = m.probability_with([at(name)], token)
        questions.append(
            Question(
                "ablated_probability",
                {"head": name, "token": token},
                words.ablated_probability_prompt(name, label, before),
                fraction("probability"),
                after,
                words.ablated_probability_explained(name, label, before, after),
                {"before": before, "after": after, "what": f"p({label!r})"},
                at_link(name),
            )
        )
    return questions


def ablated_attention(m: Measurements) -> list[Question]:
    """The writer's attention from the last token on the induction key, with the head of an earlier layer that
    attends most to the previous token ablated."""
    receiver, key = m.writer, repeated_source(m.ids)
    if key is None:
        raise Unasked("The text's end is not a repeat: write a phrase twice, the second copy cut short.")
    layer, head = at(receiver)
    if layer == 0:
        raise Unasked(
            f"The head with the largest direct part of the answer's logit, {receiver}, is in layer 0: no earlier head "
            "writes what it reads."
        )
    scores = m.previous_token[0][:layer]
    sender = ranked_heads(scores)[0][1]
    before = float(m.view.recorded.attentions[layer, head, -1, key])
    after = float(ablated_pass(m.model, m.view.recorded, [at(sender)], "zero").attentions[layer, head, -1, key])
    tokens = m.view.tokens
    return [
        Question(
            "ablated_attention",
            {"receiver": receiver, "ablated": sender, "key": key},
            words.ablated_attention_prompt(receiver, sender, key, tokens[key], tokens[-1], before),
            fraction("attention weight"),
            after,
            words.ablated_attention_explained(receiver, sender, key, tokens[key], before, after),
            {"before": before, "after": after, "what": f"{receiver}'s weight on token {key}"},
            at_link(receiver),
        )
    ]


def input_question(receiver: str, corrupted: str, what: str, path: dict) -> Question:
    """Which input of `receiver` the whole clean stream restores the answer through most, on one corruption (a path
    patching answer, `path`): the exercises' question and lesson step 13's."""
    effects = dict(zip(path["inputs"], path["effects"][-1]))
    ranked = sorted(((value, name) for name, value in effects.items()), key=lambda pair: -pair[0])
    right = tied(ranked)
    return Question(
        "carrying_input",
        {"receiver": receiver, "corrupted": corrupted},
        words.carrying_input_prompt(receiver, corrupted, what),
        {"choices": [{"value": name, "label": words.INPUT_WORDS[name]} for name in ("q", "k", "v")]},
        right[0],
        words.carrying_input_explained(receiver, effects, right[0], right),
        {"values": [{"choice": name, "value": effects[name]} for name in ("q", "k", "v")], "path": path},
        {**at_link(receiver), "step": 13},
        right,
    )


def carrying_input(m: Measurements) -> list[Question]:
    try:
        check_patch_length(m.view)
    except VISITORS_MISTAKES as error:
        raise Unasked(str(error)) from None
    receiver = m.carrier
    if at(receiver)[0] == 0:
        raise Unasked(f"Head {receiver} carries the answer, and it is in layer 0: no earlier part feeds its inputs.")
    questions = []
    for corrupted, what in m.corrupted:
        pairs = torch.tensor([[m.ids, list(corrupted.ids)]], device="cpu")
        path = path_patching(m.view, pairs, {"receiver": receiver})
        path["key_token"] = m.view.tokens[path["key_position"]]
        questions.append(input_question(receiver, corrupted.text, what, path))
    return questions


def ov_top(m: Measurements) -> list[Question]:
    """Which token the writer's OV circuit raises most for the token it attends to most from the last token."""
    if m.view.lm.vocab_size > MAX_OV_VOCABULARY:
        raise Unasked(f"The vocabulary is over {MAX_OV_VOCABULARY} tokens: this server reads OV circuits whole below.")
    name, ordinary = m.writer, [t for t in range(m.view.lm.vocab_size) if t not in special_tokens(m.view.lm)]
    layer, head = at(name)
    # The key it was measured to read most (never the repeat's target assumed), the start token aside (it carries no
    # token of the text): the prompt states it with its weight, and the start's when that is more.
    weights = m.view.recorded.attentions[layer, head, -1].float()
    position = 1 + int(weights[1:].argmax())
    source = m.ids[position]
    row = ov_circuit(m.model, layer, head, source="auto")[source]
    top = max(ordinary, key=lambda t: float(row[t]))
    others = [t for t in dict.fromkeys([source, *m.ids]) if t in ordinary and t != top]
    chosen = [top, *others[: OV_CHOICES - 1]]
    ranked = sorted(((float(row[t]), m.label(t)) for t in chosen), key=lambda pair: -pair[0])
    right = tied(ranked, OV_CLOSE)
    if len(right) == len(ranked):
        raise Unasked(words.ov_top_all_close(name, m.label(source), ranked, OV_CLOSE))
    labels = sorted(m.label(t) for t in chosen)
    return [
        Question(
            "ov_top",
            {"head": name, "source": source, "position": position},
            words.ov_top_prompt(name, m.label(source), position, float(weights[position]), float(weights[0]), OV_CLOSE),
            {"choices": [{"value": label, "label": repr(label)} for label in labels]},
            right[0],
            words.ov_top_explained(name, m.label(source), ranked, right, OV_CLOSE),
            {"values": [{"choice": label, "value": value} for value, label in ranked]},
            at_link(name),
            right,
        )
    ]


def formation_step(m: Measurements) -> list[Question]:
    """The training step at which the head with the largest final induction score first passed halfway from chance
    to 1, from the model's roles log."""
    lines = read_roles(m.log_folder) if m.log_folder is not None else []
    if len(lines) < 2:
        raise Unasked("The model has no roles log (train.py writes one: roles_log.jsonl) to ask when a head formed.")
    name = ranked_heads(torch.tensor(lines[-1]["induction"], device="cpu"))[0][1]
    layer, head = at(name)
    steps = [line["step"] for line in lines]
    scores = [line["induction"][layer][head] for line in lines]
    chance = lines[-1]["chance"]["induction"]
    threshold = clear_threshold(chance)
    crossed = next((i for i, s in enumerate(scores) if s >= threshold), None)
    if crossed is None:
        raise Unasked(f"No head's induction score reached halfway from chance to 1 in the roles log (best: {name}).")
    every = max(b - a for a, b in zip(steps, steps[1:]))
    before = (steps[crossed - 1], scores[crossed - 1]) if crossed else None
    number = {"unit": "training step", "min": steps[0], "max": steps[-1], "tolerance": every}
    return [
        Question(
            "formation_step",
            {"head": name},
            words.formation_prompt(name, steps[0], steps[-1], every, chance, threshold),
            {**number, "why": words.formation_tolerance_why(every)},
            steps[crossed],
            words.formation_explained(name, steps[crossed], scores[crossed], before, threshold),
            {"steps": steps, "scores": scores, "threshold": threshold, "chance": chance},
            at_link(name),
        )
    ]


def circuit_text(edges: list[dict]) -> str:
    """A circuit's edges as a learner writes them: "embed -> 0.2 v, 0.2 -> 1.1 k, 1.1 -> logits"."""
    return ", ".join(f"{e['sender']} -> {e['receiver']}" + (f" {e['input']}" if e["input"] else "") for e in edges)


def circuit(m: Measurements) -> list[Question]:
    """Build a circuit of at most N heads that keeps at least X of the induction task's answer: N the heads of the
    model's minimal circuit (the circuit search's), X its measured faithfulness rounded down; asked only where the
    model does the task (its metric clearly above every edge ablated) and its minimal circuit keeps the target."""
    if m.found_circuit is None:
        raise Unasked("This page has no circuit search to measure a circuit against.")
    found = m.found_circuit()
    minimal, described = found["minimal"], found["prompts"]["described"]
    if found["model_metric"] - found["ablated_metric"] < BEHAVIOUR_GAP:
        raise Unasked(words.circuit_no_behaviour(found, BEHAVIOUR_GAP))
    if minimal["faithfulness"] < found["target"] or not minimal["edges"]:
        raise Unasked(
            f"The circuit search's minimal circuit keeps {minimal['faithfulness']:.3f} on {described}, below its "
            f"target {found['target']:.2f}: no circuit is known that keeps enough to ask for one."
        )
    truth = circuit_text(minimal["edges"])
    heads = stated_heads(truth, m.model)
    keeps = math.floor(minimal["faithfulness"] * 10**KEEPS_DIGITS) / 10**KEEPS_DIGITS
    return [
        Question(
            "circuit",
            {"heads": len(heads), "keeps": keeps},
            words.circuit_prompt(len(heads), keeps, found),
            {"max_heads": len(heads), "keeps": keeps, "total_heads": found["total_heads"], "how": words.CIRCUIT_HOW},
            truth,
            words.minimal_words(heads, minimal) + "." + jobs_sentence(found, heads, "each of its heads"),
            {"minimal": {"heads": heads, "faithfulness": minimal["faithfulness"], "edges": len(minimal["edges"])}},
            {"part": "find-circuit"},  # the Circuits section's "Find the circuit", "Test your own circuit" under it
        )
    ]


ASKED = {
    "previous_token": previous_token,
    "writer": writer,
    "importance": importance,
    "ablated_probability": ablated_probability,
    "ablated_attention": ablated_attention,
    "formation_step": formation_step,
    "carrying_input": carrying_input,
    "ov_top": ov_top,
    "circuit": circuit,
}


def corrupted_view(state, view: TextView, before: int = 0) -> TextView:
    """The text with one token changed (circuits.one_token_changed's `before`), as the model reads it."""
    ids, _ = one_token_changed(view, before)
    return state.text_view(view.lm.name, view.lm.tokenizer.decode(ids[1:], skip_special_tokens=False))
