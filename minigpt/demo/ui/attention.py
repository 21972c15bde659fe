"""The attention maps section: every head of every layer of the text shown, one head large (hover, zoom, pan), the
export, the shape trace, and the line naming the text every view below belongs to. Endpoints: /attention,
/attention_values, /attention_export; the enlarged maps' server functions."""

import functools
import re
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import pandas
from gradio.data_classes import FileData  # a file returned by an API-only endpoint, gr.api

from minigpt.demo.attention_export import GRID_SVG_UP_TO, grid_png, grid_svg, map_slide_png, save_weights
from minigpt.demo.attention_maps import Window, data_uri, head_matrix, query_weights
from minigpt.demo.choices import head_index, layer_index, number, token_position
from minigpt.demo.cores import pass_work
from minigpt.demo.links import read_link
from minigpt.demo.models import snapshot_choices, split_snapshot_name
from minigpt.demo.over_training import head_over_training
from minigpt.demo.state import DemoState
from minigpt.demo.texts import MAX_FILE_NUMBERS, TextView, check_every_map, text_label
from minigpt.demo.ui.components import notes_markdown, unchecked
from minigpt.demo.ui.errors import answers_visitors
from minigpt.demo.views.insights import CURRENT_JS, belongs_to, current_html, error_html, lost_html
from minigpt.demo.views.lines import LINES_JS, lines_html
from minigpt.demo.views.maps import (
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
from minigpt.errors import VISITORS_MISTAKES, VisitorError, shortened
from minigpt.heads.shapes import trace_steps, trace_table

LINES_OF = [("this head", "head"), ("every head of the layer, in colours", "layer")]  # the line view's choice

EXPORTS = {  # what the export offers: {value (the API's `what`): label}
    "safetensors": "all weights (.safetensors, bertviz layout)",
    "npz": "all weights (.npz, bertviz layout)",
    "map.png": "the chosen map (.png for a slide: full resolution, tokens, title, colour bar)",
    "grid.png": "every map (.png)",
    "grid.svg": f"every map (.svg, texts up to {GRID_SVG_UP_TO} tokens)",
}


def checked_head(view: TextView, layer, head) -> tuple[int, int | str]:
    """`layer` and `head` as a request names them (head: a number, or "mean" for the layer's average), checked
    against the model."""
    config = view.lm.model.config
    return layer_index(layer, config.n_layer), head_index(head, config.n_head)


def kept_head(selected: dict | None, n_layer: int, n_head: int) -> tuple[int, int | str, str | None]:
    """The page's selection ({layer, head}: the maps' pickers, kept over redraws) in a model of that shape: the same
    layer and head where it has them, else the nearest, with a line saying so (None: nothing moved)."""
    if not selected:
        return 0, 0, None
    try:
        layer, head = int(selected.get("layer") or 0), selected.get("head")
        head = "mean" if str(head) == "mean" else int(head or 0)
    except (TypeError, ValueError):
        return 0, 0, None
    kept_layer = min(max(layer, 0), n_layer - 1)
    kept = head if head == "mean" else min(max(head, 0), n_head - 1)
    if (kept_layer, kept) == (layer, head):
        return layer, head, None
    name = lambda at, h: f"the average of layer {at}" if h == "mean" else f"head {at}.{h}"  # noqa: E731
    return kept_layer, kept, f"{name(layer, head)} does not exist in this model: showing {name(kept_layer, kept)}."


def layer_and_head_choices(n_layer: int, n_head: int, layer: int = 0, head: int | str = 0):
    layers = gr.Dropdown(choices=[(f"layer {i}", i) for i in range(n_layer)], value=layer)
    heads = gr.Dropdown(choices=[(f"head {h}", str(h)) for h in range(n_head)] + [("average", "mean")], value=str(head))
    return layers, heads


class AttentionMaps:
    """The section's endpoints, on the demo's state; `layout` builds it on the page."""

    def __init__(self, state: DemoState):
        self.state = state

    def attention(self, text: str = "emma", model: str | None = None, selected: dict | None = None):
        """Attention maps of `text` for every layer and head, the chosen head large, and the shape trace. `selected`:
        the page's selection ({layer, head}, a gr.State: not part of the API), kept where the model has that head."""
        model = model or self.state.names_default
        view = self.state.text_view(model, text or "")
        config = view.lm.model.config
        layer, head, moved = kept_head(selected, config.n_layer, config.n_head)
        # The pass, the trace and the drawing: on every core when this visitor is alone with a big enough text
        with self.state.cores.threads_for(pass_work(config, len(view.ids))):
            weights = view.recorded.attentions  # (L, H, T, T)
            sizes = dict(B=1, T=len(view.tokens), C=config.n_embd, H=config.n_head, D=config.head_dim)
            headers, rows = trace_table(trace_steps(view.lm.model.model.layers[0].attn, view.recorded, 0), sizes)
            shown = view.shown
            grid = belongs_to(view.key, view.label, grid_html(weights, view.tokens, (layer, str(head))))
            # the last token's row outlined: the lesson's query until another is chosen
            large = head_html(weights, view.tokens, layer, str(head), shown, query=len(view.ids) - 1, moved=moved)
        notes = ([moved] if moved else []) + view.notes + [f"{len(view.tokens)} tokens: {' '.join(view.tokens)}"]
        return (
            notes_markdown(notes),
            grid,
            belongs_to(view.key, view.label, large),
            pandas.DataFrame(rows, columns=headers),
            *layer_and_head_choices(config.n_layer, config.n_head, layer, head),
            shown,
        )

    def open_link(self, text: str, model: str, request: gr.Request):
        """The page opens: the view its link names (?model=&text=&layer=&head=&query=, minigpt/demo/links.py), else the
        text and model in the boxes; the link's choices go on to the step view (`link`)."""
        link = read_link(request.query_params if request is not None else {})
        text, model = link.get("text", text), link.get("model", model)
        notes, grid, large, trace, layer, head, shown = self.attention(text, model)
        if "layer" in link or "head" in link:
            view = self.state.text_view(model, text)
            chosen = checked_head(view, link.get("layer", 0), link.get("head", 0))
            layer, head = layer_and_head_choices(view.lm.model.config.n_layer, view.lm.model.config.n_head, *chosen)
            try:  # the link's query outlined; one the text does not have is the lesson's to explain
                query = token_position(link.get("query"), len(view.ids), "query", default=len(view.ids) - 1, last=False)
            except VISITORS_MISTAKES:
                query = None
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
        """The training steps the shown model has snapshots of ("name@N"; "final" last), shown only if it has any."""
        if not shown:
            return gr.skip()
        choices = snapshot_choices(self.state.picker, shown["model"])
        return gr.Dropdown(choices=choices, value=shown["model"] if choices else None, visible=bool(choices))

    def head_over_training(self, text: str = "emma", model: str | None = None, layer: int = 0, head: str = "0") -> dict:
        """The chosen head of a model with training snapshots, on the text, at each snapshot step and at the end:
        {model, layer, head, tokens, ids, pooled, steps: [{label, model ("name@N"), weights: the (T, T) map}]}
        (weights max-pooled, `pooled` x `pooled` weights a cell, past 128 tokens)."""
        return head_over_training(self.state, model or self.state.names_default, text or "", layer, head)

    def show_over_training(self, shown: dict | None, layer, head):
        """The strip of the chosen head at each snapshot, with the model's roles curve: only for a model with
        snapshots; a visitor's choice it cannot draw (the layer's average) says so in its place."""
        if not shown or not snapshot_choices(self.state.picker, shown["model"]):
            return gr.HTML("", visible=False)
        try:
            answer = self.head_over_training(shown["text"], shown["model"], layer, head)
            drawn = over_training_html(answer, shown["model"], self.roles_curve(answer["model"]))
        except VISITORS_MISTAKES as error:
            drawn = error_html(str(error))
        return gr.HTML(belongs_to(shown["key"], shown["label"], drawn), visible=True)

    def roles_curve(self, model: str) -> str | None:
        """The model folder's roles curve (train.py draws it from the roles log), as a data URI; None without one."""
        curve = Path(self.state.picker.sources.get(model, "")) / "roles_curve.png"
        return curve_uri(str(curve), curve.stat().st_mtime_ns) if curve.is_file() else None

    def attention_at_step(self, text: str, selected: dict | None, event: gr.EventData):
        """A click on a step of the strip (its `go` event: {model}): the page at that step."""
        model = getattr(event, "model", None)
        base, _ = split_snapshot_name(model)
        if not base or not any(name == model for _, name in snapshot_choices(self.state.picker, base)):
            raise VisitorError(f"There is no snapshot {shortened(model)} to show.")
        return self.attention(text, model, selected)

    def show_lines(self, shown: dict | None, layer, head, lines_of: str = "head", query: int | None = None):
        """The line view of the layer: that head, or every head of the layer (`lines_of` "layer", or the average
        chosen), the query's token marked."""
        if not shown:
            return gr.skip()
        view = self.state.text_view(shown["model"], shown["text"])
        layer, head = checked_head(view, layer, head)
        weights = view.recorded.attentions[layer]  # (H, T, T)
        heads = range(len(weights)) if lines_of == "layer" or head == "mean" else [head]
        drawn = lines_html({h: weights[h].tolist() for h in heads}, view.tokens, layer, query)
        return belongs_to(view.key, view.label, drawn)

    def asked_view(self, asked) -> tuple[TextView, int, int | str]:
        """The text view, layer and head of a request from the enlarged maps' JavaScript (head.js): a dict."""
        if not isinstance(asked, dict):
            raise VisitorError("Expected {model, text, layer, head, ...}.")
        view = self.state.text_view(str(asked.get("model") or self.state.names_default), str(asked.get("text") or ""))
        layer, head = checked_head(view, asked.get("layer"), asked.get("head"))
        if self.state.passes.cached(view.lm.model, view.ids) is None:
            with self.state.unqueued_passes:
                view.recorded  # noqa: B018  (computed now, then served from the cache)
        return view, layer, head

    def attention_window(self, asked: dict) -> str:
        """For head.js (zoom and pan): one enlarged map showing the window {row, col, size} asked for, fitted to the
        map."""
        view, layer, head = self.asked_view(asked)
        size = number("size", asked.get("size"), len(view.ids), int)
        row, col = number("row", asked.get("row"), 0, int), number("col", asked.get("col"), 0, int)
        window = Window.fit(len(view.ids), row, col, size)
        matrix = head_matrix(view.recorded.attentions, layer, head)
        query = asked.get("query")
        query = (
            token_position(query, len(view.ids), "query", default=0, last=False) if query not in (None, "") else None
        )
        return figure_body(matrix, view.tokens, head_caption(layer, head), window, query)

    def attention_row(self, asked: dict) -> dict:
        """For head.js (hover): the exact weights of one query over the keys it sees."""
        view, layer, head = self.asked_view(asked)
        query = token_position(asked.get("query"), len(view.ids), "query", default=0, last=False)
        weights = query_weights(view.recorded.attentions, layer, head, query)
        return {"query": query, "weights": weights, "view": view.key}  # the page uses it only while that view is shown

    def attention_values(
        self,
        text: str = "emma",
        model: str | None = None,
        layer: int = 0,
        head: str = "0",
        query: int = 0,
        key: int | None = None,
    ) -> dict:
        """The exact attention weights (float32) of one query token over the keys it sees (0 .. query), or of one
        (query, key) cell. head: a number, or "mean" for the average over the layer's heads."""
        view = self.state.text_view(model or self.state.names_default, text or "")
        layer, head = checked_head(view, layer, head)
        query = token_position(query, len(view.ids), "query", default=0, last=False)
        weights = query_weights(view.recorded.attentions, layer, head, query)
        if key is None or key == "":
            return {"query": query, "key": None, "tokens": view.tokens[: query + 1], "weights": weights}
        key = token_position(key, len(view.ids), "key", default=0, last=False)
        weight = weights[key] if key <= query else 0.0  # a future key: masked, weight 0
        return {"query": query, "key": key, "tokens": [view.tokens[query], view.tokens[key]], "weights": [weight]}

    def attention_export(
        self, text: str = "emma", model: str | None = None, what: str = "safetensors", layer: int = 0, head: str = "0"
    ) -> FileData:
        """A file of the text's attention. what: "safetensors" or "npz" (every layer's (1, heads, T, T) weights, the
        tokens and ids, as bertviz takes them), "map.png" (one head, or "mean", at full resolution), "grid.png" or
        "grid.svg" (every map)."""
        return FileData(path=str(self.export_file(model or self.state.names_default, text or "", what, layer, head)))

    def export_file(self, model: str, text: str, what: str, layer, head) -> Path:
        if what not in EXPORTS:
            raise VisitorError(f"what must be one of {', '.join(EXPORTS)}, got {shortened(what)}.")
        view = self.state.text_view(model, text)
        layer, head = checked_head(view, layer, head)
        if what != "map.png":
            instead = "export one head's map (map.png)"
            check_every_map(view, len(view.ids), f"The {what} export", instead, MAX_FILE_NUMBERS)
        attentions = view.recorded.attentions  # (L, H, T, T)
        name = re.sub(r"[^A-Za-z0-9_.-]+", "-", model)[:60]  # a file name's part: safe characters, and short
        path = self.state.export_folder() / f"attention-{name}-{len(view.ids)}-tokens"
        if what in ("safetensors", "npz"):
            return save_weights(path.with_suffix("." + what), attentions, view.tokens, view.ids)
        if what == "grid.svg" and len(view.ids) > GRID_SVG_UP_TO:
            raise VisitorError(
                f"The text is {len(view.ids)} tokens: the grid as SVG is for texts of at most "
                f"{GRID_SVG_UP_TO}; export it as PNG."
            )
        if what == "map.png":
            path = path.with_name(f"{path.name}-layer-{layer}-{'average' if head == 'mean' else f'head-{head}'}.png")
            title = f"{model}: {head_caption(layer, head)}"
            path.write_bytes(map_slide_png(head_matrix(attentions, layer, head), view.tokens, title))
        elif what == "grid.png":
            path = path.with_suffix(".png")
            path.write_bytes(grid_png(attentions))
        else:
            path = path.with_suffix(".svg")
            path.write_text(grid_svg(attentions, view.tokens))
        return path

    def export_shown(self, shown: dict | None, what: str, layer: int, head: str):
        """The page's export: of the text whose maps are shown."""
        if not shown:
            raise VisitorError("Show the attention of a text first.")
        return str(self.export_file(shown["model"], shown["text"], what, layer, head))

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
        # written (the maps with gr.skip()), which also takes Gradio's error badge off each.
        return None, lost_html(label), None, "", gr.skip(), gr.skip()

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
            server_functions=[answers_visitors(self.attention_window), answers_visitors(self.attention_row)],
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
        g = generation
        names_shown = g.names_event.success(
            self.attention_of_sample, [g.name_pick, g.names_model, selected], [text, model, *outputs], **private
        )
        # another of the generated names: its maps
        name_picked = g.name_pick.select(
            self.attention_of_sample, [g.name_pick, g.names_model, selected], [text, model, *outputs], **private
        )
        text_shown = g.text_event.success(
            self.attention_of_sample, [g.text_out, g.text_model, selected], [text, model, *outputs], **private
        )
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
            (names_shown, [g.name_pick, g.names_model]),
            (name_picked, [g.name_pick, g.names_model]),
            (text_shown, [g.text_out, g.text_model]),
        ]
        opened = demo.load(self.open_link, asked, [text, model, *outputs, link], **private)
        # a link that cannot be shown: the message, the boxes and the line name what the link asked for
        opened.failure(self.link_not_shown, asked, [text, model, shown, current, trace, notes, grid, large], **private)
        for event, inputs in shows:
            event.failure(self.not_shown, inputs, [shown, current, trace, notes, grid, large], **private)
        shown.change(self.current_line, shown, current, **private)
        shown.change(self.step_choices, shown, at_step, **private)  # a model with snapshots: its maps at step N
        at_step.select(self.attention, [text, at_step, selected], outputs, **private)
        # The chosen head over training: redrawn with the text, the model and the selection; a click on a step shows it
        for change in (shown.change, layer.change, head.change):
            change(self.show_over_training, [shown, layer, head], over_training, **private)
        over_training.go(self.attention_at_step, [text, selected], outputs, **private)
        gr.api(self.head_over_training, api_name="head_over_training")
        for picker in (layer, head):  # the grid's outlined tile follows the selection, in the browser
            picker.change(None, [layer, head], None, js=SELECT_TILE_JS, **private)
            picker.change(self.selection_of, [layer, head], selected, queue=False, **private)
        for change in (shown.change, lines_of.input):  # the layer and head move with the page's selection too
            change(self.show_lines, [shown, layer, head, lines_of], lines, **private)
        export_button.click(self.export_shown, [shown, export_what, layer, head], export_file, **private)
        gr.api(self.attention_export, api_name="attention_export")
        gr.api(self.attention_values, api_name="attention_values")
        parts = dict(shown=shown, grid=grid, large=large, layer=layer, head=head, text=text, model=model, link=link)
        parts.update(lines=lines, lines_of=lines_of, details=details)
        return SimpleNamespace(**parts)


@functools.lru_cache(maxsize=16)
def curve_uri(path: str, modified: int) -> str:
    """A roles curve as a data URI, read once per version of the file (`modified`: its mtime), not at every redraw."""
    return data_uri(Path(path).read_bytes())
