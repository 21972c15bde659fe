"""The circuits section's numbers, as plain JSON: direct logit attribution, activation patching (each head's output,
query, key, value or pattern; each head at each position; the residual stream), path patching of every sender into a
receiver head's q, k and v and of a sender through an intermediate, and composition scores against their random
baseline, each on the text or on a prompt set of it and its variants (the mean and the spread). One head's circuits
are in head_circuit.py. Each answer carries the model and the token ids it was computed for, and the sentences its
numbers support (words.py). Every number comes from `minigpt.heads`; nothing here knows of Gradio. The "change one
token" helper proposes a corrupted text for patching."""

from collections.abc import Callable

import torch

from minigpt.demo.circuits import patch_estimates as estimates
from minigpt.demo.circuits.words import attribution_findings, patching_findings
from minigpt.demo.core.attention_maps import token_labels
from minigpt.demo.core.cores import pass_work
from minigpt.demo.core.inputs import layer_index, number, parse_heads, token_position
from minigpt.demo.core.per_model import PerModel
from minigpt.demo.core.prompt_sets import described, prompt_count, text_variants
from minigpt.demo.core.texts import TextView, encode, first_upper, repeated_source
from minigpt.errors import VisitorError, shortened
from minigpt.heads import (
    composition_baseline,
    composition_scores,
    logit_attribution,
    over_prompts,
    patch_heads,
    patch_heads_by_position,
    patch_paths,
    patch_residual,
    patch_two_step,
)
from minigpt.heads.comparison import likely_replacements
from minigpt.heads.nodes import node_name, writes_before
from minigpt.heads.paths import INPUTS

MAX_PATCH_TOKENS = 64  # patching runs the model once per head and once per (layer, position), batched
PATCH_BATCH = 32
PATCH_WORK = 2e12  # multiply-adds of all the patched runs together: about a minute on two CPU cores
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


def attribution(view: TextView, position, token, other_token, prompts=1) -> dict:
    """Each component's direct contribution to the logit of `token` (default: the model's top-1) after `position`,
    or to logit(token) - logit(other_token); heads as a layer x head grid, the largest named. With `prompts` > 1, on
    the text and its variants (each variant's own top-1 token, or the token given): the mean and the spread."""
    position = token_position(position, len(view.ids), "position")
    token, other = token_id(view, token, "token"), token_id(view, other_token, "other_token")
    if other is not None and token is not None and other == token:
        raise VisitorError("token and other_token are the same token: give two different tokens (or leave other out).")
    model, count = view.lm.model, prompt_count(prompts)
    found = logit_attribution(model, view.ids, position, token, other)
    if count > 1:
        texts = text_variants(view.lm, [list(view.ids)], count)[:, 0]
        over = over_prompts(lambda ids: logit_attribution(model, ids, position, token, other).values, texts)
        values, spread = over.mean, over.spread
    else:
        values, spread, over = found.values, None, None
    values_list = values.tolist()
    order = sorted(range(len(values_list)), key=lambda i: -abs(values_list[i]))
    L, H = model.config.n_layer, model.config.n_head
    answer = {
        **view.about,
        "position": position,
        "token": {"id": found.token, "token": labels_of(view, [found.token])[0]},
        "other_token": None if other is None else {"id": other, "token": labels_of(view, [other])[0]},
        "logit": found.logit,
        "bias_term": found.bias_term,
        "components": [{"component": c, "value": v} for c, v in zip(found.labels, values_list)],
        "heads": values[2:].view(L, H + 2)[:, :H].tolist(),
        "heads_spread": None if spread is None else spread[2:].view(L, H + 2)[:, :H].tolist(),
        "largest": [{"component": found.labels[i], "value": values_list[i]} for i in order[:TOP_NAMED]],
        "prompts": prompt_set(over) if over else {"count": 1, "left_out": 0, "described": described(1)},
        "token_given": token is not None,
        "notes": view.notes,
    }
    answer["findings"] = attribution_findings(answer)
    return answer


