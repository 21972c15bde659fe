"""The circuits section's numbers, as plain JSON: direct logit attribution, activation patching (heads and the
residual stream) and path patching into one head's q, k or v, composition scores against their random baseline, one
head's OV and positional QK circuits, and one head's map with another head ablated. Each answer carries the model and
the token ids it was computed for. Every number comes from `minigpt.heads` (attribution, patching, weights,
insights); nothing here knows of Gradio. The "change one token" helper proposes a corrupted text for patching."""

import threading
from collections.abc import Callable

import torch

from minigpt.demo.attention_maps import heatmap_png, token_labels
from minigpt.demo.choices import head_index, layer_index, number, parse_heads, token_position
from minigpt.demo.cores import pass_work
from minigpt.demo.texts import TextView, encode
from minigpt.errors import VisitorError, shortened
from minigpt.heads import (
    composition_baseline,
    composition_scores,
    copying_score,
    logit_attribution,
    ov_circuit,
    patch_heads,
    patch_path,
    patch_residual,
    positional_qk_circuit,
)
from minigpt.heads import insights as head_insights

MAX_PATCH_TOKENS = 64  # patching runs the model once per head and once per (layer, position), batched
PATCH_BATCH = 32
PATCH_WORK = 2e12  # multiply-adds of all the patched runs together: about a minute on two CPU cores
MAX_OV_VOCABULARY = 128  # a vocabulary up to this size: the whole token x token OV circuit; above, the text's rows
OV_TOP = 8  # above it, each source token's top targets
MAX_QK_POSITIONS = 64  # the positional QK circuit drawn over the first positions
MAX_ABLATED_MAP = 64  # tokens of the text for the ablated head's map (the maps drawn as cells)
MAX_TOKEN_CHARS = 256  # a token's text, checked before tokenizing: longer than any vocabulary's tokens
TOP_NAMED = 5  # the largest contributions named in words, and the strongest composition edges

Progress = Callable[[float, str], None] | None


def labels_of(view: TextView, ids: list[int]) -> list[str]:
    return token_labels(view.lm.tokenizer, ids)


def token_id(view: TextView, value, name: str) -> int | None:
    """A token to attribute to, as its text (a single token of the model: 'i', ' Juliet'); left out: None. Checked
    as the text field is (characters the model does not know, half characters), and cut before it is tokenized."""
    if value is None or value == "":
        return None
    value = str(value)
    if len(value) > MAX_TOKEN_CHARS:
        raise VisitorError(
            f"{name} is {len(value):,} characters long: a single token is at most {MAX_TOKEN_CHARS}. Give one token, "
            "such as the next letter."
        )
    ids = encode(view.lm, value, name)
    if len(ids) != 1:
        raise VisitorError(
            f"{name} must be one token of the {view.lm.name} model, but {shortened(value)} is {len(ids)} tokens. "
            "Give a single token, such as the next letter."
        )
    return ids[0]


def attribution(view: TextView, position, token, other_token) -> dict:
    """Each component's direct contribution to the logit of `token` (default: the model's top-1) after `position`,
    or to logit(token) - logit(other_token); heads as a layer x head grid, the largest named."""
    position = token_position(position, len(view.ids), "position")
    token, other = token_id(view, token, "token"), token_id(view, other_token, "other_token")
    if other is not None and token is not None and other == token:
        raise VisitorError("token and other_token are the same token: give two different tokens (or leave other out).")
    found = logit_attribution(view.lm.model, view.ids, position, token, other)
    values = found.values.tolist()
    order = sorted(range(len(values)), key=lambda i: -abs(values[i]))
    named = [{"component": found.labels[i], "value": values[i]} for i in order[:TOP_NAMED]]
    return {
        **view.about,
        "position": position,
        "token": {"id": found.token, "token": labels_of(view, [found.token])[0]},
        "other_token": None if other is None else {"id": other, "token": labels_of(view, [other])[0]},
        "logit": found.logit,
        "bias_term": found.bias_term,
        "components": [{"component": c, "value": v} for c, v in zip(found.labels, values)],
        "heads": found.heads.tolist(),
        "largest": named,
        "notes": view.notes,
    }


def patch_work(config, length: int) -> float:
    """Multiply-adds of patching a text of `length` tokens: one pass per head and one per (layer, position)."""
    return (config.n_layer * (config.n_head + length) + 2) * pass_work(config, length)


