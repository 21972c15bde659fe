"""The page: the sections in the order a visitor meets them (what this is and where to start; generation, the Train
tab beside it; the attention maps; the lesson through the block, step by step, and a link to the view; then the head
tools, folded), each built by its module from the one state; the selection (layer, head, query) they share; then the
error rule on every event and endpoint."""

import gradio as gr

from minigpt.demo.allocator import gives_memory_back
from minigpt.demo.links import TABS, read_link
from minigpt.demo.state import DemoState
from minigpt.demo.ui.attention import AttentionSection
from minigpt.demo.ui.circuits import Circuits
from minigpt.demo.ui.errors import under_the_rule
from minigpt.demo.ui.exercises import ExercisesSection
from minigpt.demo.ui.generation import GenerationTabs
from minigpt.demo.ui.gradio_internals import components, every_function_wrapped, unchecked, upload_folder
from minigpt.demo.ui.head_finder import HeadFinder
from minigpt.demo.ui.insights import InsightsSection
from minigpt.demo.ui.selection import Selection
from minigpt.demo.ui.steps import StepByStep
from minigpt.demo.ui.training import Training
from minigpt.demo.views.assets import asset
from minigpt.demo.views.circuits import CIRCUITS_CSS
from minigpt.demo.views.exercises import EXERCISES_CSS, EXERCISES_JS
from minigpt.demo.views.head_finder import FINDER_CSS
from minigpt.demo.views.insights import INSIGHT_CSS
from minigpt.demo.views.maps import MAPS_CSS

LINK_JS = asset("link.js")

INTRO = """# MiniGPT: watch attention at work
A small GPT written to be read, as a 🤗 `transformers` model. Generate **names** or **text**, then look at how every
attention head of every layer spreads its attention over the tokens: each small map is one head (rows: the token that
looks; columns: the tokens it looks at; grey: future tokens it cannot see). Click a map to see it large.

**Start here:** generate a few names, then follow the *Lesson* below the maps: thirteen steps through the whole model,
from your name's letters to its next-letter probabilities, each with the model's real numbers on your text, in plain
words or with formulas. Click a map to see it large, and a row of it to follow that token through the lesson.

**Or see heads work together:** the button below shows the `specimen` model on a text written twice and finds, step
by step in its own numbers, which heads copy the repeated part and how (the induction circuit; lesson step 13). The
second button asks you to predict first; the *Exercises* section below asks more, on any text.
"""

WALK_TEXT = "Then Zorbak spoke. Then Zor"  # a phrase written twice, its second copy cut short: the specimen copies "b"
WALK_MODEL = "specimen"


THEME = gr.themes.Default(font=["ui-sans-serif", "system-ui", "sans-serif"], font_mono=["ui-monospace", "monospace"])
CSS = MAPS_CSS + INSIGHT_CSS + FINDER_CSS + CIRCUITS_CSS + EXERCISES_CSS  # the step view carries its own (css_template)


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
        walk_out = gr.HTML(elem_id="walk-first-screen", js_on_load=EXERCISES_JS)  # its question: exercises.js
        generation, trainer, insights = GenerationTabs(state), Training(state), InsightsSection(state)
        with gr.Tabs() as tabs:
            generated = generation.tabs()
            training = trainer.tab(demo)
        tab_from_link(demo, tabs)
        circuits, exercises = Circuits(state), ExercisesSection(state)
        maps_section = AttentionSection(state)
        steps = StepByStep(state, insights.insights.head_roles, circuits.circuit_walk)
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
        with gr.Accordion("Circuits: how heads work together", open=False, elem_id="circuits"):
            circuit_views = circuits.layout(maps)
        with gr.Accordion("Exercises: predict, then see the model's answer", open=False, elem_id="exercises") as folded:
            exercises.layout(demo, maps, folded)
        exercises.answered_in(lesson.view)
        with gr.Accordion("Head Finder: every head over a corpus", open=False, elem_id="head-finder"):
            HeadFinder(state).layout(maps)
        picking = [*tools.tables, lesson.view, circuit_views.attribution, circuit_views.patching, maps.over_training]
        picking += [circuit_views.composition, circuit_views.found]
        Selection(maps_section, steps).wire(maps, lesson, picking, tools.token_strip)
        first_screen_walk(state, (walk_button, predict_button), walk_out, maps, maps_section, circuits, exercises)
        pickers_follow_training(demo, state, training)
    # The error rule, alike on every event and endpoint; then what a call freed goes back to the system.
    every_function_wrapped(demo, lambda endpoint, declared: gives_memory_back(under_the_rule(endpoint, declared)))
    return demo


def first_screen_walk(state, buttons, out, maps, maps_section, circuits, exercises) -> None:
    """The first screen's one click to the circuit: the maps show the specimen on a text written twice, and right under
    the buttons the circuit walk on it (each step's sentence from the model's numbers, its picture beside it); the
    second button folds the walk under the question it answers, which the learner answers first (graded as the
    Exercises section's). Only where the specimen is offered."""
    if WALK_MODEL not in state.picker.names:
        for hidden in (*buttons, out):
            hidden.visible = False
        return
    private = dict(api_visibility="private")
    outputs = [maps.notes, maps.grid, maps.large, maps.trace, maps.layer, maps.head, maps.shown]
    for button, asked_first in zip(buttons, (None, exercises.asked_first)):
        shown = button.click(lambda: (WALK_TEXT, WALK_MODEL), None, [maps.text, maps.model], **private)
        shown = shown.then(maps_section.attention, [maps.text, maps.model, maps.selected], outputs, **private)
        drawn = lambda asked_first=asked_first: circuits.show_walk(WALK_TEXT, WALK_MODEL, asked_first)  # noqa: E731
        shown.then(drawn, None, out, **private)
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
    """A link naming a top tab (?tab=text, by the tabs' ids, minigpt/demo/links.py TABS) opens the page on it."""

    def open_tab(request: gr.Request):
        chosen = read_link(request.query_params if request is not None else {}).get("tab")
        return gr.Tabs(selected=chosen) if chosen in TABS else gr.skip()

    demo.load(open_tab, None, tabs, api_visibility="private")


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
