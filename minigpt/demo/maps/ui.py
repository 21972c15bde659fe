"""The attention maps section, laid out and wired: every head of every layer of the text shown, one head large (hover,
zoom, pan), the export, the shape trace, and the line naming the text every view below belongs to. Its endpoints:
maps/endpoints.py (/attention, drawn here as the page's own answer: notes, maps, trace and pickers; /attention_values,
/attention_export, /head_over_training; the enlarged maps' server functions); drawn by maps/view.py, maps/lines_view.py
and maps/export_view.py."""

from types import SimpleNamespace

import gradio as gr
import pandas

from minigpt.demo.core.attention_maps import head_matrix
from minigpt.demo.core.error_rule import answers_visitors
from minigpt.demo.core.gradio_internals import unchecked
from minigpt.demo.core.links import read_link
from minigpt.demo.core.models import snapshot_choices
from minigpt.demo.core.state import DemoState
from minigpt.demo.core.texts import notes_markdown, text_label
from minigpt.demo.core.ui import answer_drawn
from minigpt.demo.core.view import CURRENT_JS, belongs_to, current_html, error_html, lost_html
from minigpt.demo.maps.endpoints import EXPORTS, AttentionMaps
from minigpt.demo.maps.export_view import drawn_export
from minigpt.demo.maps.lines_view import LINES_JS, lines_html
from minigpt.demo.maps.view import (
    HEAD_JS,
    OVER_TRAINING_JS,
    PICK_TILE_JS,
    SELECT_TILE_JS,
    figure_body,
    grid_html,
    head_caption,
    head_html,
    over_training_html,
)
from minigpt.demo.maps.why_view import why_html
from minigpt.errors import VISITORS_MISTAKES, VisitorError

LINES_OF = [("this head", "head"), ("every head of the layer, in colours", "layer")]  # the line view's choice


def layer_and_head_choices(n_layer: int, n_head: int, layer: int = 0, head: int | str = 0):
    layers = gr.Dropdown(choices=[(f"layer {i}", i) for i in range(n_layer)], value=layer)
    heads = gr.Dropdown(choices=[(f"head {h}", str(h)) for h in range(n_head)] + [("average", "mean")], value=str(head))
    return layers, heads


def file_data(path: str) -> gr.FileData:
    return gr.FileData(path=path)


