"""Head roles measured: how much of its attention a head puts where a role looks (previous token, first token,
itself, induction), the one definition of induction on a text, the induction probe (random tokens written twice) and
each role's chance level.

Head roles are scored as TransformerLens's head detectors score them (`transformer_lens.head_detector`): a 0/1
detection pattern over (query, key) pairs, and the attention weight the head puts on it, its "mul" measure
sum(attention * pattern) / sum(attention), taken over the rows (queries) where the pattern marks a key, so that a head
doing exactly the role scores 1 (TransformerLens divides by every row, so its perfect previous-token head scores
(T - 1) / T). Patterns: previous token (i, i - 1); first token (i, 0); self (i, i), each for i >= 1 (the first token
can only look at itself); induction (i, j + 1) for every earlier j < i holding the same token as i.

Shapes: L layers, H heads, T tokens, P probes.
"""

import torch
from torch.nn import functional as F

from minigpt.heads.errors import InstrumentError, checked_count, checked_ids, checked_token
from minigpt.heads.prompts import repeated_tokens
from minigpt.heads.recorded_pass import ForwardPass

# ---- the patterns ---------------------------------------------------------------------------------------------------


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


def offset_pattern(length: int, offset: int) -> torch.Tensor:
    """(T, T) bool: query i >= offset marks key i - offset (offset 1: the previous token)."""
    return torch.ones(length, length, dtype=torch.bool, device="cpu").tril(-offset).triu(-offset)


def same_token_pattern(ids: list[int]) -> torch.Tensor:
    """(T, T) bool: query i marks every earlier key j < i holding its own token (TransformerLens's duplicate-token
    pattern)."""
    tokens = torch.tensor(ids, device="cpu")
    return (tokens[:, None] == tokens[None, :]).tril(-1)


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


# ---- scores and chance ----------------------------------------------------------------------------------------------


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


def excess(score: float, chance: float) -> float:
    """How far a score is from chance toward 1 (0: chance, 1: a perfect score, 0.5: `clear_threshold`)."""
    return (score - chance) / (1 - chance) if chance < 1 else 0.0


MAX_OFFSET = 8  # the farthest look back measured as a fixed offset


def offset_scores(attentions: torch.Tensor, max_offset: int = MAX_OFFSET) -> dict:
    """Each head's weight k tokens back, for k = 1 .. min(max_offset, T - 1): the role score of the offset-k pattern
    (`offset_pattern`) on attentions (L, H, T, T), as (L, H, K) with each offset's chance (K,); and per head the
    offset furthest above its chance (`excess`), its score and chance (L, H). Offset 1 is the previous-token role."""
    length = attentions.shape[-1]
    offsets = list(range(1, min(max_offset, length - 1) + 1))
    if not offsets:
        raise InstrumentError("The text is too short to look back: give at least two tokens after the start token.")
    patterns = [offset_pattern(length, k) for k in offsets]
    scores = torch.stack([role_score(attentions, p) for p in patterns], dim=-1)  # (L, H, K)
    chance = torch.tensor([chance_level(p) for p in patterns], device=scores.device)
    best = ((scores - chance) / (1 - chance)).argmax(dim=-1)  # (L, H)
    return {
        "scores": scores,
        "chance": chance,
        "offset": best + 1,
        "offset_score": scores.gather(-1, best[..., None])[..., 0],
        "offset_chance": chance[best],
    }


# ---- the induction probe, and every role measured -------------------------------------------------------------------


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
    `induction`: `induction_scores`' answer on them, computed before); each head's weight at every offset back
    (`offset_scores`, under "offsets") and, where a token repeats, on its earlier copies ("same_token")."""
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
    scores["offsets"] = offset_scores(attentions)
    duplicates = same_token_pattern(list(recorded.input_ids))
    if duplicates.any():  # a token seen before: the weight on its earlier copies
        # its chance kept beside it, out of "chance" (the roles log's and the Head roles view's table of roles)
        scores["same_token"], scores["same_token_chance"] = role_score(attentions, duplicates), chance_level(duplicates)
    repeats = induction_pattern(list(recorded.input_ids))
    if repeats.any():  # the learner's own text repeats a token: induction measured on it too, beside the probe's
        scores["induction_on_text"] = role_score(attentions, repeats)
        chance["induction_on_text"] = chance_level(repeats)
        scores["repeated_queries"] = int(repeats.any(dim=-1).sum())
    return scores


JOBS = ("offset", "first_token", "self", "same_token", "induction", "induction_on_text")


def measured_jobs(roles: dict) -> list[list[dict]]:
    """Each head's measured job from `head_roles`' answer: the role it is furthest above chance on (`excess`), among
    looking a fixed offset back (its best offset), to the first token, at itself, at earlier copies of its token,
    induction on the probe and on the text (those measured). Per head {"role", "score", "chance", "excess", "clear"
    (at least halfway from chance to 1), and "offset" for "offset"}, as [layer][head]."""
    offsets = roles["offsets"]
    measured = {"offset": (offsets["offset_score"], offsets["offset_chance"])}  # (L, H) scores, (L, H) chances
    for role in JOBS[1:]:
        chance = roles["chance"].get(role, roles.get(f"{role}_chance"))
        if role in roles and chance is not None:
            measured[role] = roles[role], torch.full_like(roles[role], chance)
    jobs = []
    for layer, row in enumerate(offsets["offset"].tolist()):
        jobs.append([])
        for head, offset in enumerate(row):
            found = {role: (float(s[layer, head]), float(c[layer, head])) for role, (s, c) in measured.items()}
            role = max(found, key=lambda r: excess(*found[r]))
            (score, chance), best = found[role], excess(*found[role])
            job = {"role": role, "score": score, "chance": chance, "excess": best, "clear": best >= 0.5}
            jobs[-1].append({**job, "offset": offset} if role == "offset" else job)
    return jobs


def top_heads(scores: torch.Tensor, k: int = 3) -> list[tuple[int, int, float]]:
    """The k highest-scoring heads of (L, H) scores, as (layer, head, score)."""
    k = checked_count(k, "k", "the heads listed")
    flat = scores.flatten()
    values, order = flat.topk(min(k, flat.numel()))
    n_head = scores.shape[1]
    return [(int(i) // n_head, int(i) % n_head, float(v)) for v, i in zip(values, order)]


__all__ = [
    "INDUCTION_RUN",
    "ROLE_PROBES",
    "above_chance",
    "chance_level",
    "clear_threshold",
    "excess",
    "first_token_pattern",
    "head_roles",
    "induction_pattern",
    "induction_probe",
    "induction_scores",
    "MAX_OFFSET",
    "measured_roles",
    "offset_pattern",
    "offset_scores",
    "previous_token_pattern",
    "probed_induction",
    "role_score",
    "same_token_pattern",
    "self_pattern",
    "top_heads",
]
