"""One head's circuits, as plain JSON (the `head_circuit` endpoint): its OV circuit over tokens, read through what the
layers before it write (the effective embedding) or from the bare embedding, with both copying scores beside what
random circuits of its shape score; its QK circuit over tokens (does a query pick the key that follows its own token?);
its positional QK circuit; and its map on the text with earlier heads ablated (zero, mean or resample), with its weight
on induction targets (the one definition: queries ending a repeated run of 3 tokens). Every number comes from
`minigpt.heads`; the sentences from words.py. No Gradio here."""

import torch

from minigpt.demo.circuits.words import head_circuit_findings
from minigpt.demo.core.attention_maps import heatmap_png, token_labels
from minigpt.demo.core.inputs import head_index, layer_index, parse_heads
from minigpt.demo.core.per_model import PerModel
from minigpt.demo.core.prompt_sets import ordinary_tokens, resample_values
from minigpt.demo.core.texts import COPY_RUN, TextView, repeated_end
from minigpt.errors import VisitorError, shortened
from minigpt.heads import (
    ablated_pass,
    copying_baseline,
    copying_score,
    diagonal_share,
    elhage_copying_score,
    folded_unembedding,
    head_roles,
    induction_pattern,
    ov_circuit,
    positional_qk_circuit,
    qk_circuit,
    role_score,
    run_forward_pass,
)
from minigpt.heads.ablation import check_mode
from minigpt.heads.role_scores import chance_level, excess, measured_jobs, previous_token_pattern

MAX_OV_VOCABULARY = 128  # a vocabulary up to this size: the whole token x token OV circuit; above, the text's rows
OV_TOP = 8  # above it, each source token's top targets
MAX_QK_POSITIONS = 64  # the positional QK circuit drawn over the first positions
MAX_ABLATED_MAP = 64  # tokens of the text for the ablated head's map (the maps drawn as cells)
SOURCES = {"auto": "auto", "effective": "effective", "bare": "bare"}
# The unembedding every head's OV circuit ends in (GPT-2: 154 MB), kept for the last two models the section served.
UNEMBEDDINGS = PerModel(lambda lm: folded_unembedding(lm.model), kept=2)


def checked_source(value) -> str:
    source = str(value or "auto").strip().lower()
    if source not in SOURCES:
        raise VisitorError(f"source must be 'auto', 'effective' or 'bare', got {shortened(value)}.")
    return source


def top_of(row: torch.Tensor, labels: list[str], k: int = 3) -> list[dict]:
    values, indices = row.topk(min(k, row.numel()))
    return [{"token": labels[i], "value": float(v)} for v, i in zip(values.tolist(), indices.tolist())]


def whole_ov(view: TextView, layer: int, head: int, source: str) -> dict:
    """The whole token x token OV circuit of a small vocabulary: its picture, copying scores against random circuits
    of its shape, and the tokens that raise themselves most (the special tokens left out of the counts)."""
    model, vocab = view.lm.model, view.lm.vocab_size
    read = source if source != "auto" else ("effective" if layer > 0 else "bare")
    ov = ov_circuit(model, layer, head, source=read)
    labels = token_labels(view.lm.tokenizer, list(range(vocab)))
    tokens = ordinary_tokens(view.lm)
    scale = float(ov.abs().max()) or 1.0
    bare = copying_score(ov_circuit(model, layer, head, source="bare")) if read == "effective" else None
    return {
        "source": read,
        "whole": True,
        "tokens": labels,
        "text_tokens": sorted(set(view.ids)),  # marked on the picture's axes
        "image": heatmap_png(((ov / scale + 1) / 2).square().numpy(), masked=ov.abs() < -1),
        "scale": scale,
        "copying_score": copying_score(ov),
        "elhage_score": elhage_copying_score(ov),
        "bare_copying_score": bare,
        "baseline": copying_baseline(vocab, model.config.head_dim),
        "self_top": round(diagonal_share(ov, tokens) * len(tokens)),
        "rows_counted": len(tokens),
        "rows": [{"source": labels[s], "top": top_of(ov[s], labels)} for s in sorted(set(view.ids))],
    }