class AttentionSection:
    """The section on the demo's state: its page handlers call the section's numbers (`maps`) and draw them; `layout`
    builds it on the page."""

    def __init__(self, state: DemoState):
        self.state, self.maps = state, AttentionMaps(state, drawn_export)
        # /attention: the maps' answer drawn as the page shows it (notes, grid, the chosen head large, trace, pickers);
        # /attention_export: the file's path as a file Gradio serves
        self.attention = answer_drawn(self.maps.attention, self.drawn_attention)
        self.attention_export = answer_drawn(self.maps.attention_export, file_data, returns=gr.FileData)

    def drawn_attention(self, answer: dict) -> tuple:
        """The /attention answer as the page's outputs: the notes, the grid, the chosen head large (the last token's
        row outlined: the lesson's query until another is chosen), the shape trace, the layer and head pickers and
        the text shown."""
        shown, layer, head = answer["shown"], answer["layer"], answer["head"]
        view = self.state.text_view(shown["model"], shown["text"])
        with self.maps.every_core(view):  # the drawing of a big text's maps: on every core when alone
            weights = view.recorded.attentions  # (L, H, T, T)
            grid = grid_html(weights, view.tokens, (layer, str(head)))
            query, moved = len(view.ids) - 1, answer["moved"]
            large = head_html(weights, view.tokens, layer, str(head), shown, query=query, moved=moved)
        return (
            notes_markdown(answer["notes"]),
            belongs_to(view.key, view.label, grid),
            belongs_to(view.key, view.label, large),
            pandas.DataFrame(answer["trace"]["rows"], columns=answer["trace"]["headers"]),
            *layer_and_head_choices(answer["layers"], answer["heads"], layer, head),
            shown,
        )

    def open_link(self, text: str, model: str, request: gr.Request):
        """The page opens: the view its link names (?model=&text=&layer=&head=&query=, minigpt/demo/core/links.py),
        else the text and model in the boxes; the link's choices go on to the step view (`link`)."""
        link = read_link(request.query_params if request is not None else {})
        text, model = link.get("text", text), link.get("model", model)
        notes, grid, large, trace, layer, head, shown = self.attention(text, model)
        if "layer" in link or "head" in link:
            view, chosen, query = self.maps.linked_head(link, text, model)  # the link's query outlined
            layer, head = layer_and_head_choices(view.lm.model.config.n_layer, view.lm.model.config.n_head, *chosen)
            large = self.show_head(shown, *chosen, query)
        return text, model, notes, grid, large, trace, layer, head, shown, link or None

    def show_head(self, shown: dict | None, layer: int, head: str, query: int | None = None):
        """The enlarged map of that head and its layer's average, the query's row outlined (None: no row)."""
        if not shown:
            return gr.skip()
        view = self.state.text_view(shown["model"], shown["text"])
        attentions = view.recorded.attentions
        return belongs_to(
            view.key, view.label, head_html(attentions, view.tokens, int(layer), str(head), view.shown, query=query)
        )

    def step_choices(self, shown: dict | None):
        """The training steps the shown model has snapshots of ("name@N"; "final" last), shown only if it has any;
        none after a text that could not be shown (the steps of the model shown before would name another model)."""
        if not shown:
            return gr.Dropdown(choices=[], value=None, visible=False)
        choices = snapshot_choices(self.state.picker, shown["model"])
        return gr.Dropdown(choices=choices, value=shown["model"] if choices else None, visible=bool(choices))

    def show_over_training(self, shown: dict | None, layer, head):
        """The strip of the chosen head at each snapshot, with the model's roles curve: only for a model with
        snapshots; a visitor's choice it cannot draw (the layer's average) says so in its place."""
        if not shown or not snapshot_choices(self.state.picker, shown["model"]):
            return gr.HTML("", visible=False)
        try:
            answer = self.maps.head_over_training(shown["text"], shown["model"], layer, head)
            drawn = over_training_html(answer, shown["model"], self.maps.roles_curve(answer["model"]))
        except VISITORS_MISTAKES as error:
            drawn = error_html(str(error))
        return gr.HTML(belongs_to(shown["key"], shown["label"], drawn), visible=True)

    def attention_at_step(self, text: str, selected: dict | None, event: gr.EventData):
        """A click on a step of the strip (its `go` event: {model}): the page at that step."""
        return self.attention(text, self.maps.snapshot(getattr(event, "model", None)), selected)

    def show_lines(self, shown: dict | None, layer, head, lines_of: str = "head", query: int | None = None):
        """The line view of the layer: that head, or every head of the layer (`lines_of` "layer", or the average
        chosen), the query's token marked."""
        if not shown:
            return gr.skip()
        view, layer, weights = self.maps.line_weights(shown, layer, head, lines_of)
        return belongs_to(view.key, view.label, lines_html(weights, view.tokens, layer, query))

    def attention_window(self, asked: dict) -> str:
        """For head.js (zoom and pan): one enlarged map showing the window {row, col, size} asked for, fitted to the
        map."""
        view, layer, head, window, query = self.maps.window(asked)
        matrix = head_matrix(view.recorded.attentions, layer, head)
        return figure_body(matrix, view.tokens, head_caption(layer, head), window, query)

    def attention_why_html(self, asked: dict) -> str:
        """For head.js (a click on a cell): why the head looks from the query to the key, drawn (/attention_why's
        answer); the layer's average, a masked cell or any other mistake: its message in its place."""
        if not isinstance(asked, dict):
            raise VisitorError("Expected {model, text, layer, head, query, key}.")
        if str(asked.get("head")) == "mean":
            return error_html("Why is asked of one head: the average of a layer has no query and key of its own.")
        try:
            answer = self.maps.attention_why(
                str(asked.get("text") or ""), asked.get("model"), asked.get("layer"), asked.get("head"),
                asked.get("query"), asked.get("key"),
            )  # fmt: skip
        except VISITORS_MISTAKES as error:
            return error_html(str(error))
        return why_html(answer)  # inside the enlarged maps, which belong to the text (head.js checks it is still shown)

    def export_shown(self, shown: dict | None, what: str, layer: int, head: str):
        """The page's export: of the text whose maps are shown."""
        if not shown:
            raise VisitorError("Show the attention of a text first.")
        return str(self.maps.export_file(shown["model"], shown["text"], what, layer, head))

    def current_line(self, shown: dict | None):
        """The line above the maps naming the text and model every view below belongs to."""
        if not shown:
            return gr.skip()  # a text that could not be shown: `not_shown` wrote the line
        return current_html(shown["key"], shown["label"], shown["length"], shown["model"])

    def not_shown(self, text: str, model: str):
        """After a text that could not be shown (the message says why): nothing is current, so every view on the page
        is marked as belonging to an earlier text."""
        label = text_label(str(text or ""), str(model or self.state.names_default))
        # No shape trace or notes of the earlier text; the maps stay, greyed. Every output of the failed event is
        # written (the maps with gr.skip()), which also takes Gradio's error badge off each. The step picker goes:
        # its steps were the earlier model's, and the model box may name another now.
        return None, lost_html(label), None, "", gr.skip(), gr.skip(), self.step_choices(None)

    def attention_of_sample(self, sample: str, model: str, selected: dict | None = None):
        """After generating: the maps of what was generated (the first name, or the text), on the selected head."""
        return sample, model, *self.attention(sample, model, selected)

    def link_not_shown(self, text: str, model: str, request: gr.Request):
        """A link whose text or model could not be shown: the text box and the line name what the link asked for; the
        model picker, only a model it offers (any other value would be quoted whole in the log by Gradio's warning,
        each distinct one again: a visitor could grow the log without bound)."""
        link = read_link(request.query_params if request is not None else {})
        text, model = link.get("text", text), link.get("model", model)
        picked = model if self.state.picker.offers(model) else gr.skip()
        return text, picked, *self.not_shown(text, model)

    @staticmethod
    def selection_of(layer, head) -> dict:
        """The page's one selection, as the maps' pickers hold it: every redraw keeps it (attention)."""
        return {"layer": layer, "head": head}

    def detail_parts(self):
        """The maps' details, in page order: the layer and head pickers, the chosen head enlarged, the line view, the
        export and the shape trace."""
        with gr.Row():
            layer = gr.Dropdown([0], value=0, label="Layer", interactive=True)
            head = gr.Dropdown(["0"], value="0", label="Head", interactive=True)
        large = gr.HTML(
            label="Chosen head",
            js_on_load=HEAD_JS,
            elem_id="attention-head",
            server_functions=[
                answers_visitors(self.attention_window),
                answers_visitors(self.maps.attention_row),
                answers_visitors(self.attention_why_html),
            ],
        )
        lines_of = unchecked(
            gr.Radio(LINES_OF, value="head", label="Line view (texts up to 64 tokens)", elem_id="lines-of")
        )
        lines = gr.HTML(js_on_load=LINES_JS, elem_id="attention-lines")
        with gr.Row(equal_height=True):
            export_what = gr.Dropdown(
                [(label, value) for value, label in EXPORTS.items()],
                value="safetensors",
                label="Export the attention of this text",
                scale=2,
            )
            export_button = gr.Button("Export", scale=1)
            export_file = gr.File(label="Download", elem_id="attention-export", interactive=False, scale=2)
        gr.Markdown("### Shape trace of the attention sublayer (layer 0)")
        trace = gr.Dataframe(
            label="Shape trace",
            interactive=False,
            wrap=True,
            elem_id="shape-trace",
            column_widths=["17%", "20%", "12%", "15%", "36%"],  # every column whole, the meaning the widest
            max_height=900,  # every row: the trace is short
        )
        return layer, head, large, lines_of, lines, export_what, export_button, export_file, trace

    def generations_shown(self, generation, selected, outputs: list) -> list:
        """Each generation's output (`generation`: the generation tabs' parts) shown here as it ends, and another of the
        generated names as it is picked: each event, with the inputs naming its text and model."""
        g, private = generation, dict(api_visibility="private")
        names, text = [g.name_pick, g.names_model], [g.text_out, g.text_model]
        names_shown = g.names_event.success(self.attention_of_sample, [*names, selected], outputs, **private)
        name_picked = g.name_pick.select(self.attention_of_sample, [*names, selected], outputs, **private)
        text_shown = g.text_event.success(self.attention_of_sample, [*text, selected], outputs, **private)
        return [(names_shown, names), (name_picked, names), (text_shown, text)]

    def layout(self, demo: gr.Blocks, generation) -> SimpleNamespace:
        """The section on the page, wired: each generation's output (`generation`: the generation section's parts) is
        shown here as it ends. Returns the parts the later sections follow: the text shown (`shown`), the grid and the
        enlarged map (`large`) with its layer and head pickers, which the page's selection (selection.py) moves."""
        state = self.state
        gr.Markdown("## Attention maps")
        with gr.Row():
            text = gr.Textbox(label="Text to look at (filled in by each generation)", value="emma", scale=3)
            model = unchecked(
                gr.Dropdown(
                    state.picker.names, value=state.names_default, label="Model", scale=1, elem_id="attention-model"
                )
            )
        with gr.Row(equal_height=True):
            button = gr.Button("Show attention", scale=3)
            at_step = unchecked(
                gr.Dropdown([], label="At training step (the model's snapshots)", visible=False, scale=1)
            )
        over_training = gr.HTML(visible=False, js_on_load=OVER_TRAINING_JS, elem_id="head-over-training")
        current = gr.HTML(js_on_load=CURRENT_JS, elem_id="current-text")
        notes = gr.Markdown(label="Notes")
        grid = gr.HTML(label="Every head", js_on_load=PICK_TILE_JS, elem_id="attention-grid")
        # The chosen head enlarged (with its pickers), the line view, the export and the shape trace: made here, placed
        # by the page under the lesson (page.py renders `details`), so that the lesson starts right under the grid.
        with gr.Column(render=False, elem_id="map-details") as details:
            layer, head, large, lines_of, lines, export_what, export_button, export_file, trace = self.detail_parts()
        shown = gr.State(None)
        link = gr.State(None)  # the choices of the link the page was opened with, until the step view takes them
        # The page's one selection ({layer, head}): whatever moves the maps' pickers (a tile, a map row, the lesson, a
        # link) moves it, and every redraw (a new text, another model or snapshot, a generation) keeps it. A gr.State:
        # no part of the /attention endpoint's API.
        selected = gr.State(None)
        outputs = [notes, grid, large, trace, layer, head, shown]

        private = dict(api_visibility="private")
        generated = self.generations_shown(generation, selected, [text, model, *outputs])
        # The text shown is the page's current text: a new one (a button, Enter, another model, a generation) redraws
        # the maps and the step view and greys every other view of the previous one (current.js); a text that cannot
        # be shown leaves no view claiming to be current.
        asked = [text, model]
        kept = [text, model, selected]
        shows = [
            (button.click(self.attention, kept, outputs, api_name="attention"), asked),
            (text.submit(self.attention, kept, outputs, **private), asked),
            # a dropdown's `input` comes twice for one choice (the choice, then the blur): two redraws, and a text the
            # model cannot read showed its message twice ("Error (2)"); `select` comes once
            (model.select(self.attention, kept, outputs, **private), asked),
            *generated,
        ]
        opened = demo.load(self.open_link, asked, [text, model, *outputs, link], **private)
        # a link that cannot be shown: the message, the boxes and the line name what the link asked for
        lost = [shown, current, trace, notes, grid, large, at_step]
        opened.failure(self.link_not_shown, asked, [text, model, *lost], **private)
        for event, inputs in shows:
            event.failure(self.not_shown, inputs, lost, **private)
        shown.change(self.current_line, shown, current, **private)
        shown.change(self.step_choices, shown, at_step, **private)  # a model with snapshots: its maps at step N
        at_step.select(self.attention, [text, at_step, selected], outputs, **private)
        # The chosen head over training, redrawn with the text, the model and the selection: one event for the three
        # changes, the last always drawn (as three, a slow strip of an earlier head could land last and stay)
        changes, last = [shown.change, layer.change, head.change], dict(trigger_mode="always_last", **private)
        gr.on(changes, self.show_over_training, [shown, layer, head], over_training, **last)
        over_training.go(self.attention_at_step, [text, selected], outputs, **private)
        gr.api(self.maps.head_over_training, api_name="head_over_training")
        for picker in (layer, head):  # the grid's outlined tile follows the selection, in the browser
            picker.change(None, [layer, head], None, js=SELECT_TILE_JS, **private)
            picker.change(self.selection_of, [layer, head], selected, queue=False, **private)
        for change in (shown.change, lines_of.input):  # the layer and head move with the page's selection too
            change(self.show_lines, [shown, layer, head, lines_of], lines, **private)
        export_button.click(self.export_shown, [shown, export_what, layer, head], export_file, **private)
        gr.api(self.attention_export, api_name="attention_export")
        gr.api(self.maps.attention_values, api_name="attention_values")
        gr.api(self.maps.attention_why, api_name="attention_why")
        parts = dict(shown=shown, grid=grid, large=large, layer=layer, head=head, text=text, model=model, link=link)
        parts.update(lines=lines, lines_of=lines_of, details=details, over_training=over_training)
        parts.update(notes=notes, trace=trace, selected=selected)
        return SimpleNamespace(**parts)
