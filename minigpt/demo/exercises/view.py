"""HTML for the exercises, drawn from the `exercises` and `grade` endpoints' JSON: a set of questions (each a card: the
question, the learner's answer first: a head in a grid, a number, one of the choices; then the reveal), the reveal of
one graded answer with the view of the measurement that shows why (the heads' grid with the answer and the truth
outlined, the number on its range with the tolerance, the choices' values, path patching's grid, the score over
training), and the card lesson step 13 asks. view.js answers, keeps progress in the browser and exports the
summary; reveal.js hands each grade to the cards. No Gradio, no model."""

import html
import json
from urllib.parse import urlencode

from minigpt.demo.circuits.view import bar_rows, path_html
from minigpt.demo.core.view import asset, error_html, head_table

EXERCISES_CSS = asset("exercises/view.css")
EXERCISES_JS = asset("exercises/view.js")  # the cards: answering (the `answer` event), progress, summary, class link
WALK_FOLDED = "The walk (it answers the question)"  # the circuit walk's fold, under the question it answers
REVEAL_JS = asset("exercises/reveal.js")  # the grades drawn in #exercise-reveal: kept, then handed to the cards


def esc(value) -> str:
    return html.escape(str(value))


def head_grid(answer_with: dict) -> str:
    """Every head as a button, a row per layer."""
    rows = "".join(
        f"<tr><th>layer {layer}</th>"
        + "".join(
            f'<td><button type="button" data-answer="{layer}.{h}" aria-pressed="false">{layer}.{h}</button></td>'
            for h in range(answer_with["n_head"])
        )
        + "</tr>"
        for layer in range(answer_with["n_layer"])
    )
    return f'<div class="ex-heads-box"><table class="ex-heads" aria-label="pick a head">{rows}</table></div>'


def number_input(answer_with: dict) -> str:
    low, high = answer_with["min"], answer_with["max"]
    step = "any" if isinstance(low, float) else "1"
    return (
        f'<label class="ex-number-label">Your prediction ({esc(answer_with["unit"])}, {low:g} to {high:g}): '
        f'<input class="ex-number" type="number" inputmode="decimal" min="{low}" max="{high}" step="{step}"></label>'
        f'<p class="ex-tolerance">Right within {esc(answer_with["why"])}</p>'
    )


def choice_buttons(answer_with: dict) -> str:
    return (
        '<div class="ex-choices" role="group">'
        + "".join(
            f'<button type="button" data-answer="{esc(c["value"])}" aria-pressed="false">{esc(c["label"])}</button>'
            for c in answer_with["choices"]
        )
        + "</div>"
    )


def circuit_input(answer_with: dict) -> str:
    return (
        f'<label class="ex-circuit-label">Your circuit (at most {answer_with["max_heads"]} heads): <input '
        'class="ex-circuit" type="text" maxlength="4000" autocomplete="off" spellcheck="false" '
        'placeholder="0.2 1.1, or embed -> 0.2 v, 0.2 -> 1.1 k, 1.1 -> logits"></label>'
        f'<p class="ex-tolerance">{esc(answer_with["how"])}</p>'
    )


WIDGETS = {"head": head_grid, "number": number_input, "choice": choice_buttons, "circuit": circuit_input}


def card_html(question: dict, model: str, text: str, number: int | None = None, link: str = "") -> str:
    """One question as a card: the words, the answer's widget, Check, and the slot its reveal fills."""
    numbered = f"{number}. " if number else ""
    # The question's id is for links and teachers' summaries (in the link and data-id), not for the learner to read.
    own = f' <a class="ex-own-link" href="{esc(link)}" title="a link to this question alone">link</a>' if link else ""
    return (
        f'<article class="exercise" data-id="{esc(question["id"])}" data-kind="{esc(question["kind"])}" '
        f'data-type="{esc(question["type"])}" data-model="{esc(model)}" data-text="{esc(text)}">'
        f'<p class="ex-prompt"><b>{numbered}</b>{esc(question["prompt"])}</p>'
        f"{WIDGETS[question['kind']](question['answer_with'])}"
        f'<p class="ex-actions"><button type="button" class="ex-check">Check my answer</button>'
        f"{own}</p>"
        '<div class="ex-reveal" aria-live="polite"></div></article>'
    )


def asked_first_html(question: dict, model: str, text: str, body: str, what: str) -> str:
    """A view folded under the question it answers (`what`: the fold's words): the learner predicts first;
    view.js unfolds the view once the answer is graded (or kept from before)."""
    return (
        f'<div class="ex-asked-first"><p class="ex-first"><b>Predict first.</b></p>{card_html(question, model, text)}'
        f'<details class="ex-after"><summary>{esc(what)}</summary>{body}</details></div>'
    )


