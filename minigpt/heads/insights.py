"""What does this head do? Next-token probabilities, head ablation, head importance, measured head roles, the logit
lens and the comparison of two texts, computed from the model's own modules.

Ablation is a switch on the model, `heads_ablated(model, ablate, means)`: a forward pre-hook on each chosen layer's
`attn.out_proj` replaces the chosen heads' D-wide slices of the merged heads (out_proj's input, (B, T, H * D)) with
zeros or with their mean over the text's positions. The hook sits after the attention function, so it acts the same
whichever attention implementation runs (eager, sdpa, flash), with the KV cache too; it needs no change to the model's
forward and no kwarg threaded through `generate()`. The server shares one model object between request threads, so the
hook acts on the forward pass of the thread that switched it on only (`hooks`).

Head roles are scored as TransformerLens's head detectors score them (`transformer_lens.head_detector`): a 0/1
detection pattern over (query, key) pairs, and the attention weight the head puts on it, its "mul" measure
sum(attention * pattern) / sum(attention), taken over the rows (queries) where the pattern marks a key, so that a head
doing exactly the role scores 1 (TransformerLens divides by every row, so its perfect previous-token head scores
(T - 1) / T). Patterns: previous token (i, i - 1); first token (i, 0); self (i, i), each for i >= 1 (the first token
can only look at itself); induction (i, j + 1) for every earlier j < i holding the same token as i.

Nothing here knows of Gradio: numbers in, tensors out. Shapes: B batch, L layers, H heads, T tokens, C width,
D = C // H, V vocabulary, P probes.
"""

import contextlib
from types import SimpleNamespace

import torch
from torch.nn import functional as F

from minigpt.heads.errors import (
    InstrumentError,
    checked_count,
    checked_ids,
    checked_position,
    checked_token,
    shortened,
)
from minigpt.heads.hooks import hooks
from minigpt.heads.nodes import head_of
from minigpt.heads.prompts import repeated_tokens
from minigpt.heads.recorded_pass import ForwardPass, run_forward_pass, unembed

ABLATION_MODES = ("zero", "mean", "resample")


# ---- heads as a mask ------------------------------------------------------------------------------------------------


def head_mask(heads: list[tuple[int, int]], n_layer: int, n_head: int) -> torch.Tensor:
    """(L, H) bool, True for the heads to ablate."""
    mask = torch.zeros(n_layer, n_head, dtype=torch.bool, device="cpu")
    shape = SimpleNamespace(n_layer=n_layer, n_head=n_head)
    for head in heads:
        mask[head_of(head, shape, "heads")] = True
    return mask


def check_mode(mode: str) -> str:
    if mode not in ABLATION_MODES:
        raise InstrumentError(f"The ablation mode must be 'zero', 'mean' or 'resample', got {shortened(mode)}.")
    return mode


# ---- the ablation switch -------------------------------------------------------------------------------------------


def head_means(recorded: ForwardPass) -> torch.Tensor:
    """(L, C): each layer's merged heads averaged over the text's positions, what mean ablation puts in."""
    return recorded.merged_heads.mean(dim=1)


@contextlib.contextmanager
def heads_ablated(model, ablate: torch.Tensor, means: torch.Tensor | None = None):
    """Within the block, the calling thread's forward passes of `model` run with the heads in `ablate` switched off.

    `ablate` is (L, H) bool, or (B, L, H) for a different set of heads per batch row. A head switched off outputs
    zeros (`means` None) or its slice of `means`, what ablation puts in (see `ablation_values`): (L, C) the same at
    every position (mean ablation, e.g. `head_means`), (L, T, C) per position, or (B, L, T, C) per batch row
    (resample ablation: another text's activations). Its D numbers of out_proj's input are replaced, so the block's
    output and everything after it see the head gone. Nothing to ablate, no hook: the model runs exactly as it does
    without this."""
    config = model.config
    n_head, head_dim = config.n_head, config.head_dim
    per_row = ablate if ablate.dim() == 3 else ablate[None]  # (B or 1, L, H)

    def switch_off(layer: int):
        off = per_row[:, layer][:, None, :, None]  # (B or 1, 1, H, 1): broadcast over positions and head dims
        if means is None:
            replacement = torch.tensor(0.0, device="cpu")
        else:  # (C,), (T, C) or (B, T, C) -> (..., H, D)
            replacement = (means[:, layer] if means.dim() == 4 else means[layer]).unflatten(-1, (n_head, head_dim))

        def hook(module, args):
            merged = args[0].unflatten(-1, (n_head, head_dim))  # (B, T, C) -> (B, T, H, D)
            kept = torch.where(off.to(merged.device), replacement.to(merged.device, merged.dtype), merged)
            return (kept.flatten(-2), *args[1:])  # (B, T, C)

        return hook

    layers = model.model.layers
    registrations = [
        (layers[i].attn.out_proj, "pre", switch_off(i)) for i in range(config.n_layer) if per_row[:, i].any()
    ]
    with hooks(*registrations):
        yield


