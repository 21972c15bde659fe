"""A lesson step as HTML: the block drawn as a diagram with "you are here", the step's words at the chosen depth, what
to try and the question the view answers, then the step view's own sections for it (lesson/steps_view.py, drawn from the
`step` endpoint's JSON), the head roles (the `head_roles` endpoint's JSON) or where the model's weights are. A click on
a box of the diagram opens the lesson step that explains it (view.js). No Gradio, no model."""

import html
from urllib.parse import urlencode

from minigpt.demo.circuits.circuit_walk_view import walk_html
from minigpt.demo.circuits.view import SPECIMEN_TEXT
from minigpt.demo.core.view import asset
from minigpt.demo.exercises.view import EXERCISES_JS, WALK_FOLDED, asked_first_html
from minigpt.demo.head_tools.view import roles_html
from minigpt.demo.lesson.steps_view import heading_html, section_html
from minigpt.demo.lesson.words import LESSON, LessonStep

LESSON_CSS = asset("lesson/view.css")
LESSON_JS = asset("core/exact_value.js") + asset("lesson/view.js") + EXERCISES_JS  # step 13's question: exercises'


# The diagram's boxes: (box, label, the lesson step it opens); in reading order, each list a column or a row.
OUTSIDE_BEFORE = [("tokens", "text → tokens", 1), ("embed", "token embedding + position embedding", 1)]
BLOCK_BEFORE = [("attn_norm", "layer norm (attn_norm)", 9)]
ATTENTION = [
    ("qkv", "q, k, v", 3),
    ("scores", "q·k / √D", 4),
    ("softmax", "mask, softmax", 5),
    ("dropout", "dropout", 6),
    ("sum", "Σ w·v, out_proj", 7),
]
BLOCK_AFTER = [
    ("add_attention", "+ (residual)", 7),
    ("mlp_norm", "layer norm (mlp_norm)", 9),
    ("mlp", "MLP: fc_in → GELU → out_proj", 9),
    ("add_mlp", "+ (residual)", 9),
]
OUTSIDE_AFTER = [("final", "final layer norm → LM head", 10), ("probs", "softmax: next-token probabilities", 10)]


def box_html(box: str, label: str, lesson: int, here: tuple[str, ...]) -> str:
    marked = box in here
    you = '<span class="you">you are here</span>' if marked and box == here[0] else ""
    return (
        f'<div class="box{" here" if marked else ""}" data-box="{box}" data-lesson="{lesson}" '
        f'title="lesson step {lesson}">{html.escape(label)}{you}</div>'
    )


def diagram_html(here: tuple[str, ...], sizes: dict, layer: int, head: int) -> str:
    """The model as boxes, top to bottom, the boxes of `here` marked: what a lesson step is about."""
    boxes = lambda parts: "".join(box_html(*part, here) for part in parts)  # noqa: E731
    attention_here = "attention" in here
    you = '<span class="you">you are here</span>' if attention_here and here[0] == "attention" else ""
    attention = (
        f'<div class="frame attention{" here" if attention_here else ""}" data-box="attention" data-lesson="2">'
        f'<span class="frame-label">attention: {sizes["H"]} heads (head {head} shown){you}</span>'
        f'<div class="row">{boxes(ATTENTION)}</div></div>'
    )
    block = (
        f'<div class="frame"><span class="frame-label">block × {sizes["L"]} (layer {layer} shown)</span>'
        f"{boxes(BLOCK_BEFORE)}{attention}{boxes(BLOCK_AFTER)}</div>"
    )
    return f'<div class="diagram">{boxes(OUTSIDE_BEFORE)}{block}{boxes(OUTSIDE_AFTER)}</div>'


def weights_html(counts: list[tuple[str, int]], model: str) -> str:
    """Where the model's weights are: a count per part and its share, as bars."""
    total = sum(count for _, count in counts) or 1
    shared = " (none of its own: it reuses the token embedding, transposed)"
    rows = "".join(
        f'<tr><td class="tok">{html.escape(part)}{shared if part == "LM head" and not count else ""}</td>'
        f'<td data-part="{html.escape(part)}">{count:,}</td>'
        f'<td><span class="bar" style="width:{max(1, round(count / total * 200))}px"></span> {count / total:.0%}</td>'
        "</tr>"
        for part, count in counts
    )
    return (
        f'<section class="wide" data-step="weights"><h4>12. The weights of the {html.escape(model)} model</h4>'
        f"<table><tr><th>part</th><th>weights</th><th>share</th></tr>{rows}</table>"
        f"<p>{total:,} weights in all, every one set by training.</p></section>"
    )


def words_html(number: int, step: LessonStep, depth: str) -> str:
    words = step.plain if depth == "plain" else step.formulas
    return (
        f'<div class="words"><h3>Step {number} of {len(LESSON)}: {html.escape(step.title)}</h3>'
        f'<p>{html.escape(words)}</p><p class="try"><b>Try this:</b> {html.escape(step.try_this)}</p>'
        f'<p class="question"><b>The question this view answers:</b> {html.escape(step.question)}</p></div>'
    )