def check_patch_length(view: TextView) -> None:
    """Patching is refused past MAX_PATCH_TOKENS tokens, or past PATCH_WORK multiply-adds (GPT-2: 38 tokens)."""
    config, length = view.lm.model.config, len(view.ids)
    longest = max((n for n in range(2, MAX_PATCH_TOKENS + 1) if patch_work(config, n) <= PATCH_WORK), default=2)
    if length > longest:
        raise VisitorError(
            f"The text is {length} tokens (start token included): patching runs the model once per head and once "
            f"per layer and position, and this server does it for texts of at most {longest} tokens on the "
            f"{view.lm.name} model. Shorten both texts."
        )


def sender_of(spec: str, n_layer: int, n_head: int, receiver_layer: int) -> tuple:
    """'0.2' -> ('head', 0, 2); 'mlp 0', 'resid 1', 'embed' -> the library's senders; one that comes after the
    receiver's layer reads nothing the receiver reads, and is refused in the words a visitor types."""
    words = str(spec or "").strip().lower().split()
    if len(words) == 1 and words[0] == "embed":
        return ("embed",)
    if len(words) == 2 and words[0] in ("mlp", "resid"):
        sender = (words[0], layer_index(words[1], n_layer, f"sender's layer ({words[0]} L)"))
    elif len(words) == 1 and "." in words[0]:
        (layer, head), *_ = parse_heads(words[0], n_layer, n_head)
        sender = ("head", layer, head)
    else:
        raise VisitorError(
            f"Cannot read the sender {shortened(spec)}: write a head as layer.head ('0.2'), 'mlp L', 'resid L' (the "
            "whole residual stream entering layer L) or 'embed'."
        )
    latest = receiver_layer if sender[0] == "resid" else receiver_layer - 1
    if sender[1] > latest:
        earlier = "layer 0" if receiver_layer == 1 else f"layers 0 to {receiver_layer - 1}"
        raise VisitorError(
            f"The sender {shortened(spec)} comes after what the receiver (layer {receiver_layer}) reads: give a head "
            f"or 'mlp L' of {earlier}, 'resid L' with L at most {receiver_layer}, or 'embed'."
        )
    return sender


def path_patching(clean: TextView, corrupted: TextView, sender, receiver, receiver_input, key_position) -> dict | None:
    """The receiver head's q, k and v each fed the clean residual stream entering its layer (all else corrupted),
    and with `sender` given, that sender alone into `receiver_input`: the effect on the answer and the receiver's
    attention from the last query on `key_position` (default: the key it weighs most in the clean run)."""
    if not (receiver or "").strip():
        return None
    config = clean.lm.model.config
    heads = parse_heads(receiver, config.n_layer, config.n_head)
    if len(heads) != 1 or heads[0][0] == 0:
        raise VisitorError(
            f"receiver must be one head of a later layer than 0 (layer.head, e.g. '1.1'), got {shortened(receiver)}."
        )
    (layer, head), kind = heads[0], str(receiver_input or "k").strip().lower()
    key = number("key_position", key_position, -1, int)
    if key == -1:  # the default: the token after the repeat's first copy, an induction target
        key = repeated_source(list(clean.ids))
    else:
        key = token_position(key, len(clean.ids), "key_position", last=False)
    rows = []
    senders = [("resid", layer, kind_) for kind_ in "qkv"]
    if (sender or "").strip():
        senders.append((*sender_of(sender, config.n_layer, config.n_head, layer), kind))
    for *source, into in senders:
        found = patch_path(clean.lm.model, clean.ids, corrupted.ids, tuple(source), (layer, head), into, key)
        rows.append({"sender": " ".join(map(str, source)), "input": into, **vars(found)})
        key = found.key_position
    return {"receiver": [layer, head], "key_position": key, "key_token": clean.tokens[key], "paths": rows}


def patching(clean: TextView, corrupted: TextView, path: dict, cores, progress: Progress = None) -> dict:
    """Head patching (layer x head) and residual patching (layer x position) of the clean text into the corrupted
    one; effect = (LD_patched - LD_corrupted) / (LD_clean - LD_corrupted), LD = logit(clean answer) - logit(corrupted
    answer) at the last position. With path["receiver"], path patching too (see path_patching)."""
    check_patch_length(clean)
    model = clean.lm.model
    work = pass_work(model.config, len(clean.ids)) * PATCH_BATCH
    tell = progress or (lambda fraction, what: None)
    with cores.threads_for(work):
        heads = patch_heads(model, clean.ids, corrupted.ids, lambda f: tell(f / 2, "patching heads"), PATCH_BATCH)
        residual = patch_residual(
            model, clean.ids, corrupted.ids, lambda f: tell(0.5 + f / 2, "patching the residual stream"), PATCH_BATCH
        )
        paths = path_patching(clean, corrupted, **path)
    answers = [heads.clean_token, heads.corrupted_token]
    clean_answer, corrupted_answer = labels_of(clean, answers)
    return {
        **clean.about,
        "corrupted_text": corrupted.text,
        "corrupted_ids": list(corrupted.ids),
        "corrupted_tokens": corrupted.tokens,
        "clean_answer": {"id": answers[0], "token": clean_answer},
        "corrupted_answer": {"id": answers[1], "token": corrupted_answer},
        "clean_difference": heads.clean_difference,
        "corrupted_difference": heads.corrupted_difference,
        "heads": heads.effects.tolist(),
        "residual": residual.effects.tolist(),
        "path": paths,
        "notes": clean.notes + corrupted.notes,
    }


