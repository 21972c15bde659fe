"""The lesson section, laid out and wired: the block, step by step, with the model's real numbers on the text the maps
show (minigpt/demo/lesson/endpoints.py computes, minigpt/demo/lesson/lesson.py says, lesson/steps_view.py and
lesson/view.py draw): one lesson step at a time, with Back, Next and a depth, or every step at once. Endpoint: /step."""

from functools import partial
from types import SimpleNamespace

import gradio as gr

from minigpt.demo.core.gradio_internals import unchecked
from minigpt.demo.core.inputs import kept_choice
from minigpt.demo.core.state import DemoState
from minigpt.demo.core.view import belongs_to
from minigpt.demo.lesson.endpoints import Steps
from minigpt.demo.lesson.steps_view import steps_html
from minigpt.demo.lesson.view import LESSON_JS, lesson_html
from minigpt.demo.lesson.words import (
    DEPTHS,
    LESSON_CHOICES,
    LESSON_INTRO,
    MASK_STEP,
    SECTION_STEP,
    lesson_number,
    next_step,
)


class StepByStep:
    """The section on the demo's state: its page handlers draw the `step` endpoint's answers (`steps`, with the head
    roles' endpoint `roles` for lesson step 11); `layout` builds it on the page."""

    def __init__(self, state: DemoState, roles=None, walk=None):
        self.state, self.steps = state, Steps(state, roles, walk)

    def step_view(
        self, shown: dict | None, layer, head, query, training, seed, lesson=1, depth="plain", arriving=False
    ):
        """The step view of the text the maps show: its layer, head and query choices (kept where they still fit), the
        lesson step, and the view: that lesson step, or every step at once, drawn from exactly what the `step`
        endpoint returns. `arriving` at the causal mask's step with the last token as the query (which has no future
        keys to mask), the query moves to the middle of the text, where the mask shows."""
        if not shown:
            return gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip()
        config = self.state.picker.get(shown["model"]).model.config
        layer, head = kept_choice(layer, config.n_layer), kept_choice(head, config.n_head)
        numbers = self.steps.step(shown["text"], shown["model"], layer, head, query, training, seed)
        tokens, depth = numbers["tokens"], depth if depth in DEPTHS else "plain"
        number = lesson_number(lesson)
        if arriving and number == MASK_STEP and numbers["query"] == len(tokens) - 1 and len(tokens) > 2:
            numbers = self.steps.step(shown["text"], shown["model"], layer, head, len(tokens) // 2, training, seed)
        if number:
            drawn = lesson_html(number, depth, numbers, **self.steps.lesson_parts(number, shown))
        else:
            drawn = steps_html(numbers, depth, SECTION_STEP)
        return (
            gr.Dropdown(choices=[(f"layer {n}", n) for n in range(config.n_layer)], value=layer),
            gr.Dropdown(choices=[(f"head {n}", n) for n in range(config.n_head)], value=head),
            gr.Dropdown(choices=[(f"{j}: {t}", j) for j, t in enumerate(tokens)], value=numbers["query"]),
            number,
            belongs_to(shown["key"], shown["label"], drawn),
        )

    def step_view_of_new_text(self, shown: dict | None, layer, head, training, seed, lesson, depth, link: dict | None):
        """The maps show another text: its last token is the query; or, for the text of the link the page was opened
        with, the link's layer, head, query, lesson step and depth (taken once: the link is then spent)."""
        if link and shown and (link.get("text"), link.get("model")) == (shown["text"], shown["model"]):
            layer, head, query = link.get("layer", layer), link.get("head", head), link.get("query")
            lesson, depth = link.get("step", lesson), link.get("depth", depth)
            view = self.step_view(shown, layer, head, query, training, seed, lesson, depth)
            return *view, depth if depth in DEPTHS else gr.skip(), None
        return *self.step_view(shown, layer, head, None, training, seed, lesson, depth), gr.skip(), gr.skip()

    def step_view_of_box(self, shown: dict | None, layer, head, query, training, seed, depth, event: gr.EventData):
        """A click on a box of the lesson's block diagram (the `go` event: {step}): the lesson step that explains it."""
        step = getattr(event, "step", None)
        return self.step_view(shown, layer, head, query, training, seed, step, depth, arriving=True)

    def step_view_of_step(self, shown: dict | None, layer, head, query, training, seed, lesson, depth):
        """Another lesson step chosen in the list."""
        return self.step_view(shown, layer, head, query, training, seed, lesson, depth, arriving=True)

    def step_view_by(self, by: int, shown: dict | None, layer, head, query, training, seed, lesson, depth):
        """Back (`by` -1) or Next (+1)."""
        return self.step_view_of_step(shown, layer, head, query, training, seed, next_step(lesson, by), depth)

    def layout(self, maps) -> SimpleNamespace:
        """The lesson and Step by step view, driven by the text and model of the maps (`maps.shown`) and by the link the
        page was opened with (`maps.link`); and the `step` endpoint. Returns its parts: the page's selection
        (selection.py) moves its layer, head and query, and its link names the query, lesson step and depth."""
        shown, link = maps.shown, maps.link
        gr.Markdown(LESSON_INTRO)
        with gr.Row(equal_height=True):
            back = gr.Button("◀ Back", scale=1, elem_id="lesson-back")
            lesson = unchecked(
                gr.Dropdown(LESSON_CHOICES, value=1, label="Lesson step", scale=4, elem_id="lesson-step")
            )
            forward = gr.Button("Next ▶", scale=1, elem_id="lesson-next")
            depth = unchecked(
                gr.Radio(
                    [("Plain words", "plain"), ("Formulas and shapes", "formulas")],
                    value="plain",
                    label="Depth",
                    scale=2,
                    elem_id="lesson-depth",
                )
            )
        with gr.Row():
            layer = gr.Dropdown([0], value=0, label="Layer", interactive=True)
            head = gr.Dropdown([0], value=0, label="Head", interactive=True)
            query = gr.Dropdown([0], value=0, label="Query token", interactive=True)
            training = gr.Checkbox(False, label="Training mode (the model's attention dropout)")
            seed = unchecked(gr.Number(value=0, precision=0, label="Dropout seed"))
        view = gr.HTML(js_on_load=LESSON_JS, elem_id="step-view")
        with gr.Row(equal_height=True):  # again below the view: a long step (or a phone) needs no scrolling back up
            back_below = gr.Button("◀ Back", elem_id="lesson-back-below")
            forward_below = gr.Button("Next ▶", elem_id="lesson-next-below")
        controls, private = [layer, head, query, lesson, view], dict(api_visibility="private")
        chosen = [shown, layer, head, query, training, seed]
        shown.change(
            self.step_view_of_new_text,
            [shown, layer, head, training, seed, lesson, depth, link],
            [*controls, depth, link],
            **private,
        )
        # The layer, head and query: the page's selection (selection.py). always_last: a choice made while the view
        # is still drawing the last one is drawn after it (Gradio's default for an input event, "once", dropped it: a
        # depth clicked during a slow step was lost).
        for control in (training, seed, depth):
            control.input(self.step_view, [*chosen, lesson, depth], controls, trigger_mode="always_last", **private)
        lesson.input(self.step_view_of_step, [*chosen, lesson, depth], controls, trigger_mode="always_last", **private)
        for button, by in ((back, -1), (forward, +1), (back_below, -1), (forward_below, +1)):
            button.click(partial(self.step_view_by, by), [*chosen, lesson, depth], controls, **private)
        view.go(self.step_view_of_box, [*chosen, depth], controls, **private)
        gr.api(self.steps.step, api_name="step")
        parts = dict(layer=layer, head=head, query=query, training=training, seed=seed, lesson=lesson, depth=depth)
        return SimpleNamespace(**parts, view=view)