def patch_work(config, length: int) -> float:
    """Multiply-adds of patching a text of `length` tokens: one pass per head (for its part), one per (layer,
    position), and path patching's 3 x (2 + L x (H + 1)) at most."""
    runs = config.n_layer * (config.n_head + length) + 3 * (2 + config.n_layer * (config.n_head + 1)) + 2
    return runs * pass_work(config, length)


def check_patch_length(view: TextView, prompts: int = 1) -> None:
    """Patching is refused past MAX_PATCH_TOKENS tokens, or past PATCH_WORK multiply-adds over its prompts."""
    config, length = view.lm.model.config, len(view.ids)
    longest = max(
        (n for n in range(2, MAX_PATCH_TOKENS + 1) if prompts * patch_work(config, n) <= PATCH_WORK), default=2
    )
    if length > longest:
        more = f" over {prompts} prompts (fewer prompts take longer texts)" if prompts > 1 else ""
        raise VisitorError(
            f"The text is {length} tokens (start token included): patching runs the model once per head and once "
            f"per layer and position, and this server does it for texts of at most {longest} tokens on the "
            f"{view.lm.name} model{more}. Shorten both texts."
        )


def sender_of(spec: str, n_layer: int, n_head: int, receiver_layer: int) -> tuple | None:
    """'0.2' -> ('head', 0, 2); 'mlp 0', 'resid 1', 'embed' -> the library's senders; empty: None. One that comes
    after the receiver's layer reads nothing the receiver reads, and is refused in the words a visitor types."""
    words = str(spec or "").strip().lower().split()
    if not words:
        return None
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


def intermediate_of(spec, sender, config, receiver_layer: int) -> tuple | None:
    """The middle of a two-step path: a head or an MLP after the sender and before the receiver; empty: None."""
    if not str(spec or "").strip():
        return None
    if sender is None or sender[0] == "resid":
        raise VisitorError(
            "A two-step path starts at a sender that writes ('0.2', 'mlp 0', 'embed'): give one with the intermediate."
        )
    middle = sender_of(spec, config.n_layer, config.n_head, receiver_layer)
    if middle[0] not in ("head", "mlp"):
        raise VisitorError(f"The intermediate must be a head ('0.2') or an MLP ('mlp 0'), got {shortened(spec)}.")
    if not writes_before(sender, middle):
        raise VisitorError(
            f"The sender {node_name(sender)} writes nothing that the intermediate {node_name(middle)} reads: give an "
            "intermediate of a later layer (an MLP reads the heads of its own layer too)."
        )
    return middle


def receiver_of(receiver, config) -> tuple[int, int] | None:
    """The receiver head of path patching (layer.head of a layer after 0); empty: None."""
    if not (receiver or "").strip():
        return None
    heads = parse_heads(receiver, config.n_layer, config.n_head)
    if len(heads) != 1 or heads[0][0] == 0:
        raise VisitorError(
            f"receiver must be one head of a later layer than 0 (layer.head, e.g. '1.1'), got {shortened(receiver)}."
        )
    return heads[0]


def key_of(key_position, ids: list[int]) -> int | None:
    """The key whose weight path patching reports: given, or (-1) the token after the first copy of the text's
    repeated end, an induction target (None: the key the clean run's receiver weighs most)."""
    key = number("key_position", key_position, -1, int)
    if key == -1:
        return repeated_source(ids)
    return token_position(key, len(ids), "key_position", last=False)


def path_grid(model, pairs: torch.Tensor, receiver, key) -> dict:
    """Every sender into each of the receiver's q, k and v, over the prompt pairs (N, 2, T): the effects' mean and
    spread, the receiver's weight on the key (patched, clean, corrupted)."""
    grids = []

    def measure(pair):
        grid = patch_paths(model, pair[0], pair[1], receiver, key, batch_size=PATCH_BATCH)
        grids.append(grid)
        return torch.stack([grid.effects, grid.attention])

    found = over_prompts(measure, pairs, first_required=True)
    first = grids[0]
    return {
        "receiver": list(receiver),
        "key_position": first.key_position,
        "senders": first.senders,
        "inputs": list(INPUTS),
        "effects": found.mean[0].tolist(),
        "effects_spread": found.spread[0].tolist() if found.prompts > 1 else None,
        "attention": found.mean[1].tolist(),
        "attention_clean": first.attention_clean,
        "attention_corrupted": first.attention_corrupted,
    }


