"""The Head Finder section: every head of the model the maps show, measured over a corpus (its validation text, or a
text the visitor gives), in a table sortable by any metric; a click on a head opens its dashboard. Endpoints:
/head_metrics and /head_dashboard (plain JSON; the page draws those same answers)."""

import math

import gradio as gr

from minigpt.demo.core.attention_maps import token_labels
from minigpt.demo.core.inputs import head_index, layer_index
from minigpt.demo.core.models import LanguageModel, split_snapshot_name
from minigpt.demo.core.state import DemoState
from minigpt.demo.core.ui import drawn
from minigpt.demo.head_finder.corpus import Corpus, check_measurable, default_corpus, text_corpus
from minigpt.demo.head_finder.endpoints import DEFINITIONS, dashboard, head_rows, probe_inductions
from minigpt.demo.head_finder.view import FINDER_JS, dashboard_with_map, finder_html
from minigpt.errors import VisitorError

PROGRESS = gr.Progress()  # Gradio fills a handler's progress parameter when its default is one


def without_nan(value):
    """NaN (a metric with nothing to measure: no repeated token for induction) as None: JSON has no NaN."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, list):
        return [without_nan(v) for v in value]
    if isinstance(value, dict):
        return {k: without_nan(v) for k, v in value.items()}
    return value


class HeadFinder:
    """The section's endpoints, on the demo's state; `layout` builds it on the page."""

    def __init__(self, state: DemoState):
        self.state = state

    def corpus_for(self, lm: LanguageModel, text) -> Corpus:
        """A visitor's text, else the model's validation text (built once per model)."""
        if text is not None and not isinstance(text, str):
            raise VisitorError(f"The corpus must be text, got {type(text).__name__}.")
        check_measurable(lm)  # in well under a second, before any text is read or tokenized
        if text and text.strip():
            return text_corpus(lm, text)
        base, _ = split_snapshot_name(lm.name)
        source = self.state.picker.sources[base]
        return self.state.head_metrics.default_corpus(lm.name, lambda: default_corpus(lm, source))

    def measured(self, model, text, progress=lambda fraction: None) -> tuple[LanguageModel, Corpus, dict]:
        lm = self.state.picker.get(model or self.state.names_default)
        corpus = self.corpus_for(lm, text)
        base, _ = split_snapshot_name(lm.name)
        return lm, corpus, self.state.head_metrics.measured(lm, self.state.picker.sources[base], corpus, progress)

    def head_metrics(self, model: str | None = None, text: str = "") -> dict:
        """Every head's metrics over a corpus: `text` (a model of names: one name a line), or when empty the model's
        validation text. Per metric a layer x head list; `heads`: one row per head (with its clear role, if any);
        `chance`: each metric for a head spreading its weight evenly; the corpus it was measured on."""
        return self.metrics_answer(*self.measured(model, text))

    @staticmethod
    def metrics_answer(lm: LanguageModel, corpus: Corpus, result: dict) -> dict:
        ablation_note = []
        if result["ablation_tokens"] < corpus.tokens - len(corpus.windows):
            ablation_note = [f"Ablation measured on the first {result['ablation_tokens']:,} predicted tokens."]
        return without_nan(
            {
                "model": lm.name,
                "corpus": corpus.about(),
                "notes": corpus.notes + ablation_note,
                "metrics": result["metrics"],
                "chance": result["chance"],
                "heads": head_rows(result),
                "probe": probe_inductions(lm),  # where a head's corpus role hides what it does on repeats
                "definitions": DEFINITIONS,
                "queries": result["queries"],
                "ablation_tokens": result["ablation_tokens"],
                "plain_loss": result["plain_loss"],
                "seconds": result["seconds"],
                "cached": result["cached"],
            }
        )

    def head_dashboard(
        self, model: str | None = None, layer: int = 0, head: int = 0, text: str = "", map_text: str = ""
    ) -> dict:
        """One head over the corpus of /head_metrics (`text`; empty: the validation text): its metrics, their chance
        levels and its rank among the heads, its distance histogram, its strongest role and the corpus windows where
        it does that most (each token with the head's weight), and its map on `map_text` (empty: the best window)."""
        config = self.state.picker.get(model or self.state.names_default).model.config
        layer = layer_index(layer, config.n_layer)  # checked before the measure, which may take a while
        head = head_index(head, config.n_head, average=False)
        if map_text is not None and not isinstance(map_text, str):
            raise VisitorError(f"map_text must be text, got {type(map_text).__name__}.")
        lm, corpus, result = self.measured(model, text)
        answer = dashboard(result, corpus, lm, self.state.passes, layer, head)
        if map_text:
            view = self.state.text_view(lm.name, map_text)
            ids, tokens, key = view.ids, view.tokens, view.key
        else:
            best = answer["examples"][0] if answer["examples"] else {"window": 0, "query": len(corpus.windows[0]) - 1}
            ids = corpus.windows[best["window"]][: best["query"] + 1]
            tokens, key = token_labels(lm.tokenizer, ids), None
        weights = self.state.passes.get(lm.model, ids).attentions[layer, head]
        map_ = {"ids": list(ids), "tokens": tokens, "weights": weights.tolist()}
        return without_nan(
            {"model": lm.name, "corpus": corpus.about(), "block_size": config.block_size, **answer, "map": map_}
        ) | ({"map_key": key} if key else {})

    # ---- the page ----

    def show_finder(self, shown: dict | None, text: str, progress=PROGRESS):
        """The table of the shown text's model, measured on its corpus: out of date once another model is shown (its
        numbers do not depend on the text of the maps)."""

        def draw(_, model):
            measured = self.measured(model, text, lambda f: progress(f, desc="Measuring every head"))
            return finder_html(self.metrics_answer(*measured))

        return drawn(shown, draw, of_model=True), ""

    def show_dashboard(self, shown: dict | None, text: str, event: gr.EventData):
        """One head's dashboard, with its map on the text shown."""
        layer, head = int(event.layer), int(event.head)

        return drawn(
            shown,
            lambda shown_text, model: dashboard_with_map(self.head_dashboard(model, layer, head, text, shown_text)),
        )

    def layout(self, maps):
        """The section, on the model and text the maps show (`maps.shown`)."""
        shown = maps.shown
        gr.Markdown(
            "Every head of the model above, measured over many windows of text instead of one: where it looks, how "
            "spread and how far, and how much the model needs it. Empty corpus: the model's own validation text."
        )
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
        for endpoint in (self.head_metrics, self.head_dashboard):
            gr.api(endpoint, api_name=endpoint.__name__)
        private = dict(api_visibility="private")
        button.click(self.show_finder, [shown, corpus], [table, board], **private)
        table.open(self.show_dashboard, [shown, corpus], board, **private)
