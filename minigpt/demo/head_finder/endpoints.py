"""The Head Finder's endpoints, as plain JSON on the demo's state: every head's metrics over a corpus (/head_metrics:
the model's validation text, or a text the visitor gives) and one head's dashboard (/head_dashboard). Their numbers:
measures.py (kept on disk per model and corpus), corpus.py; head_finder/ui.py puts them on the page. No Gradio here."""

import math

from minigpt.demo.core.attention_maps import token_labels
from minigpt.demo.core.inputs import head_index, layer_index
from minigpt.demo.core.models import LanguageModel, split_snapshot_name
from minigpt.demo.core.state import DemoState
from minigpt.demo.head_finder.corpus import Corpus, check_measurable, default_corpus, text_corpus
from minigpt.demo.head_finder.measures import dashboard, head_rows, probe_inductions
from minigpt.demo.head_finder.words import DEFINITIONS
from minigpt.errors import VisitorError


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
    """The section's endpoints, on the demo's state (head_finder/ui.py puts them on the page)."""

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