def two_step(model, pairs: torch.Tensor, sender, middle, receiver, receiver_input, key) -> dict:
    """sender -> middle -> the receiver's input, over the prompt pairs: the effect's mean and spread."""
    found = over_prompts(
        lambda pair: patch_two_step(model, pair[0], pair[1], sender, middle, receiver, receiver_input, key).effect,
        pairs,
        first_required=True,
    )
    return {
        "sender": node_name(sender),
        "intermediate": node_name(middle),
        "input": receiver_input,
        "effect": float(found.mean),
        "effect_spread": float(found.spread) if found.prompts > 1 else None,
    }


def path_patching(clean: TextView, pairs: torch.Tensor, options: dict) -> dict | None:
    """Path patching into the receiver head: every sender into each of its q, k and v (a grid), and with a sender
    and an intermediate, that two-step path into `receiver_input`."""
    config = clean.lm.model.config
    receiver = receiver_of(options.get("receiver"), config)
    if receiver is None:
        return None
    receiver_input = str(options.get("receiver_input") or "k").strip().lower()
    key = key_of(options.get("key_position"), list(clean.ids))
    sender = sender_of(options.get("sender"), config.n_layer, config.n_head, receiver[0])
    middle = intermediate_of(options.get("intermediate"), sender, config, receiver[0])
    model = clean.lm.model
    path = path_grid(model, pairs, receiver, key)
    path["key_token"] = clean.tokens[path["key_position"]]
    path["paths"] = [
        {"sender": sender_name, "input": into, "effect": path["effects"][row][column],
         "attention_patched": path["attention"][row][column]}
        for row, sender_name in enumerate(path["senders"])
        for column, into in enumerate(INPUTS)
    ]  # fmt: skip
    path["chosen"] = None if sender is None else {"sender": node_name(sender), "input": receiver_input}
    path["two_step"] = None if middle is None else two_step(model, pairs, sender, middle, receiver, receiver_input, key)
    return path


PARTS = ("output", "q", "k", "v", "pattern")


def checked_part(value) -> str:
    part = str(value or "output").strip().lower()
    if part not in PARTS:
        raise VisitorError(f"part must be one of {', '.join(PARTS)}, got {shortened(value)}.")
    return part


def by_position(model, pairs: torch.Tensor, config, length: int) -> torch.Tensor | None:
    """Each head at each position (layer x head x position), on the text itself, where its runs fit the work bound."""
    if config.n_layer * config.n_head * length * pass_work(config, length) > PATCH_WORK:
        return None
    return patch_heads_by_position(model, pairs[0, 0], pairs[0, 1], batch_size=PATCH_BATCH).effects


def check_options(clean: TextView, options: dict) -> None:
    """The visitor's patching choices, checked before anything runs (a corrupted text is searched for after)."""
    config = clean.lm.model.config
    checked_part(options.get("part"))
    check_patch_length(clean, prompt_count(options.get("prompts")))
    estimates.checked_cell(options.get("exact_cell"), config, len(clean.ids))
    receiver = receiver_of(options.get("receiver"), config)
    if receiver is not None:
        key_of(options.get("key_position"), list(clean.ids))
        sender = sender_of(options.get("sender"), config.n_layer, config.n_head, receiver[0])
        intermediate_of(options.get("intermediate"), sender, config, receiver[0])