def ov_rows(view: TextView, layer: int, head: int, source: str) -> dict:
    """A large vocabulary's OV circuit: the text's tokens' rows, each one's top targets (those rows alone are
    computed: at GPT-2's size the whole circuit's 50,257 rows took 20 seconds)."""
    read = source if source != "auto" else ("effective" if layer > 0 else "bare")
    sources = sorted(set(view.ids))
    unembedding = UNEMBEDDINGS.get(view.lm)
    values, indices = ov_circuit(view.lm.model, layer, head, OV_TOP, read, tokens=sources, unembedding=unembedding)
    label = lambda ids: token_labels(view.lm.tokenizer, ids)  # noqa: E731

    def targets(row: int) -> list[dict]:
        return [{"token": t, "value": float(v)} for t, v in zip(label(indices[row].tolist()), values[row].tolist())]

    rows = [{"source": label([s])[0], "top": targets(row)} for row, s in enumerate(sources)]
    return {"source": read, "whole": False, "copying_score": None, "rows": rows}


def token_qk(view: TextView, layer: int, head: int) -> dict | None:
    """How often a query on a token picks, among keys, the one that follows that same token (the QK circuit of a
    key's previous token, through the layers before): an induction head's match. None in layer 0, or past
    MAX_OV_VOCABULARY tokens."""
    if layer == 0 or view.lm.vocab_size > MAX_OV_VOCABULARY:
        return None
    tokens = ordinary_tokens(view.lm)
    matching = diagonal_share(qk_circuit(view.lm.model, layer, head, keys="previous"), tokens)
    return {"matching": matching, "chance": 1 / len(tokens)}


def positional(model, layer: int, head: int) -> dict:
    qk = positional_qk_circuit(model, layer, head)[:MAX_QK_POSITIONS, :MAX_QK_POSITIONS]
    weights = qk.softmax(-1)  # each query position's attention from positions alone
    return {
        "positions": qk.shape[0],
        "image": heatmap_png(weights.numpy()),
        "previous_token": float(weights.diagonal(-1).mean()),
        "argmax_offset": (torch.arange(qk.shape[0], device=qk.device) - qk.argmax(-1)).tolist(),
    }


def head_circuit(view: TextView, layer, head, ablate, source="auto", ablation="zero") -> dict:
    """The chosen head's circuits on the text (see the module's docstring), with the sentences they support."""
    config = view.lm.model.config
    layer = layer_index(layer, config.n_layer)
    head = head_index(head, config.n_head, average=False)
    source, mode = checked_source(source), check_mode(str(ablation or "zero").strip().lower())
    whole = view.lm.vocab_size <= MAX_OV_VOCABULARY
    answer = {
        **view.about,
        "layer": layer,
        "head": head,
        "ov": (whole_ov if whole else ov_rows)(view, layer, head, source),
        "token_qk": token_qk(view, layer, head),
        "positional_qk": positional(view.lm.model, layer, head),
        "ablation": ablated_map(view, layer, head, ablate, mode),
        "notes": view.notes,
    }
    answer["findings"] = head_circuit_findings(answer)
    return answer


