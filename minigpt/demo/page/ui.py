"""The page: the sections in the order a visitor meets them (what this is and where to start; generation, the Train
tab beside it; the attention maps; the lesson through the block, step by step, and a link to the view; then the head
tools, folded), each built by its module from the one state; the selection (layer, head, query) they share; then the
error rule on every event and endpoint."""

import json

import gradio as gr

from minigpt.demo.circuits.find_circuit_view import FIND_CIRCUIT_CSS
from minigpt.demo.circuits.ui import CircuitsSection
from minigpt.demo.circuits.view import CIRCUITS_CSS
from minigpt.demo.core.allocator import gives_memory_back
from minigpt.demo.core.error_rule import under_the_rule, values_completed_by_the_rule
from minigpt.demo.core.gradio_internals import (
    components,
    every_function_wrapped,
    every_refusal_logged,
    unchecked,
    upload_folder,
)
from minigpt.demo.core.links import PARTS, TABS, linked_part, read_link
from minigpt.demo.core.state import DemoState
from minigpt.demo.core.view import SHARED_CSS, asset, scoped
from minigpt.demo.exercises.ui import ExercisesSection
from minigpt.demo.exercises.view import EXERCISES_CSS, EXERCISES_JS
from minigpt.demo.generation.ui import GenerationTabs
from minigpt.demo.head_finder.ui import HeadFinderSection
from minigpt.demo.head_finder.view import FINDER_CSS
from minigpt.demo.head_tools.ui import InsightsSection
from minigpt.demo.head_tools.view import INSIGHT_CSS
from minigpt.demo.lesson.steps_view import STEPS_CSS
from minigpt.demo.lesson.ui import StepByStep
from minigpt.demo.lesson.view import LESSON_CSS
from minigpt.demo.maps.ui import AttentionSection
from minigpt.demo.maps.view import MAPS_CSS
from minigpt.demo.page.selection_ui import Selection
from minigpt.demo.page.words import INTRO
from minigpt.demo.training.ui import TrainingTab

LINK_JS = asset("page/link.js")


WALK_TEXT = "Then Zorbak spoke. Then Zor"  # a phrase written twice, its second copy cut short: the specimen copies "b"
WALK_MODEL = "specimen"


THEME = gr.themes.Default(font=["ui-sans-serif", "system-ui", "sans-serif"], font_mono=["ui-monospace", "monospace"])
# The page's one stylesheet: every view's looks. The step view's and the circuit found's hold for their element alone
# (scoped); first, so that the maps' focus outline on the step view's buttons, an id's rule as well, comes after them.
CSS = (
    scoped("step-view", STEPS_CSS + LESSON_CSS)
    + scoped("found-circuit", FIND_CIRCUIT_CSS)
    + MAPS_CSS
    + SHARED_CSS
    + INSIGHT_CSS
    + FINDER_CSS
    + CIRCUITS_CSS
    + EXERCISES_CSS
)


def build_demo(state: DemoState) -> gr.Blocks:
    """The whole page on `state`."""
    # delete_cache: exports (up to 604 MB of weights for GPT-2 at 1,024 tokens) and uploads are copied into Gradio's
    # cache; every 10 minutes, the files older than 30 go, so that a Space does not fill its disk.
    state.exports = upload_folder() / "minigpt-exports"  # in Gradio's cache: served from there, not copied
    with gr.Blocks(title="MiniGPT attention explorer", delete_cache=(600, 1800)) as demo:
        gr.Markdown(INTRO)
        with gr.Row():
            walk_button = gr.Button(
                "See how heads work together: the induction circuit, found step by step", elem_id="walk-button", scale=3
            )
            predict_button = gr.Button("Predict first, then the walk", elem_id="walk-predict", scale=1)
        walk_out = gr.HTML(elem_id="walk-first-screen", js_on_load=EXERCISES_JS)  # its question: exercises/view.js
        generation, trainer, insights = GenerationTabs(state), TrainingTab(state), InsightsSection(state)
        with gr.Tabs() as tabs:
            generated = generation.tabs()
            training = trainer.tab(demo)
        tab_from_link(demo, tabs)
        circuits = CircuitsSection(state)
        exercises = ExercisesSection(state, circuits.circuits)  # one circuit search a model: the circuit to build
        maps_section = AttentionSection(state)
        steps = StepByStep(state, insights.insights.head_roles, circuits.circuits.circuit_walk)
        maps = maps_section.layout(demo, generated)
        lesson = steps.layout(maps)  # the basics right under the grid, before the head enlarged and the head tools
        exercises.carrier()  # the grades of the lesson's question and the Exercises section's (hidden)
        maps.details.render()  # the chosen head enlarged, the line view, the export, the shape trace
        share_link(maps, lesson)
        with gr.Accordion("Head tools: what does this head do?", open=False, elem_id="head-tools"):
            tools = insights.layout(
                maps,
                generated.text_sampling,
                generated.prompt,
                generated.text_out,
                generated.text_model,
                generated.text_event,
            )
        with gr.Accordion("Circuits: how heads work together", open=False, elem_id="circuits") as circuits_fold:
            circuit_views = circuits.layout(maps)
        part_from_link(demo, circuits_fold)
        with gr.Accordion("Exercises: predict, then see the model's answer", open=False, elem_id="exercises") as folded:
            exercises.layout(demo, maps, folded)
        exercises.answered_in(lesson.view)
        with gr.Accordion("Head Finder: every head over a corpus", open=False, elem_id="head-finder"):
            HeadFinderSection(state).layout(maps)
        picking = [*tools.tables, lesson.view, circuit_views.attribution, circuit_views.patching, maps.over_training]
        picking += [circuit_views.composition, circuit_views.found]
        Selection(maps_section, steps).wire(maps, lesson, picking, tools.token_strip)
        first_screen_walk(state, (walk_button, predict_button), walk_out, maps, maps_section, circuits, exercises)
        pickers_follow_training(demo, state, training)
    # The error rule, alike on every event and endpoint; then what a call freed goes back to the system.
    every_function_wrapped(demo, lambda endpoint, declared: gives_memory_back(under_the_rule(endpoint, declared)))
    values_completed_by_the_rule(demo)  # ... on the values each is sent, whatever the route
    every_refusal_logged(demo)  # ... and on its components' refusals of a value
    return demo


