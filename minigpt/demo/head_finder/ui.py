"""The Head Finder section, laid out and wired: every head of the model the maps show, measured over a corpus (its
validation text, or a text the visitor gives), in a table sortable by any metric; a click on a head opens its
dashboard. Its endpoints: head_finder/endpoints.py (/head_metrics, /head_dashboard); the page draws those same answers
with head_finder/view.py."""

import gradio as gr

from minigpt.demo.core.state import DemoState
from minigpt.demo.core.ui import drawn
from minigpt.demo.head_finder.endpoints import HeadFinder
from minigpt.demo.head_finder.view import FINDER_JS, dashboard_with_map, finder_html
from minigpt.demo.head_finder.words import FINDER_INTRO

PROGRESS = gr.Progress()  # Gradio fills a handler's progress parameter when its default is one


class HeadFinderSection:
    """The section on the demo's state: its page handlers draw the answers of `finder`, the section's endpoints;
    `layout` builds it on the page."""

    def __init__(self, state: DemoState):
        self.state, self.finder = state, HeadFinder(state)

    def show_finder(self, shown: dict | None, text: str, progress=PROGRESS):
        """The table of the shown text's model, measured on its corpus: out of date once another model is shown (its
        numbers do not depend on the text of the maps)."""

        def draw(_, model):
            measured = self.finder.measured(model, text, lambda f: progress(f, desc="Measuring every head"))
            return finder_html(self.finder.metrics_answer(*measured))

        return drawn(shown, draw, of_model=True), ""

    def show_dashboard(self, shown: dict | None, text: str, event: gr.EventData):
        """One head's dashboard, with its map on the text shown."""
        layer, head = int(event.layer), int(event.head)
        dashboard = self.finder.head_dashboard
        return drawn(shown, lambda on, model: dashboard_with_map(dashboard(model, layer, head, text, on)))

    def layout(self, maps):
        """The section, on the model and text the maps show (`maps.shown`)."""
        shown = maps.shown
        gr.Markdown(FINDER_INTRO)
        with gr.Row():
            corpus = gr.Textbox(
                "",
                label="Corpus (empty: the model's validation text; a model of names: one name a line)",
                lines=2,
                scale=3,
                elem_id="finder-corpus",
            )
            button = gr.Button("Measure every head", variant="primary", scale=1, elem_id="finder-measure")
        table = gr.HTML(js_on_load=FINDER_JS, elem_id="head-finder-table")
        board = gr.HTML(elem_id="head-dashboard")
        for endpoint in (self.finder.head_metrics, self.finder.head_dashboard):
            gr.api(endpoint, api_name=endpoint.__name__)
        private = dict(api_visibility="private")
        button.click(self.show_finder, [shown, corpus], [table, board], **private)
        table.open(self.show_dashboard, [shown, corpus], board, **private)