def check_same_length(clean: TextView, corrupted: TextView) -> None:
    if len(clean.ids) != len(corrupted.ids):
        raise VisitorError(
            f"The text is {len(clean.ids)} tokens and the corrupted text {len(corrupted.ids)} (start token included): "
            "patching swaps activations position by position, so both need the same number of tokens. Change the "
            "corrupted text to the same length (replace a character or word by one of the same length), or press "
            "'Change one token'."
        )


def repeated_source(ids: list[int]) -> int | None:
    """Where the text's end was seen before: the position just after the first occurrence of the longest repeated
    suffix (the token an induction head copies), or None when the end is not a repeat."""
    best = None
    for length in range(1, len(ids) - 1):
        suffix = ids[-length:]
        starts = [i for i in range(1, len(ids) - length) if ids[i : i + length] == suffix]
        if not starts:
            break
        best = starts[0] + length
    return best


def reads_back(lm, ids: list[int]) -> bool:
    """The ids (after the start token) decode to a text that encodes to the same ids."""
    text = lm.tokenizer.decode(ids[1:], skip_special_tokens=False)
    return lm.tokenizer.encode(text, add_special_tokens=False, verbose=False) == ids[1:]


def one_token_changed(view: TextView) -> tuple[list[int], str]:
    """A corrupted text for patching: the token after the first occurrence of the text's repeated end (else the last
    token but one) replaced by one the model finds likely there, such that the text keeps its token count and the
    model's top next token changes. Returns its ids and a note saying what changed."""
    lm, ids = view.lm, list(view.ids)
    if len(ids) < 3:
        raise VisitorError("The text is too short to corrupt: type at least two tokens (a repeated phrase works best).")
    where = repeated_source(ids)
    where = where if where is not None and where < len(ids) else len(ids) - 2
    never = {lm.boundary_id, lm.eos_id, *lm.never_ids} - {None}
    candidates = head_insights.likely_replacements(lm.model, view.recorded, where, never, k=64)
    answer = int(view.recorded.logits(lm.model)[-1].argmax())
    for candidate in candidates:  # most likely first; one pass each, stopping at the first that changes the answer
        changed = ids[:where] + [candidate] + ids[where + 1 :]
        if not reads_back(lm, changed):
            continue  # it would read back as other tokens
        with torch.no_grad():
            out = lm.model(input_ids=torch.tensor([changed], device=lm.model.device), logits_to_keep=1, use_cache=False)
        if int(out.logits[0, -1].argmax()) != answer:
            old, new = labels_of(view, [ids[where], candidate])
            return changed, f"Changed token {where} {old!r} to {new!r}: the model's next token changes."
    raise VisitorError(
        "No single token change found that keeps the length and changes the model's next token: type a corrupted text "
        "yourself (the same number of tokens, another earlier word the answer depends on)."
    )


class CompositionCache:
    """Composition scores and their baseline per model name (weights only: computed once, kept)."""

    def __init__(self):
        self.found: dict[tuple, dict] = {}
        self.lock = threading.Lock()

    def scores(self, lm) -> dict:
        key = (lm.name, id(lm.model))
        with self.lock:
            if key not in self.found:
                model = lm.model
                scores = {kind: composition_scores(model, kind) for kind in "qkv"}
                self.found = {key: {"scores": scores, "baseline": composition_baseline(model, "q")}}
            return self.found[key]


def composition(lm, cache: CompositionCache) -> dict:
    """Q, K and V composition scores (layer norm weights folded) of every earlier head into every later one, the
    random baseline of this width, and the edges above it, strongest first."""
    found = cache.scores(lm)
    scores, baseline = found["scores"], found["baseline"]
    L, H = lm.model.config.n_layer, lm.model.config.n_head
    edges = [
        {"kind": kind, "writer": [a, b], "reader": [c, d], "score": float(s[a, b, c, d])}
        for kind, s in scores.items()
        for a in range(L)
        for b in range(H)
        for c in range(a + 1, L)
        for d in range(H)
        if float(s[a, b, c, d]) > baseline
    ]
    edges.sort(key=lambda e: -e["score"])
    return {
        "model": lm.name,
        "ids": [],  # weights only: no text
        "n_layer": L,
        "n_head": H,
        "folded": True,
        "baseline": baseline,
        "scores": {kind: s.nan_to_num().tolist() for kind, s in scores.items()},
        "edges": edges[: 8 * TOP_NAMED],
        "strongest": edges[:TOP_NAMED],
    }