def merged_heads_of(model, prompts: torch.Tensor) -> torch.Tensor:
    """(N, L, T, C) every layer's merged heads (out_proj's input) on N prompts of T tokens, one batched pass."""
    seen = []
    with hooks(
        *[(block.attn.out_proj, "pre", lambda m, args: seen.append(args[0].detach())) for block in model.model.layers]
    ):
        with torch.no_grad():
            model(input_ids=prompts.to(model.device), use_cache=False, logits_to_keep=1)
    return torch.stack(seen, dim=1)


def ablation_values(model, prompts: torch.Tensor, mode: str, seed: int = 0) -> torch.Tensor | None:
    """What `heads_ablated` puts in for `mode` on a prompt set (N, T): "zero" None; "mean" (L, C), every head's output
    averaged over the prompts and their positions; "resample" (N, L, T, C), each prompt's heads given another
    prompt's outputs (a seeded shuffle that moves every prompt: a run of prompt i reads prompt j's heads, j != i)."""
    if check_mode(mode) == "zero":
        return None
    prompts = checked_ids(prompts, model.config.vocab_size, "prompts")
    merged = merged_heads_of(model, prompts)  # (N, L, T, C)
    if mode == "mean":
        return merged.mean(dim=(0, 2))
    if len(prompts) < 2:
        raise InstrumentError("Resample ablation takes another prompt's activations: give at least two prompts.")
    shift = 1 + int(torch.randint(len(prompts) - 1, (1,), generator=torch.Generator().manual_seed(seed), device="cpu"))
    order = torch.randperm(len(prompts), generator=torch.Generator().manual_seed(seed), device="cpu")
    source = torch.empty_like(order)
    source[order] = order.roll(shift)  # a derangement: prompt order[k] reads order[k - shift]
    return merged[source]


# ---- next-token probabilities --------------------------------------------------------------------------------------


def top_tokens(logits: torch.Tensor, k: int) -> tuple[list[int], list[float]]:
    """The k most likely next tokens of (V,) logits and their probabilities (softmax of the logits)."""
    k = checked_count(k, "k", "the most likely tokens listed")
    probabilities = logits.float().softmax(dim=-1)  # (V,)
    values, ids = probabilities.topk(min(k, probabilities.numel()))
    return ids.tolist(), values.tolist()


def next_token_probabilities(model, recorded: ForwardPass, position: int, k: int = 10) -> dict:
    """The top-k next tokens at `position`, the probability the model gave the token that actually follows, and the
    (V,) logits they come from."""
    position = checked_position(position, len(recorded.input_ids))
    logits = recorded.logits(model, position)  # (V,)
    ids, probabilities = top_tokens(logits, k)
    answer = {"position": position, "top_ids": ids, "top_probabilities": probabilities, "logits": logits}
    if position + 1 < len(recorded.input_ids):
        following = recorded.input_ids[position + 1]
        answer |= {"next_id": following, "next_probability": float(logits.softmax(-1)[following])}
    return answer


def warped_probabilities(logits: torch.Tensor, warp=None, never_ids=()) -> torch.Tensor:
    """(N, V) logits -> (N, V) the probabilities the sampler draws from: the softmax after its warpers (`warp(None,
    logits)`: temperature, top-k, top-p, transformers' own) and without `never_ids`. No warpers: the model's own."""
    logits = logits.float().clone()
    logits[:, list(never_ids)] = float("-inf")
    if warp is not None:
        logits = warp(None, logits)
    return logits.softmax(dim=-1)


def sampled_probabilities(logits: torch.Tensor, ids: list[int], warp=None, never_ids=()) -> torch.Tensor:
    """(T - 1,) the probability each token ids[t + 1] had when it was drawn after ids[..t], from (T, V) `logits`
    (position t predicts token t + 1), as the text loop samples (`warped_probabilities`)."""
    probabilities = warped_probabilities(logits[:-1], warp, never_ids)  # (T - 1, V)
    return probabilities.gather(1, torch.tensor(ids[1:], device=probabilities.device)[:, None]).squeeze(1)