def patching(clean: TextView, corrupted: TextView, options: dict, cores, progress: Progress = None) -> dict:
    """Head patching (layer x head, the chosen `part` of each head), residual patching (layer x position), each head
    at each position, and path patching (options: receiver, sender, intermediate, receiver_input, key_position), on
    the text or on a prompt set of it and its variants (options["prompts"]); effect = (LD_patched - LD_corrupted) /
    (LD_clean - LD_corrupted), LD = logit(clean answer) - logit(corrupted answer) at the last position. Where exact
    patching costs more than patch_estimates.ESTIMATE_WORK, attribution patching's estimates (`estimate`, `estimated`:
    which grids), the cells the findings name patched exactly beside their estimates (`checked`), and
    options["exact_cell"]'s exact value (`exact_cell`)."""
    model, config = clean.lm.model, clean.lm.model.config
    part, count = checked_part(options.get("part")), prompt_count(options.get("prompts"))
    check_patch_length(clean, count)
    cell = estimates.checked_cell(options.get("exact_cell"), config, len(clean.ids))
    pairs = text_variants(clean.lm, [list(clean.ids), list(corrupted.ids)], count)
    estimated = estimates.estimated_first(config, len(clean.ids))
    tell = progress or (lambda fraction, what: None)
    with cores.threads_for(pass_work(config, len(clean.ids)) * PATCH_BATCH):
        tell(0.0, "estimating every patch" if estimated else "patching heads")
        found = (estimated_grids if estimated else exact_grids)(model, pairs, part, tell)
        tell(0.8, "path patching")
        path = path_patching(clean, pairs, options)
        exact = None if cell is None else estimates.exact_cell(model, pairs[0], cell, part)
    own, heads, residual = found["own"], found["heads"], found["residual"]
    if exact is not None:
        grid = {"heads": heads.mean, "residual": residual.mean, "heads_by_position": found["positions"]}[exact["grid"]]
        exact["shown"] = None if grid is None else float(grid[tuple(exact["index"])])
    answers = [own.clean_token, own.corrupted_token]
    clean_answer, corrupted_answer = labels_of(clean, answers)
    answer = {
        **clean.about,
        "corrupted_text": corrupted.text,
        "corrupted_ids": list(corrupted.ids),
        "corrupted_tokens": corrupted.tokens,
        "differing_positions": [i for i, (a, b) in enumerate(zip(clean.ids, corrupted.ids)) if a != b],
        "clean_answer": {"id": answers[0], "token": clean_answer},
        "corrupted_answer": {"id": answers[1], "token": corrupted_answer},
        "clean_difference": own.clean_difference,
        "corrupted_difference": own.corrupted_difference,
        "part": part,
        "prompts": prompt_set(heads),
        "heads": heads.mean.tolist(),
        "heads_spread": heads.spread.tolist() if heads.prompts > 1 else None,
        "residual": residual.mean.tolist(),
        "heads_by_position": None if found["positions"] is None else found["positions"].tolist(),
        "estimate": estimated,
        "estimated": found["estimated"],
        "method": estimates.METHOD if estimated else "exact patching",
        "exact_runs": estimates.exact_runs(config, len(clean.ids)),
        "residual_exact_at": found["exact_positions"],
        "checked": found["checked"],
        "exact_cell": exact,
        "path": path,
        "notes": clean.notes + corrupted.notes,
    }
    answer["findings"] = patching_findings(answer)
    return answer


def exact_grids(model, pairs: torch.Tensor, part: str, tell) -> dict:
    """Exact patching: the chosen part of each head, the residual stream, and each head at each position (one prompt,
    within the work bound), over the prompt pairs."""
    own = []

    def head_effects(pair):
        found = patch_heads(model, pair[0], pair[1], part=part, batch_size=PATCH_BATCH)
        own.append(found)  # the first: the text's own, its answers and LDs
        return found.effects

    heads = over_prompts(head_effects, pairs, first_required=True)
    tell(0.4, "patching the residual stream")
    residual = over_prompts(lambda pair: patch_residual(model, pair[0], pair[1]).effects, pairs, first_required=True)
    tell(0.6, "patching each head at each position")
    positions = by_position(model, pairs, model.config, pairs.shape[-1]) if len(pairs) == 1 else None
    return {"own": own[0], "heads": heads, "residual": residual, "positions": positions, "estimated": [],
            "exact_positions": None, "checked": []}  # fmt: skip