def question_link(part: dict, question: dict) -> str:
    return "?" + urlencode({"model": part["model"], "text": part["text"], "ids": question["id"]})


def part_html(part: dict, first: int) -> str:
    """One text's questions, numbered from `first`, and what it could not be asked."""
    heading = f"On the {esc(part['model'])} model: “{esc(part['text'])}”"
    if "error" in part:
        return f'<section class="ex-part"><h4>{heading}</h4>{error_html(part["error"])}</section>'
    cards = "".join(
        card_html(q, part["model"], part["text"], first + i, question_link(part, q))
        for i, q in enumerate(part["questions"])
    )
    skipped = "".join(f"<li><b>{esc(s['type'])}</b>: {esc(s['why'])}</li>" for s in part["skipped"])
    unasked = f'<details class="ex-skipped"><summary>Not asked on this text</summary><ul>{skipped}</ul></details>'
    empty = "" if part["questions"] else "<p>No question of these kinds fits this text.</p>"
    return f'<section class="ex-part"><h4>{heading}</h4>{empty}{cards}{unasked if skipped else ""}</section>'


def set_html(parts: list[dict], title: str, link: str) -> str:
    """A set of questions: the learner's progress and what to do with it, then each text's cards."""
    bodies, first = [], 1
    for part in parts:
        bodies.append(part_html(part, first))
        first += len(part.get("questions", []))
    return (
        f'<div class="exercises" data-title="{esc(title)}" data-link="{esc(link)}">'
        f'<div class="ex-head"><h3>{esc(title)}</h3><p class="ex-progress" aria-live="polite"></p>'
        '<p class="ex-tools"><label>Your name (in the summary only): <input class="ex-name" type="text" '
        'maxlength="80" autocomplete="name"></label> <button type="button" class="ex-download">Download my '
        'summary (JSON)</button> <button type="button" class="ex-copy-link">Link for a class</button> '
        '<button type="button" class="ex-clear">Clear my answers</button></p>'
        '<input class="ex-link-box" type="text" readonly hidden aria-label="the link to this set"></div>'
        f"{''.join(bodies)}</div>"
    )


def inside(x: float, anchor: str) -> str:
    """A name's anchor at `x` on the 320-wide line, turned inward near either end so that it stays in the picture."""
    return "start" if x < 40 else "end" if x > 280 else anchor


NAME_WIDTH = 8.0  # px a character of a name under the line takes at 12 px sans-serif, and some ("model": 37 px)


def names_apart(lower: float, higher: float, widths: tuple[float, float], gap: float = 6.0) -> tuple[float, float]:
    """Where the two names under the line start (x, left-aligned), for marks at x `lower` <= `higher`: the lower
    one's name ending at its mark, the higher one's starting at it; where they would overlap (close values, or both
    turned inward at an end of the line), side by side around the two marks, `gap` apart; always inside the 320."""
    first, second = widths
    x1 = min(max(lower - 3 - first, 0.0), 320 - first)
    x2 = min(max(higher + 3, 0.0), 320 - second)
    if x1 + first + gap > x2:
        total = first + gap + second
        x1 = min(max((lower + higher - total) / 2, 0.0), 320 - total)
        x2 = x1 + first + gap
    return x1, x2


def number_picture(question: dict, evidence: dict, answer: float, truth: float) -> str:
    """The range as a line: the tolerance band around the truth, the value before (where there is one, named above
    the line), the answer and the truth marked (named below it, each on its own side of the other, moved apart where
    close values would draw one name over the other: `names_apart`), the range's ends under them."""
    asked = question["answer_with"]
    low, high = asked["min"], asked["max"]
    where = lambda v: 10 + 300 * (v - low) / ((high - low) or 1)  # noqa: E731
    left, right = where(max(low, truth - asked["tolerance"])), where(min(high, truth + asked["tolerance"]))
    band = f'<rect class="band" x="{left:.1f}" y="18" height="12" width="{right - left:.1f}"/>'
    names = [("answer", answer, "you"), ("truth", truth, "model")]
    names.sort(key=lambda name: name[1])  # the lower value's name on the left
    starts = names_apart(where(names[0][1]), where(names[1][1]), tuple(NAME_WIDTH * len(n[2]) for n in names))
    drawn = "".join(
        f'<line class="{kind}" x1="{where(v):.1f}" x2="{where(v):.1f}" y1="14" y2="34"/>'
        f'<text class="{kind}" x="{x:.1f}" y="46" style="text-anchor:start">{label}</text>'
        for (kind, v, label), x in zip(names, starts)
    )
    if "before" in evidence:
        x = where(evidence["before"])
        drawn = (
            f'<line class="before" x1="{x:.1f}" x2="{x:.1f}" y1="14" y2="34"/>'
            f'<text class="before" x="{x:.1f}" y="11" style="text-anchor:{inside(x, "middle")}">before</text>'
        ) + drawn
    return (
        f'<svg class="ex-line" viewBox="0 0 320 62" role="img" aria-label="your answer {answer:g}, the model\'s '
        f'{truth:g}"><line class="axis" x1="10" x2="310" y1="24" y2="24"/>{band}{drawn}'
        f'<text x="10" y="60" class="start">{low:g}</text><text x="310" y="60" class="end">{high:g}</text></svg>'
    )