def head_circuit(view: TextView, layer, head, ablate) -> dict:
    """The chosen head's OV circuit over tokens (the whole table for a small vocabulary; else the text's tokens' top
    targets) with its copying score, its positional QK circuit, and its map on the text with the `ablate` heads
    (earlier ones) ablated: before, after, and the weight on the induction stripe of each."""
    config = view.lm.model.config
    layer = layer_index(layer, config.n_layer)
    head = head_index(head, config.n_head, average=False)
    model, vocab = view.lm.model, view.lm.vocab_size
    answer = {**view.about, "layer": layer, "head": head, "notes": view.notes}
    if vocab <= MAX_OV_VOCABULARY:
        ov = ov_circuit(model, layer, head)
        labels = labels_of(view, list(range(vocab)))
        scale = float(ov.abs().max()) or 1.0
        answer["ov"] = {
            "tokens": labels,
            "image": heatmap_png(((ov / scale + 1) / 2).square().numpy(), masked=ov.abs() < -1),
            "scale": scale,
            "copying_score": copying_score(ov),
            "whole": True,
            "rows": [{"source": labels[s], "top": top_of(ov[s], labels)} for s in sorted(set(view.ids))],
        }
    else:
        values, indices = ov_circuit(model, layer, head, top=OV_TOP)
        rows = sorted(set(view.ids))
        answer["ov"] = {
            "whole": False,
            "copying_score": None,
            "rows": [
                {
                    "source": labels_of(view, [s])[0],
                    "top": [
                        {"token": t, "value": float(v)}
                        for t, v in zip(labels_of(view, indices[s].tolist()), values[s].tolist())
                    ],
                }
                for s in rows
            ],
        }
    qk = positional_qk_circuit(model, layer, head)[:MAX_QK_POSITIONS, :MAX_QK_POSITIONS]
    weights = qk.softmax(-1)  # each query position's attention from positions alone
    answer["positional_qk"] = {
        "positions": qk.shape[0],
        "image": heatmap_png(weights.numpy()),
        "previous_token": float(weights.diagonal(-1).mean()),
        "argmax_offset": (torch.arange(qk.shape[0]) - qk.argmax(-1)).tolist(),
    }
    answer["ablation"] = ablated_map(view, layer, head, ablate)
    return answer


def top_of(row: torch.Tensor, labels: list[str], k: int = 3) -> list[dict]:
    values, indices = row.topk(min(k, row.numel()))
    return [{"token": labels[i], "value": float(v)} for v, i in zip(values.tolist(), indices.tolist())]


def stripe(weights: torch.Tensor, ids: list[int]) -> float:
    """The mean weight a (T, T) map puts on the induction stripe: from each token seen before, on the token that
    followed its previous occurrence (0 when no token repeats)."""
    found, last = [], {}
    for i, token in enumerate(ids):
        if token in last and last[token] + 1 < i:
            found.append(float(weights[i, last[token] + 1]))
        last[token] = i
    return sum(found) / len(found) if found else 0.0


def ablated_map(view: TextView, layer: int, head: int, ablate) -> dict | None:
    """The head's map on the text as it is and with the `ablate` heads (of earlier layers) zero-ablated, through
    `heads_ablated` (insights.ablated_pass): what the later head loses when an earlier one is gone."""
    config = view.lm.model.config
    heads = parse_heads(ablate or "", config.n_layer, config.n_head)
    if not heads:
        return None
    if any(a >= layer for a, _ in heads):
        raise VisitorError(
            f"ablate must name heads of layers before {layer} (they write what head {layer}.{head} reads), got "
            f"{shortened(ablate)}."
        )
    length = min(len(view.ids), MAX_ABLATED_MAP)
    before = view.recorded.attentions[layer, head][:length, :length]
    after_pass = head_insights.ablated_pass(view.lm.model, view.recorded, heads, "zero")
    after = after_pass.attentions[layer, head][:length, :length]
    ids = view.ids[:length]
    return {
        "ablated": [list(h) for h in heads],
        "tokens": view.tokens[:length],
        "before": before.double().round(decimals=6).tolist(),
        "after": after.double().round(decimals=6).tolist(),
        "stripe_before": stripe(before, ids),
        "stripe_after": stripe(after, ids),
    }