def estimated_grids(model, pairs: torch.Tensor, part: str, tell) -> dict:
    """Attribution patching's estimates of the residual stream and each head at each position (and of each head's
    output at every position; another part of each head is patched exactly, one run a head)."""
    found = estimates.estimates(model, pairs, check_heads=part == "output")
    heads, estimated = found.heads, list(estimates.ESTIMATED)
    if part != "output":
        tell(0.4, "patching heads")
        heads = over_prompts(
            lambda pair: patch_heads(model, pair[0], pair[1], part=part, batch_size=PATCH_BATCH).effects,
            pairs,
            first_required=True,
        )
        estimated.remove("heads")
    if found.position is None:  # a prompt set: each head at each position is for the text alone
        estimated.remove("heads_by_position")
    return {"own": found.first, "heads": heads, "residual": found.residual, "positions": found.position,
            "estimated": estimated, "exact_positions": found.exact_positions, "checked": found.checked}  # fmt: skip


def prompt_set(found) -> dict:
    return {"count": found.prompts, "left_out": found.left_out, "described": described(found.prompts, found.left_out)}


def check_same_length(clean: TextView, corrupted: TextView) -> None:
    if len(clean.ids) != len(corrupted.ids):
        raise VisitorError(
            f"The text is {len(clean.ids)} tokens and the corrupted text {len(corrupted.ids)} (start token included): "
            "patching swaps activations position by position, so both need the same number of tokens. Change the "
            "corrupted text to the same length (replace a character or word by one of the same length), or press "
            "'Change one token'."
        )


def reads_back(lm, ids: list[int]) -> bool:
    """The ids (after the start token) decode to a text that encodes to the same ids."""
    text = lm.tokenizer.decode(ids[1:], skip_special_tokens=False)
    return lm.tokenizer.encode(text, add_special_tokens=False, verbose=False) == ids[1:]


class NoChangeFound(VisitorError):
    """No change of one token alters the answer; `tried` (a clause) says which token was changed to how many."""

    def __init__(self, tried: str):
        advice = "type a corrupted text yourself (the same number of tokens, another earlier word the answer hangs on)"
        super().__init__(f"{first_upper(tried)}: {advice}.")
        self.tried = tried


def one_token_changed(view: TextView, before: int = 0) -> tuple[list[int], str]:
    """A corrupted text for patching: the token after the first occurrence of the text's repeated end (what an
    induction head copies; with `before` 1, the token before it: what tells the head where to look; else the last
    token but one) replaced by one the model finds likely there, such that the text keeps its token count and the
    model's top next token changes. Returns its ids and a note saying what changed."""
    lm, ids = view.lm, list(view.ids)
    if len(ids) < 3:
        raise VisitorError("The text is too short to corrupt: type at least two tokens (a repeated phrase works best).")
    where = repeated_source(ids)
    where = where - before if where is not None and 0 < where - before < len(ids) else len(ids) - 2
    never = {lm.boundary_id, lm.eos_id, *lm.never_ids} - {None}
    candidates = likely_replacements(lm.model, view.recorded, where, never, k=64)
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
    raise NoChangeFound(
        f"changing token {where} ({labels_of(view, [ids[where]])[0]!r}) to each of the {len(candidates)} tokens the "
        "model finds likeliest there keeps its next token"
    )


def composition_of(lm) -> dict:
    model = lm.model
    return {
        "scores": {kind: composition_scores(model, kind) for kind in "qkv"},
        "baseline": composition_baseline(model, "q"),
    }


class CompositionCache(PerModel):
    """Composition scores and their baseline per model (weights only: computed once, kept)."""

    def __init__(self):
        super().__init__(composition_of)

    def scores(self, lm) -> dict:
        return self.get(lm)


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