def ablated_map(view: TextView, layer: int, head: int, ablate, mode: str = "zero") -> dict | None:
    """The head's map on the text as it is and with the `ablate` heads (of earlier layers) ablated (`mode`: zero;
    mean, each head's output averaged over the text's positions; resample, its output on a variant of the text), and
    its weight on induction targets before and after."""
    config = view.lm.model.config
    heads = parse_heads(ablate or "", config.n_layer, config.n_head)
    if not heads:
        return None
    if any(a >= layer for a, _ in heads):
        raise VisitorError(
            f"ablate must name heads of layers before {layer} (they write what head {layer}.{head} reads), got "
            f"{shortened(ablate)}."
        )
    values = resample_values(view.lm, list(view.ids)) if mode == "resample" else None
    after_pass = ablated_pass(view.lm.model, view.recorded, heads, mode, values)
    pattern = induction_pattern(list(view.ids))
    length = min(len(view.ids), MAX_ABLATED_MAP)
    before, after = view.recorded.attentions[layer, head], after_pass.attentions[layer, head]
    queries = int(pattern.any(-1).sum())
    return {
        "ablated": [list(h) for h in heads],
        "mode": mode,
        "tokens": view.tokens[:length],
        "before": before[:length, :length].double().round(decimals=6).tolist(),
        "after": after[:length, :length].double().round(decimals=6).tolist(),
        "induction_queries": queries,
        "induction_before": float(role_score(before, pattern)) if queries else None,
        "induction_after": float(role_score(after, pattern)) if queries else None,
    }


def leading_head(view: TextView, pattern: torch.Tensor, layers: range, bar: float = 0.5) -> str:
    """The head of `layers` with the highest role score on `pattern` (`role_scores.role_score`) on the text shown,
    where it is at least `bar` of the way from chance to 1 (0.5: the role done clearly, `role_scores.above_chance`);
    else "" (also where the pattern marks nothing)."""
    if not layers or not pattern.any():
        return ""
    scores = role_score(view.recorded.attentions[layers.start : layers.stop].float(), pattern)  # (len(layers), H)
    best = int(scores.argmax())
    if excess(float(scores.flatten()[best]), chance_level(pattern)) < bar:
        return ""
    return f"{layers.start + best // scores.shape[1]}.{best % scores.shape[1]}"


def previous_token_head_before(view: TextView, layer: int) -> str:
    """The head of a layer before `layer` that attends most to the previous token on the text shown, where one does
    it clearly; else "". What the Ablate box suggests for a head of `layer`: measured on this model and text, never a
    shipped model's head assumed."""
    if len(view.ids) < 3:  # one query, which can only look back at the start: no role to tell
        return ""
    return leading_head(view, previous_token_pattern(len(view.ids)), range(layer))


def copies_here(view: TextView) -> bool:
    """The circuit walk's premise (circuit_walk.prediction): the text's end repeats at least COPY_RUN tokens, and the
    model's top next token is the token that followed them the first time (what an induction head copies)."""
    found = repeated_end(list(view.ids))
    if found is None or found[1] < COPY_RUN:
        return False
    return int(view.recorded.logits(view.lm.model, -1).argmax()) == view.ids[found[0]]


def copying_head(view: TextView, first_layer: int = 0) -> str:
    """Where the model copies on the text shown (`copies_here`, the walk's premise), the head of layer `first_layer`
    or later with the highest induction score there (the weight on what followed the earlier copy of a repeated
    phrase, `role_scores.induction_pattern`), above chance; else "" (a model that does not copy here, a text that
    repeats nothing). What the boxes naming a head start with (the chosen head, the path patching's receiver):
    measured on this model and text, never a shipped model's head assumed, and never said where the walk says the
    model does not copy."""
    if not copies_here(view):
        return ""
    layers = range(first_layer, view.lm.model.config.n_layer)
    return leading_head(view, induction_pattern(list(view.ids)), layers, bar=0.0)


def jobs_on(model, prompts: torch.Tensor) -> list[list[dict]]:
    """Each head's measured job (`role_scores.measured_jobs`) on a prompt set: its offsets, first token, self and
    same token on the first prompt, induction over them all."""
    roles = head_roles(model, run_forward_pass(model, prompts[0].tolist()), prompts)
    roles.pop("induction_on_text", None)  # the first prompt's: induction is the one over every prompt
    return measured_jobs(roles)


def named_jobs(model, prompts: torch.Tensor, names) -> dict[str, dict]:
    """`jobs_on` the prompts, for the heads named "L.H": what a circuit's words say each of its heads does."""
    jobs = jobs_on(model, prompts)
    return {name: jobs[int(name.split(".")[0])][int(name.split(".")[1])] for name in names}