def first_screen_walk(state, buttons, out, maps, maps_section, circuits, exercises) -> None:
    """The first screen's one click to the circuit: right under the buttons the circuit walk on the specimen and a
    text written twice (each step's sentence from the model's numbers, its picture beside it), the maps of that text
    drawn first, then moved to the head the walk follows (its strip over training and the circuits' chosen head with
    them); the second button folds the walk under the question it answers, which the learner answers first (graded
    as the Exercises section's). Only where the specimen is offered."""
    if WALK_MODEL not in state.picker.names:
        for hidden in (*buttons, out):
            hidden.visible = False
        return
    private = dict(api_visibility="private")
    outputs = [maps.notes, maps.grid, maps.large, maps.trace, maps.layer, maps.head, maps.shown]
    for button, asked_first in zip(buttons, (None, exercises.asked_first)):
        walked = lambda asked_first=asked_first: circuits.walk_and_its_head(WALK_TEXT, WALK_MODEL, asked_first)  # noqa: E731
        typed = button.click(lambda: (WALK_TEXT, WALK_MODEL), None, [maps.text, maps.model], **private)
        # The maps at once (one pass), then the walk (seconds: patching), then the maps again on the walk's head
        # (the pass kept: a redraw).
        shown = typed.then(maps_section.attention, [maps.text, maps.model, maps.selected], outputs, **private)
        drawn = shown.then(walked, None, [out, maps.selected], **private)
        drawn.then(maps_section.attention, [maps.text, maps.model, maps.selected], outputs, **private)
    exercises.answered_in(out)


def share_link(maps, lesson) -> None:
    """A button that puts a link to the view shown (the top tab, model, text, enlarged head, the lesson's query, step
    and depth) in the address bar, the clipboard and a box: opened, the link shows that view again
    (AttentionSection.open_link, tab_from_link)."""
    with gr.Row(equal_height=True):
        button = gr.Button("Copy a link to this view", scale=1)
        box = gr.Textbox(label="Link to this view", interactive=False, scale=3, elem_id="view-link")
    shown = [maps.model, maps.text, maps.layer, maps.head, lesson.query, lesson.lesson, lesson.depth]
    button.click(None, shown, box, js=LINK_JS)


def tab_from_link(demo: gr.Blocks, tabs: gr.Tabs) -> None:
    """A link naming a top tab (?tab=text, by the tabs' ids, minigpt/demo/core/links.py TABS) opens the page on it."""

    def open_tab(request: gr.Request):
        chosen = read_link(request.query_params if request is not None else {}).get("tab")
        return gr.Tabs(selected=chosen) if chosen in TABS else gr.skip()

    demo.load(open_tab, None, tabs, api_visibility="private")


# After the section unfolds, the part the link names scrolled to (its element drawn by then, or on the next frame).
SCROLL_TO_PART_JS = f"""() => {{
  const part = {json.dumps(PARTS)}[new URLSearchParams(location.search).get('part')];
  const scroll = () => document.getElementById(part)?.scrollIntoView({{block: 'start'}});
  if (part) requestAnimationFrame(() => requestAnimationFrame(scroll));
}}"""


def part_from_link(demo: gr.Blocks, fold: gr.Accordion) -> None:
    """A link naming a part of the Circuits section (?part=find-circuit, links.PARTS: the circuit question's link)
    unfolds the section (`fold`) and scrolls to the part."""

    def open_part(request: gr.Request):
        return gr.Accordion(open=True) if linked_part(request.query_params if request else {}) else gr.skip()

    opened = demo.load(open_part, None, fold, api_visibility="private")
    opened.then(None, js=SCROLL_TO_PART_JS, api_visibility="private")


def pickers_follow_training(demo: gr.Blocks, state: DemoState, training_events: list) -> None:
    """Every model picker on the page (each dropdown offering the picker's models, whichever view it belongs to)
    gains a model as soon as a run of this page finishes, and a page opened later lists every finished model. The
    pickers take any name (state.picker.get says which exist): a dropdown would refuse a model added after the page was
    built to an API client, whose page never ran the refresh."""
    offered = set(state.picker.names)
    pickers = [b for b in components(demo) if isinstance(b, gr.Dropdown) and {v for _, v in b.choices} == offered]
    for picker in pickers:
        unchecked(picker)
    refresh = lambda: [gr.update(choices=state.picker.names)] * len(pickers)
    for event in training_events:
        event.then(refresh, None, pickers, api_visibility="private")
    demo.load(refresh, None, pickers, api_visibility="private")