def curve_picture(evidence: dict) -> str:
    """A score at each logged training step, the threshold as a dashed line."""
    steps, scores = evidence["steps"], evidence["scores"]
    x = lambda s: 30 + 280 * (s - steps[0]) / ((steps[-1] - steps[0]) or 1)  # noqa: E731
    y = lambda v: 90 - 80 * v  # noqa: E731
    points = " ".join(f"{x(s):.1f},{y(v):.1f}" for s, v in zip(steps, scores))
    return (
        '<svg class="ex-curve" viewBox="0 0 320 110" role="img" aria-label="the induction score at each step">'
        f'<polyline points="{points}"/><line class="threshold" x1="30" x2="310" y1="{y(evidence["threshold"]):.1f}" '
        f'y2="{y(evidence["threshold"]):.1f}"/><text x="30" y="106" class="start">step {steps[0]}</text>'
        f'<text x="310" y="106" class="end">step {steps[-1]}</text></svg>'
    )


def evidence_html(graded: dict) -> str:
    """The measurement behind the answer, drawn small."""
    question, evidence = graded["question"], graded["evidence"]
    if "grid" in evidence:
        marked = {tuple(map(int, name.split("."))) for name in [graded["answer"], *graded["accepted"]]}
        title = evidence["title"] + " (outlined: your pick and the answer)"
        return head_table(evidence["grid"], title, evidence.get("signed", True), 2, marked, pickable=False)
    if "steps" in evidence:
        return curve_picture(evidence) + number_picture(question, {}, graded["answer"], graded["truth"])
    if question["kind"] == "number":
        return number_picture(question, evidence, graded["answer"], graded["truth"])
    width = 100 if question["kind"] == "circuit" else 160  # a circuit's three figures: shorter bars
    picture = bar_rows([(item["choice"], item["value"]) for item in evidence["values"]], width=width)
    return f'<div class="circuits">{picture}{path_html(evidence.get("path"))}</div>'


def circuit_verdict(graded: dict) -> str:
    """A circuit's verdict: its measured faithfulness against the question's least."""
    measured = graded["measured"]
    said = f"your circuit keeps {measured['faithfulness']:.3f}"
    if graded["correct"]:
        return f"Right: {said}, at least the {measured['keeps']:.2f} asked."
    minimal = f"the minimal circuit: {measured['minimal']:.3f}"
    return f"Not quite: {said}, less than the {measured['keeps']:.2f} asked ({minimal})."


def reveal_html(graded: dict, asked: str = "") -> str:
    """A graded answer, as the hidden #exercise-reveal holds it (reveal.js hands it to the cards): the verdict,
    the sentence, the link to the view and the picture; its result as data for the learner's progress."""
    question = graded["question"]
    labels = {c["value"]: c["label"] for c in question["answer_with"].get("choices", [])}
    shown = lambda v: f"{v:.3f}" if isinstance(v, float) else labels.get(v, str(v))  # noqa: E731
    verdict = (
        circuit_verdict(graded)
        if question["kind"] == "circuit"
        else f"Right: {esc(shown(graded['answer']))}."
        if graded["correct"]
        else f"Not quite: you said {esc(shown(graded['answer']))}; the model's answer is {esc(shown(graded['truth']))}."
    )
    result = {key: graded[key] for key in ("model", "text", "answer", "truth", "correct", "explanation", "link")} | {
        "id": question["id"],
        "kind": question["kind"],
        "type": question["type"],
        "prompt": question["prompt"],
    }
    return (
        f'<div class="ex-graded {"right" if graded["correct"] else "wrong"}" data-id="{esc(question["id"])}" '
        f'data-asked="{esc(asked)}" data-result="{esc(json.dumps(result))}">'
        f'<p class="ex-verdict">{verdict}</p><p class="ex-explanation">{esc(graded["explanation"])} '
        f'<a href="{esc(graded["link"])}" target="_blank" rel="noopener">Open the view that shows it</a></p>'
        f'<div class="ex-evidence insight">{evidence_html(graded)}</div></div>'
    )


def reveal_error_html(question_id: str, asked: str, message: str) -> str:
    """An answer that could not be graded: the message, in the card that asked."""
    return (
        f'<div class="ex-graded error" data-id="{esc(question_id)}" data-asked="{esc(asked)}">'
        f"{error_html(message)}</div>"
    )