def lesson_html(
    number: int,
    depth: str,
    numbers: dict,
    roles: dict | None = None,
    weights: list | None = None,
    roles_of: str = "",
    text: str = "",
    walk: dict | str | None = None,
    question: dict | None = None,
) -> str:
    """Lesson step `number` on the step view's answer `numbers` (of `text`); `roles` (the head_roles answer of the
    model named `roles_of`) for step 11, `weights` (block_steps.parameter_counts) for step 12, `walk` (the
    circuit_walk answer on the text, or why it could not run) and the `question` it answers (exercises.walk_question)
    for step 13."""
    step = LESSON[number - 1]
    parts = []
    for name in step.sections:
        if name == "roles":
            parts.append(roles_section(number, roles, roles_of, numbers["model"], text))
        elif name == "weights":
            parts.append(weights_html(weights, numbers["model"]))
        elif name == "circuits":
            parts.append(walk_section(number, walk, numbers["model"], text, question))
        else:
            parts.append(section_html(numbers, name, number, depth, explained=False))
    diagram = diagram_html(step.boxes, numbers["sizes"], numbers["layer"], numbers["head"])
    coloured = not {"roles", "weights", "circuits"} & set(step.sections)
    return (
        f'<div class="lesson" data-lesson-step="{number}" data-depth="{depth}">'
        f'<div class="lesson-top">{diagram}{words_html(number, step, depth)}</div>'
        f'<div class="steps">{digits_switch(coloured)}{heading_html(numbers, coloured=False)}{"".join(parts)}</div>'
        "</div>"
    )


def digits_switch(coloured: bool) -> str:
    """Pictures first: the lesson's vectors are colour strips (a number's colour: its sign and size) until the learner
    asks for the digits; the switch (view.js) keeps its choice over steps and redraws."""
    if not coloured:
        return ""
    return (
        '<div class="digits-bar"><button type="button" class="digits-switch" aria-pressed="false">Show numbers</button>'
        '<span class="digits-hint pictures">Each square or slice is a number: red +, blue −, stronger when larger. '
        "Tap one for its value.</span>"
        '<span class="digits-hint numbers">Rounded to 3 decimals: tap or hover a number for its exact value.</span>'
        "</div>"
    )


def roles_section(number: int, roles: dict, roles_of: str, model: str, text: str) -> str:
    """The head roles of `roles_of` on `text`; when that is not the model shown (`model`), a link that opens it, and no
    cell that would select a head of another model (view.js picks only in a section marked data-pick)."""
    own = roles_of == model
    if own:  # the roles say once what a click does
        note, click = "", "Click a cell to see that head's map and follow it through the lesson."
    else:
        link = "?" + urlencode({"model": roles_of, "text": text, "step": number})
        note = (
            f"<p>The {html.escape(roles_of)} model was trained to show these circuits; the diagram and heading above "
            f'are of the {html.escape(model)} model. <a href="{html.escape(link)}">Open this text on '
            f"{html.escape(roles_of)}</a> to see its maps and follow its heads.</p>"
        )
        click = None
    return (
        f'<section class="wide" data-step="roles"{" data-pick" if own else ""}><h4>{number}. Head roles of the '
        f"{html.escape(roles_of)} model on this text</h4>{note}{roles_html(roles, click=click)}</section>"
    )


def walk_section(number: int, walk: dict | str | None, model: str, text: str, question: dict | None = None) -> str:
    """Lesson step 13's own picture: the circuit walk on the text shown (its measured sentences and numbers), or why
    it could not run, and a link to the specimen's example for a text without a repeat. With a `question` (the one
    the walk answers), the learner answers it first: the walk stays folded until then (exercises/view.js unfolds it)."""
    link = "?" + urlencode({"model": "specimen", "text": SPECIMEN_TEXT, "layer": 1, "head": 1, "step": number})
    example = f'<a href="{html.escape(link)}">“{html.escape(SPECIMEN_TEXT)}” on the specimen</a>'
    if not isinstance(walk, dict):
        body = f"<p>{html.escape(str(walk or 'The walk did not run.'))} Try {example}.</p>"
    else:
        body = walk_html(walk)
    if question:
        body = asked_first_html(question, model, text, body, WALK_FOLDED)
    return (
        f'<section class="wide" data-step="circuits"><h4>{number}. How the heads of the {html.escape(model)} model '
        f"work together on “{html.escape(text[:60])}”</h4><p>Each sentence below is written from the model's numbers "
        f"on this text (a text that repeats a phrase shows induction: {example}). The Circuits section below the "
        "head tools draws each measurement whole.</p>"
        f"{body}</section>"
    )
