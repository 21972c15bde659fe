"""The attention maps section's numbers and endpoints: the text's maps (/attention: its recorded pass, the head the page
keeps selected in a model of another shape, the shape trace of its first attention sublayer), exact weights
(/attention_values, and the enlarged maps' hover), one map's window (their zoom and pan), the chosen head over training
(/head_over_training) and the model's roles curve, the weights and images as files (/attention_export), and the head
and query a link names. maps/ui.py puts them on the page; maps/view.py, maps/lines_view.py and maps/export_view.py
draw. No Gradio here."""

import functools
import re
from pathlib import Path

from minigpt.demo.core.attention_maps import Window, data_uri, query_weights
from minigpt.demo.core.cores import pass_work
from minigpt.demo.core.inputs import head_index, layer_index, number, token_position
from minigpt.demo.core.models import snapshot_choices, split_snapshot_name
from minigpt.demo.core.state import DemoState
from minigpt.demo.core.texts import MAX_FILE_NUMBERS, TextView, check_every_map
from minigpt.demo.maps.export import GRID_SVG_UP_TO, save_weights
from minigpt.demo.maps.over_training import head_over_training
from minigpt.demo.maps.why import attention_why
from minigpt.errors import VISITORS_MISTAKES, VisitorError, shortened
from minigpt.heads.shapes import trace_steps, trace_table

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


def text_notes(view: TextView, moved: str | None) -> list[str]:
    """The notes under the maps: the selection moved (if it did), the text's own notes, its tokens."""
    return ([moved] if moved else []) + view.notes + [f"{len(view.tokens)} tokens: {' '.join(view.tokens)}"]


def shape_trace(view: TextView) -> tuple[list[str], list[list]]:
    """The shape trace of the text's first attention sublayer (minigpt/heads/shapes.py): its headers and rows."""
    config = view.lm.model.config
    sizes = dict(B=1, T=len(view.tokens), C=config.n_embd, H=config.n_head, D=config.head_dim)
    return trace_table(trace_steps(view.lm.model.model.layers[0].attn, view.recorded, 0), sizes)


@functools.lru_cache(maxsize=16)
def curve_uri(path: str, modified: int) -> str:
    """A roles curve as a data URI, read once per version of the file (`modified`: its mtime), not at every redraw."""
    return data_uri(Path(path).read_bytes())