# ---- ablation and importance ---------------------------------------------------------------------------------------


def ablated_pass(model, recorded: ForwardPass, heads: list[tuple[int, int]], mode: str, values=None) -> ForwardPass:
    """The text's forward pass again (the same eager path as `recorded`), with `heads` ablated: "zero", "mean" (each
    head's output averaged over the text's positions, or `values`) or "resample" (`values`: what `ablation_values`
    gives for a prompt set the text leads, its first row)."""
    config = model.config
    if check_mode(mode) == "resample" and values is None:
        raise InstrumentError("Resample ablation puts in another prompt's activations: pass them as values.")
    means = (head_means(recorded) if mode == "mean" else None) if values is None else values
    with heads_ablated(model, head_mask(heads, config.n_layer, config.n_head), means):
        return run_forward_pass(model, list(recorded.input_ids))


def one_head_each(L: int, H: int) -> torch.Tensor:
    """(1 + L * H, L, H) bool masks: row 0 ablates nothing, row 1 + l * H + h head h of layer l alone."""
    each = torch.eye(L * H, dtype=torch.bool, device="cpu").view(-1, L, H)
    return torch.cat([torch.zeros(1, L, H, dtype=torch.bool, device="cpu"), each])


def losses_per_row(model, ids: list[int], ablate: torch.Tensor, means, budget_bytes: int = 1 << 28) -> torch.Tensor:
    """(B, T - 1) per-token losses of `ids`, row b run with the heads ablate[b] (B, L, H) off, in batches whose
    logits stay within `budget_bytes`."""
    targets = torch.tensor(ids[1:], device=model.device)  # (T - 1,)
    rows_per_batch = max(1, budget_bytes // (len(ids) * model.config.vocab_size * 4))
    losses = []
    for chunk in ablate.split(rows_per_batch):
        input_ids = torch.tensor([ids], device=model.device).expand(len(chunk), -1)  # (b, T)
        with heads_ablated(model, chunk, means), torch.no_grad():
            logits = model(input_ids=input_ids, use_cache=False).logits[:, :-1].float()  # (b, T - 1, V)
        losses.append(F.cross_entropy(logits.transpose(1, 2), targets.expand(len(chunk), -1), reduction="none"))
    return torch.cat(losses)  # (B, T - 1)


# Work, in multiply-adds' worth of time on one CPU core (float32), measured on this project's 2-core machine by
# bench/bench_head_finder.py: it turns work into seconds for the bounds below and for heads.metrics' measure.
WORK_PER_SECOND = 3e10
CELL_WORK = 64  # an attention weight's mask, softmax and reads cost about this many multiply-adds' time
CALL_WORK = 1e8  # a forward call's fixed cost (Python and dispatch, about 3 ms): it dominates for short windows


def forward_work(config, tokens: int, rows: int = 1) -> float:
    """Work of one forward call over `rows` rows of `tokens` tokens: each token through every weight (the blocks' and
    the unembedding's), each head's two T x T products, and every attention weight's own cost."""
    weights = config.n_layer * 12 * config.n_embd**2 + config.vocab_size * config.n_embd
    attention = config.n_layer * config.n_head * tokens**2 * (2 * config.n_embd // config.n_head + CELL_WORK)
    return rows * (tokens * weights + attention) + CALL_WORK


# Importance runs the model once per head and once plain: it measures at most this much work (importance_work), about
# 30 s on one CPU core. A shipped model's whole context fits; GPT-2's first tokens (test_head_insights says how many).
IMPORTANCE_WORK = 30 * WORK_PER_SECOND


def importance_work(config, tokens: int) -> float:
    """Work of importance over `tokens` tokens: one batch of (1 + heads) rows."""
    return forward_work(config, tokens, rows=1 + config.n_layer * config.n_head)


def importance_tokens(config, length: int) -> int:
    """The longest start of a `length`-token text whose importance fits IMPORTANCE_WORK (at least 2 tokens)."""
    tokens = length
    while tokens > 2 and importance_work(config, tokens) > IMPORTANCE_WORK:
        tokens = max(2, int(tokens * 0.9))
    return tokens


def head_importance(model, recorded: ForwardPass, mode: str = "zero", values=None) -> tuple[torch.Tensor, float]:
    """(L, H) mean loss over the text with each head alone ablated, minus the plain model's, and the plain loss.
    `mode` "zero", "mean" (over the text's positions) or "resample" (`values`: (1, L, T, C), another prompt's heads).

    One batched forward pass (the model's own attention implementation): row 0 ablates nothing (the reference, run in
    the same batch so that both sides are computed alike), row 1 + l * H + h ablates head h of layer l."""
    L, H = model.config.n_layer, model.config.n_head
    if len(recorded.input_ids) < 2:
        raise InstrumentError("The text is empty: head importance needs at least one token after the start token.")
    ablate = one_head_each(L, H)
    if check_mode(mode) == "resample" and values is None:
        raise InstrumentError("Resample ablation puts in another prompt's activations: pass them as values.")
    length = importance_tokens(model.config, len(recorded.input_ids))
    ids = list(recorded.input_ids)[:length]  # bounded work
    means = (head_means(recorded) if mode == "mean" else None) if values is None else values[..., :length, :]
    losses = losses_per_row(model, ids, ablate, means).mean(dim=1)  # (1 + L * H,)
    return (losses[1:] - losses[0]).view(L, H), float(losses[0])


# ---- head roles ----------------------------------------------------------------------------------------------------


def previous_token_pattern(length: int) -> torch.Tensor:
    """(T, T) bool: query i marks key i - 1."""
    return torch.ones(length, length, dtype=torch.bool, device="cpu").tril(-1).triu(-1)


def first_token_pattern(length: int) -> torch.Tensor:
    """(T, T) bool: query i >= 1 marks key 0 (the start token: the 'attention sink' or boundary)."""
    pattern = torch.zeros(length, length, dtype=torch.bool, device="cpu")
    pattern[1:, 0] = True
    return pattern


def self_pattern(length: int) -> torch.Tensor:
    """(T, T) bool: query i >= 1 marks itself."""
    pattern = torch.eye(length, dtype=torch.bool, device="cpu")
    pattern[0, 0] = False
    return pattern


INDUCTION_RUN = 3  # tokens that must repeat, the query's and the ones before it, for a query to count as induction


def induction_pattern(ids: list[int], run: int = INDUCTION_RUN) -> torch.Tensor:
    """(T, T) bool, the one definition of induction on a text: query i marks key j + 1 for every earlier j < i whose
    last `run` tokens (j - run + 1 .. j) are the query's last `run` tokens: what came after this run of tokens the
    last time it was seen, which an induction head copies. With run 1 every repeated token counts (TransformerLens's
    duplicate-token pattern shifted one key to the right); then single letters repeated by chance ("the cat sat. the
    ca": the "a" of "sat") outnumber the repeated phrase, and a head that attends to what followed any earlier copy
    of its own token (a layer-0 head can) scores as high as the head that copies the phrase. With 3, only a repeated
    phrase counts. Queries without such a run mark nothing."""
    tokens = torch.tensor(ids, device="cpu")
    length = len(ids)
    equal = tokens[:, None] == tokens[None, :]  # (T, T): token i == token j
    matches = equal.clone()
    for back in range(1, run):  # and the `back`-th tokens before them too
        earlier = torch.zeros_like(equal)
        earlier[back:, back:] = equal[:-back, :-back]
        matches &= earlier
    matches = matches.tril(-1)  # (T, T): earlier j ending the same run as i
    return F.pad(matches, (1, 0))[:, :length]  # key j -> j + 1 (j + 1 <= i: the query itself at most)


def role_score(attentions: torch.Tensor, pattern: torch.Tensor) -> torch.Tensor:
    """(...,) the mean, over the queries where `pattern` (T, T) marks a key, of the weight that attentions
    (..., T, T) put on the marked keys. NaN when the pattern marks nothing."""
    pattern = pattern.to(attentions.device)  # a model on a GPU: its attention stays there
    rows = pattern.any(dim=-1)  # (T,)
    on_pattern = (attentions * pattern).sum(dim=-1)  # (..., T)
    return on_pattern[..., rows].mean(dim=-1)


def chance_level(pattern: torch.Tensor) -> float:
    """The role score of a head without a role: one that spreads its attention evenly over the keys each query may
    see (1 / (i + 1) on each of keys 0..i). A head far above it does the role; near it, nothing in particular."""
    length = pattern.shape[-1]
    even = (
        torch.ones(length, length, device="cpu").tril() / torch.arange(1, length + 1, device="cpu")[:, None]
    )  # (T, T), rows sum to 1
    return float(role_score(even, pattern))


def clear_threshold(chance: float) -> float:
    """The score of a head clearly doing a role: halfway from chance to a perfect score of 1."""
    return chance + (1 - chance) / 2


def above_chance(score: float, chance: float) -> bool:
    """Clearly doing the role: at least halfway from chance to a perfect score of 1."""
    return score >= clear_threshold(chance)


def induction_probe(token_ids: list[int], start_id: int, block_size: int, probes: int, seed: int = 0) -> torch.Tensor:
    """(P, 1 + 2n) probes: the start token, then n random tokens, then the same n again, n = (block_size - 1) // 2
    (`prompts.repeated_tokens` sized to the context)."""
    probes = checked_count(probes, "probes", "the random sequences written twice")
    block_size = checked_count(block_size, "block_size", "the context the probe fills: a start and two copies", 3)
    return repeated_tokens(token_ids, start_id, probes, (block_size - 1) // 2, seed)


def induction_scores(model, probes: torch.Tensor) -> dict:
    """Induction score per head on the probes (mean over probes), and the loss on the first copy against the
    repeated one: a model that learnt in-context copying predicts the second copy far better than chance."""
    probes = checked_ids(probes, model.config.vocab_size, "probes")
    with torch.no_grad():
        out = model(input_ids=probes.to(model.device), output_attentions=True, use_cache=False)
    attentions = torch.stack(out.attentions, dim=1).float()  # (P, L, H, T, T)
    scores = torch.stack([role_score(a, induction_pattern(p.tolist())) for a, p in zip(attentions, probes)])
    targets = probes[:, 1:].to(out.logits.device)
    losses = F.cross_entropy(out.logits[:, :-1].float().transpose(1, 2), targets, reduction="none")  # (P, T-1)
    n = (probes.shape[1] - 1) // 2
    # losses[:, t] is the loss of token t + 1. First copy: tokens 2..n (token 1 follows only the start token);
    # repeated copy: tokens n + 2..2n (token n + 1 repeats token 1, which nothing before predicts).
    return {
        "induction": scores.mean(dim=0),  # (L, H)
        "induction_chance": sum(chance_level(induction_pattern(p.tolist())) for p in probes) / len(probes),
        "first_half_loss": float(losses[:, 1:n].mean()),
        "repeated_half_loss": float(losses[:, n + 1 :].mean()),
    }


ROLE_PROBES = 4  # random repeated sequences the induction score averages over


def probed_induction(model, boundary_id: int, excluded: set[int], vocab_size: int) -> dict:
    """`induction_scores` on this model's induction probe: ROLE_PROBES sequences of its tokens (all but `excluded`: the
    boundary, end and padding tokens) written twice after `boundary_id`, sized to its context, and the probe's length.
    It does not depend on any text: a server computes it once per model (`measured_roles(..., probed=)`)."""
    boundary_id = checked_token(model.config.vocab_size, boundary_id, "boundary_id")
    vocabulary = [i for i in range(vocab_size) if i not in excluded]
    probes = induction_probe(vocabulary, boundary_id, model.config.block_size, ROLE_PROBES)
    return {**induction_scores(model, probes), "probe_length": (probes.shape[1] - 1) // 2}


def measured_roles(
    model, recorded: ForwardPass, boundary_id: int, excluded: set[int], vocab_size: int, probed: dict | None = None
) -> dict:
    """`head_roles` with the induction probe built for this model (`probed_induction`; `probed`: its answer, kept
    from an earlier call on this model). What the Head roles view shows, and what training logs at each evaluation
    (train.py's RoleLog)."""
    probed = dict(probed or probed_induction(model, boundary_id, excluded, vocab_size))
    length = probed.pop("probe_length")
    return {**head_roles(model, recorded, None, probed), "probe_length": length}


def head_roles(model, recorded: ForwardPass, probes: torch.Tensor | None, induction: dict | None = None) -> dict:
    """(L, H) scores of each role: previous token, first token and self on the text; induction on the probes (or
    `induction`: `induction_scores`' answer on them, computed before)."""
    length = len(recorded.input_ids)
    if length < 2:
        raise InstrumentError("The text is empty: the head roles need at least one token after the start token.")
    attentions = recorded.attentions  # (L, H, T, T)
    patterns = {
        "previous_token": previous_token_pattern(length),
        "first_token": first_token_pattern(length),
        "self": self_pattern(length),
    }
    induction = dict(induction) if induction is not None else induction_scores(model, probes)  # popped below
    chance = {role: chance_level(pattern) for role, pattern in patterns.items()}
    chance["induction"] = induction.pop("induction_chance")
    scores = {**{role: role_score(attentions, p) for role, p in patterns.items()}, **induction, "chance": chance}
    repeats = induction_pattern(list(recorded.input_ids))
    if repeats.any():  # the learner's own text repeats a token: induction measured on it too, beside the probe's
        scores["induction_on_text"] = role_score(attentions, repeats)
        chance["induction_on_text"] = chance_level(repeats)
        scores["repeated_queries"] = int(repeats.any(dim=-1).sum())
    return scores


def top_heads(scores: torch.Tensor, k: int = 3) -> list[tuple[int, int, float]]:
    """The k highest-scoring heads of (L, H) scores, as (layer, head, score)."""
    k = checked_count(k, "k", "the heads listed")
    flat = scores.flatten()
    values, order = flat.topk(min(k, flat.numel()))
    n_head = scores.shape[1]
    return [(int(i) // n_head, int(i) % n_head, float(v)) for v, i in zip(values, order)]


# ---- logit lens and comparison -------------------------------------------------------------------------------------


def logit_lens(model, recorded: ForwardPass, position: int, k: int = 3) -> list[tuple[list[int], list[float]]]:
    """Per point of the residual stream (after the embeddings, then after each block), the top-k tokens that the
    final layer norm and LM head would predict from it at `position`. The last entry is the model's prediction."""
    position = checked_position(position, len(recorded.input_ids))
    logits = unembed(model, recorded.residual[:, position])  # (L + 1, C) -> (L + 1, V)
    return [top_tokens(row, k) for row in logits]


def compare_attention(first: ForwardPass, second: ForwardPass) -> tuple[torch.Tensor, torch.Tensor]:
    """(L, H, N, N) first's attention weights minus second's over their first N = min(T1, T2) tokens, and (L, H) the
    mean absolute difference per head over the visible (query, key) pairs. Causal attention makes the first N rows of a
    longer text's maps those of its first N tokens alone, so texts of different lengths compare over their common
    positions."""
    length = min(len(first.input_ids), len(second.input_ids))
    difference = first.attentions[..., :length, :length] - second.attentions[..., :length, :length]  # (L, H, N, N)
    visible = length * (length + 1) / 2  # causal: the lower triangle
    return difference, difference.abs().sum(dim=(-2, -1)) / visible


def likely_replacements(model, recorded: ForwardPass, position: int, never_ids: set[int], k: int = 1) -> list[int]:
    """The k tokens the model finds most likely at `position` (what it predicts from position - 1) other than the one
    there and `never_ids`, most likely first."""
    ids = list(recorded.input_ids)
    position, k = checked_position(position, len(ids)), checked_count(k, "k", "the replacements listed")
    if position == 0:
        raise InstrumentError("position 0 is the start token, which nothing predicts: give a later position.")
    logits = recorded.logits(model)[position - 1].float().clone()
    logits[[ids[position], *never_ids]] = float("-inf")
    # At most the vocabulary: a 28-token model has fewer than the k a caller may ask for
    return [int(i) for i in logits.topk(min(k, logits.numel())).indices if logits[i] > float("-inf")]


def one_token_changed(model, recorded: ForwardPass, never_ids: set[int]) -> list[int]:
    """The text's ids with its last token replaced by the model's most likely other token there (none of
    `never_ids`): a second text of the same length that differs in one place, for comparing two texts' maps."""
    ids = list(recorded.input_ids)
    if len(ids) < 2:
        raise InstrumentError("The text is empty: type at least one character to compare.")
    return ids[:-1] + likely_replacements(model, recorded, len(ids) - 1, never_ids)


__all__ = [
    "ABLATION_MODES",
    "head_mask",
    "check_mode",
    "head_means",
    "heads_ablated",
    "top_tokens",
    "next_token_probabilities",
    "sampled_probabilities",
    "ablated_pass",
    "losses_per_row",
    "head_importance",
    "previous_token_pattern",
    "first_token_pattern",
    "self_pattern",
    "induction_pattern",
    "role_score",
    "chance_level",
    "clear_threshold",
    "above_chance",
    "induction_probe",
    "induction_scores",
    "head_roles",
    "top_heads",
    "logit_lens",
    "compare_attention",
    "likely_replacements",
    "one_token_changed",
]
