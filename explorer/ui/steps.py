"""The step by step section: how one head turns one token's input into its output, with the model's real numbers
(explorer/attention_steps.py computes, views/steps.py draws). Endpoint: /step."""

import gradio as gr

from explorer.attention_steps import attention_steps, steps_json
from explorer.choices import flag, kept_choice, number
from explorer.state import DemoState
from explorer.ui.components import unchecked
from explorer.views.insights import belongs_to
from explorer.views.steps import STEPS_CSS, steps_html


class StepByStep:
    """The section's endpoint, on the demo's state; `layout` builds it on the page."""

    def __init__(self, state: DemoState):
        self.state = state

    def step(
        self,
        text: str = "emma",
        model: str | None = None,
        layer: int = 0,
        head: int = 0,
        query: int | None = None,
        training: bool = False,
        seed: int = 0,
    ) -> dict:
        """Every number of one attention head at work on one token of `text`: the textbook steps from the sublayer's
        input to what the next sublayer receives (attention_steps.py). `query` is the token's position (0: the start
        token; default: the last token); `training` applies the model's attention dropout, drawn with `seed`."""
        model = model or self.state.names_default
        view = self.state.text_view(model, text or "")
        choice = dict(
            layer=number("Layer", layer, 0, int),
            head=number("Head", head, 0, int),
            query=number("Query position", query, None, int),
            training=flag("Training", training, False),
            seed=number("Seed", seed, 0, int),
        )
        steps = attention_steps(view.lm.model, view.recorded, **choice, rng_lock=self.state.rng_lock)
        return steps_json(steps, view.tokens, model=model, notes=view.notes)

    def step_view(self, shown: dict | None, layer, head, query, training, seed):
        """The step view of the text the maps show: its layer, head and query choices (kept where they still fit) and
        the steps drawn from exactly what the `step` endpoint returns."""
        if not shown:
            return gr.skip(), gr.skip(), gr.skip(), gr.skip()
        config = self.state.picker.get(shown["model"]).model.config
        layer, head = kept_choice(layer, config.n_layer), kept_choice(head, config.n_head)
        numbers = self.step(shown["text"], shown["model"], layer, head, query, training, seed)
        tokens = numbers["tokens"]
        return (
            gr.Dropdown(choices=[(f"layer {n}", n) for n in range(config.n_layer)], value=layer),
            gr.Dropdown(choices=[(f"head {n}", n) for n in range(config.n_head)], value=head),
            gr.Dropdown(choices=[(f"{j}: {t}", j) for j, t in enumerate(tokens)], value=numbers["query"]),
            belongs_to(shown["key"], shown["label"], steps_html(numbers)),
        )

    def step_view_of_new_text(self, shown: dict | None, layer, head, training, seed, link: dict | None):
        """The maps show another text: its last token is the query; or, for the text of the link the page was opened
        with, the link's layer, head and query (taken once: the link is then spent)."""
        if link and shown and (link.get("text"), link.get("model")) == (shown["text"], shown["model"]):
            layer, head, query = link.get("layer", layer), link.get("head", head), link.get("query")
            return *self.step_view(shown, layer, head, query, training, seed), None
        return *self.step_view(shown, layer, head, None, training, seed), gr.skip()

    def step_view_at_row(self, shown: dict | None, layer, head, training, seed, event: gr.EventData):
        """A click on a row of the enlarged head (its `query` event: layer, head, query row): that token is the query,
        in the clicked map's layer and head (the step view's own head when the map is the layer's average)."""
        clicked = event._data
        head = head if clicked["head"] == "mean" else int(clicked["head"])
        return self.step_view(shown, int(clicked["layer"]), head, int(clicked["query"]), training, seed)

    def layout(self, shown: gr.State, large: gr.HTML, link: gr.State) -> gr.Dropdown:
        """The Step by step view, driven by the text and model of the maps (`shown`), by clicks on the enlarged
        head's rows and by the link the page was opened with (`link`); and the `step` endpoint. Returns the query
        picker (the page's link names it)."""
        gr.Markdown(
            "## Attention, step by step\nHow one head turns one token's input into its output, with the model's "
            "real numbers: pick a layer, a head and the query token, or click a row of the enlarged head above."
        )
        with gr.Row():
            layer = gr.Dropdown([0], value=0, label="Layer", interactive=True)
            head = gr.Dropdown([0], value=0, label="Head", interactive=True)
            query = gr.Dropdown([0], value=0, label="Query token", interactive=True)
            training = gr.Checkbox(False, label="Training mode (the model's attention dropout)")
            seed = unchecked(gr.Number(value=0, precision=0, label="Dropout seed"))
        view = gr.HTML(css_template=STEPS_CSS, js_on_load=None, elem_id="step-view")
        controls, private = [layer, head, query, view], dict(api_visibility="private")
        shown.change(
            self.step_view_of_new_text, [shown, layer, head, training, seed, link], [*controls, link], **private
        )
        for control in (layer, head, query, training, seed):
            control.input(self.step_view, [shown, layer, head, query, training, seed], controls, **private)
        large.query(self.step_view_at_row, [shown, layer, head, training, seed], controls, **private)
        gr.api(self.step, api_name="step")
        return query