class AttentionMaps:
    """The section's numbers and endpoints, on the demo's state (maps/ui.py puts them on the page). `draw_export(what,
    attentions, tokens, model, layer, head)` makes an export's image (maps/export_view.drawn_export: the ui hands it
    in)."""

    def __init__(self, state: DemoState, draw_export=None):
        self.state, self.draw_export = state, draw_export

    def attention(self, text: str = "emma", model: str | None = None, selected: dict | None = None) -> dict:
        """Attention maps of `text` for every layer and head, the chosen head large, and the shape trace. `selected`:
        the page's selection ({layer, head}, a gr.State: not part of the API), kept where the model has that head."""
        model = model or self.state.names_default
        view = self.state.text_view(model, text or "")
        config = view.lm.model.config
        layer, head, moved = kept_head(selected, config.n_layer, config.n_head)
        with self.every_core(view):  # the pass and the trace (the drawing: the page's, on every core as well)
            view.recorded  # noqa: B018  (computed now, then served from the cache)
            headers, rows = shape_trace(view)
        return {
            "shown": view.shown,
            "layer": layer,
            "head": head,
            "moved": moved,
            "notes": text_notes(view, moved),
            "trace": {"headers": headers, "rows": rows},
            "layers": config.n_layer,
            "heads": config.n_head,
        }

    def every_core(self, view: TextView):
        """The pass and the drawing of a text's maps: on every core when this visitor is alone with a big enough
        text (a context manager)."""
        return self.state.cores.threads_for(pass_work(view.lm.model.config, len(view.ids)))

    def linked_head(self, link: dict, text: str, model: str) -> tuple[TextView, tuple[int, int | str], int | None]:
        """The text view, (layer, head) and query a link names (links.read_link's), checked against the model; a
        query the text does not have is None (the lesson's to explain)."""
        view = self.state.text_view(model, text)
        chosen = checked_head(view, link.get("layer", 0), link.get("head", 0))
        try:
            query = token_position(link.get("query"), len(view.ids), "query", default=len(view.ids) - 1, last=False)
        except VISITORS_MISTAKES:
            query = None
        return view, chosen, query

    def head_over_training(self, text: str = "emma", model: str | None = None, layer: int = 0, head: str = "0") -> dict:
        """The chosen head of a model with training snapshots, on the text, at each snapshot step and at the end:
        {model, layer, head, tokens, ids, pooled, steps: [{label, model ("name@N"), weights: the (T, T) map}]}
        (weights max-pooled, `pooled` x `pooled` weights a cell, past 128 tokens)."""
        return head_over_training(self.state, model or self.state.names_default, text or "", layer, head)

    def roles_curve(self, model: str) -> str | None:
        """The model folder's roles curve (train.py draws it from the roles log), as a data URI; None without one."""
        curve = Path(self.state.picker.sources.get(model, "")) / "roles_curve.png"
        return curve_uri(str(curve), curve.stat().st_mtime_ns) if curve.is_file() else None

    def snapshot(self, model) -> str:
        """`model`, checked to be one of the training snapshots ("name@N") on offer."""
        base, _ = split_snapshot_name(model)
        if not base or not any(name == model for _, name in snapshot_choices(self.state.picker, base)):
            raise VisitorError(f"There is no snapshot {shortened(model)} to show.")
        return model

    def line_weights(self, shown: dict, layer, head, lines_of: str = "head") -> tuple[TextView, int, dict]:
        """The line view's weights of the shown text: that head's, or every head's of the layer (`lines_of` "layer",
        or the average chosen): (view, layer, {head: (T, T) list})."""
        view = self.state.text_view(shown["model"], shown["text"])
        layer, head = checked_head(view, layer, head)
        weights = view.recorded.attentions[layer]  # (H, T, T)
        heads = range(len(weights)) if lines_of == "layer" or head == "mean" else [head]
        return view, layer, {h: weights[h].tolist() for h in heads}

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

    def window(self, asked: dict) -> tuple[TextView, int, int | str, Window, int | None]:
        """For head.js (zoom and pan): the view, layer, head, the window {row, col, size} asked for fitted to the map,
        and the query to outline (None: none)."""
        view, layer, head = self.asked_view(asked)
        size = number("size", asked.get("size"), len(view.ids), int)
        row, col = number("row", asked.get("row"), 0, int), number("col", asked.get("col"), 0, int)
        window = Window.fit(len(view.ids), row, col, size)
        query = asked.get("query")
        query = (
            token_position(query, len(view.ids), "query", default=0, last=False) if query not in (None, "") else None
        )
        return view, layer, head, window, query

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

    def attention_why(
        self,
        text: str = "emma",
        model: str | None = None,
        layer: int = 0,
        head: int = 0,
        query: int = -1,
        key: int | None = None,
    ) -> dict:
        """Why head `layer`.`head` attends from `query` (from 0; -1: the last token) to `key` (empty: the key it
        weighs most): its score q·k/sqrt(D) split into what each part of the stream (the token and position
        embeddings, each earlier head, attention bias and MLP, the constant) puts into the query times what each puts
        into the key, the layer norm's divisor fixed at each position; the table (its entries sum to the score), each
        side's totals, every key's score and weight, the runner-up key's totals, and the sentences they support."""
        view = self.state.text_view(model or self.state.names_default, text or "")
        config = view.lm.model.config
        layer, head = layer_index(layer, config.n_layer), head_index(head, config.n_head, average=False)
        query = token_position(query, len(view.ids), "query")
        key = None if key in (None, "") else token_position(key, len(view.ids), "key", last=False)
        with self.every_core(view):
            return attention_why(view, layer, head, query, key)

    def attention_export(
        self, text: str = "emma", model: str | None = None, what: str = "safetensors", layer: int = 0, head: str = "0"
    ) -> str:
        """A file of the text's attention. what: "safetensors" or "npz" (every layer's (1, heads, T, T) weights, the
        tokens and ids, as bertviz takes them), "map.png" (one head, or "mean", at full resolution), "grid.png" or
        "grid.svg" (every map)."""
        return str(self.export_file(model or self.state.names_default, text or "", what, layer, head))

    def export_file(self, model: str, text: str, what: str, layer, head) -> Path:
        """The file `what` (EXPORTS) of the text's attention, in a fresh export folder: the weights, or an image that
        `draw_export` makes."""
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
        else:
            path = path.with_suffix(".png" if what == "grid.png" else ".svg")
        drawn = self.draw_export(what, attentions, view.tokens, model, layer, head)
        if isinstance(drawn, bytes):
            path.write_bytes(drawn)
        else:
            path.write_text(drawn)
        return path
