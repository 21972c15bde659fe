"""The chosen head at each of the model's training snapshots, on the text shown: how its map formed (the page's strip
beside the roles curve, and the /head_over_training endpoint). Each map is the snapshot model's own recorded pass
(output_attentions), as the maps of `name@N` are. Numbers only: no Gradio."""

from minigpt.demo.core.attention_maps import max_pooled, pool_factor
from minigpt.demo.core.inputs import head_index, layer_index
from minigpt.demo.core.models import snapshot_choices, split_snapshot_name
from minigpt.demo.core.state import DemoState
from minigpt.errors import VisitorError, shortened
from minigpt.heads import induction_pattern, role_score
from minigpt.heads.role_scores import previous_token_pattern

MAX_CELLS = 128  # a map of a longer text is max-pooled to at most this many cells a side (as the grid's tiles are)


def head_over_training(state: DemoState, model: str, text: str, layer=0, head=0) -> dict:
    """Head (`layer`, `head`) of `model` (a name, or name@N: its base model's snapshots) on `text`, at each snapshot
    step and at the end: {model, layer, head, tokens, ids, pooled, steps: [{label, model, weights}]}, each weights a
    (T, T) map, or with `pooled` f > 1 (a text over MAX_CELLS tokens) each cell the largest of f x f weights."""
    base, _ = split_snapshot_name(model)
    final = state.text_view(base, text)  # loaded first: an unknown or broken model is named as every view names it
    choices = snapshot_choices(state.picker, base)
    if not choices:
        raise VisitorError(
            f"The model {shortened(model)} has no training snapshots: train a small model with train.py (or the Train "
            "tab) to see its heads form; the shipped induction and specimen models have them."
        )
    # the snapshots, then the model at the end of training (the last choice, `base` itself: its view is `final`)
    views = [(label, name, state.text_view(name, text)) for label, name in choices[:-1]] + [(*choices[-1], final)]
    config = final.lm.model.config
    layer, head = layer_index(layer, config.n_layer), head_index(head, config.n_head, average=False)
    factor = pool_factor(len(final.ids), MAX_CELLS)
    role, pattern = telling_pattern(list(final.ids))
    return {
        "model": base,
        "layer": layer,
        "head": head,
        "tokens": final.tokens,
        "ids": final.ids,
        "pooled": factor,
        "score_name": role,
        "most_changed": most_changed(views[0][2], final, pattern),
        "steps": [
            {
                "label": label,
                "model": name,
                "weights": pooled_map(view, layer, head, factor),
                "score": float(role_score(view.recorded.attentions[layer, head], pattern)),
            }
            for label, name, view in views
        ],
    }


def telling_pattern(ids: list[int]) -> tuple[str, object]:
    """The role each step's thumbnail is scored by: induction (the one definition) where the text has a query ending a
    repeated run of 3 tokens, else previous token."""
    induction = induction_pattern(ids)
    return ("induction", induction) if induction.any() else ("previous token", previous_token_pattern(len(ids)))


def most_changed(first, final, pattern) -> dict:
    """The head whose score on the text (the thumbnails' role, `pattern`) rises most from the first snapshot to the
    end of training: the head that training taught this text's role, and how much its score rose."""
    rise = role_score(final.recorded.attentions, pattern) - role_score(first.recorded.attentions, pattern)  # (L, H)
    layer, head = divmod(int(rise.argmax()), rise.shape[1])
    return {"layer": layer, "head": head, "change": float(rise.max())}


def pooled_map(view, layer: int, head: int, factor: int) -> list[list[float]]:
    """One head's map of a text view, max-pooled by `factor` (1: every weight as it is)."""
    return max_pooled(view.recorded.attentions[layer, head], factor).tolist()
