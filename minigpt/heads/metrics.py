"""Every head measured over a corpus: where it looks (previous token, itself, the sink, the token after an earlier
copy of the current one), how spread its attention is (entropy), how far it looks (the distance |i - j| its weight
falls at), and how much the model needs it (the mean loss increase when it alone is ablated). No Gradio here.

The weights are the model's own (`output_attentions=True`, the eager path), read window by window of the corpus
(minigpt/demo/head_finder/corpus.py); the ablation is `ablation.heads_ablated`, the switch on the model's out_proj.
Each metric is a mean over the queries i >= 1 of every window (query 0 can only look at itself), with A the head's
attention weights and t the window's tokens:

    previous_token   A[i, i-1]
    self             A[i, i]
    sink             A[i, 0]                          the first token of the window: the start token, where a head rests
    induction        sum of A[i, j+1] over j < i whose last 3 tokens are i's last 3 (role_scores.induction_pattern,
                     the one definition of induction on a text), over the queries ending such a repeated run
    entropy          -sum_j A[i, j] log A[i, j]      in nats; log(i + 1) when spread evenly
    distance_mean    sum_j A[i, j] (i - j)           the mean of the pooled distance histogram
    distance_spread  its standard deviation          (the histogram: the weight at each distance, over all queries)
    ablation         loss with the head's output zeroed minus the plain loss, per predicted token

Each metric's chance level is its value for a head that spreads its attention evenly (1 / (i + 1) on each key of
query i) over the same corpus; for ablation, 0.

Shapes: L layers, H heads, B windows in a batch, T tokens, K examples kept per head.
"""

import math
import time
from dataclasses import dataclass

import torch
from torch.nn import functional as F

from minigpt.heads.ablation import losses_per_row, one_head_each
from minigpt.heads.errors import checked_ids
from minigpt.heads.role_scores import induction_pattern

ROLES = ("previous_token", "self", "sink", "induction")  # the kinds of behaviour a head's examples are chosen by
METRICS = (*ROLES, "entropy", "distance_mean", "distance_spread", "ablation")
EXAMPLES = 6  # windows kept per head and kind: where it does that most
ATTENTION_BYTES = 1 << 29  # attention weights of one batch, at most (a GPT-2 window of 1,024 tokens alone: 604 MB)
DISTANCE_EDGES_EXACT = 16  # distances 0..15 have a bin each; beyond, bins double: 16-31, 32-63, ...


def distance_edges(block_size: int) -> list[int]:
    """Left edges of the distance histogram's bins: 0, 1, ..., 15, then 16, 32, 64, ... below block_size."""
    edges = list(range(min(DISTANCE_EDGES_EXACT, block_size)))
    edge = DISTANCE_EDGES_EXACT
    while edge < block_size:
        edges.append(edge)
        edge *= 2
    return edges


@dataclass
class Sums:
    """Running sums over the queries of the corpus, (L, H) each (float64), and the queries counted."""

    on_roles: dict  # role -> (L, H) summed weight on the role's keys
    role_queries: dict  # role -> queries counted (induction: those whose token appeared before)
    entropy: torch.Tensor
    histogram: torch.Tensor  # (L, H, block_size): weight at each distance i - j

    @classmethod
    def zeros(cls, layers: int, heads: int, block_size: int) -> "Sums":
        zero = lambda: torch.zeros(layers, heads, dtype=torch.float64, device="cpu")  # noqa: E731
        histogram = torch.zeros(layers, heads, block_size, device="cpu")
        return cls({r: zero() for r in ROLES}, dict.fromkeys(ROLES, 0), zero(), histogram)


def padded(windows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T) ids, right-padded with -1 (no token: it never matches one), and (B, T) bool, True on the queries the
    metrics read (1 <= i < length). Causal attention never looks right, so the padding changes no weight it reads."""
    length = max(map(len, windows))
    ids = torch.full((len(windows), length), -1, dtype=torch.long, device="cpu")
    for row, window in enumerate(windows):
        ids[row, : len(window)] = torch.tensor(window, device="cpu")
    positions = torch.arange(length, device="cpu")
    lengths = torch.tensor([len(w) for w in windows], device="cpu")
    return ids, (positions[None] >= 1) & (positions[None] < lengths[:, None])


def role_weights(attentions: torch.Tensor, induction: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per query, the weight each head of a layer (attentions (B, H, T, T)) puts on each role's keys: role -> (B, H, T),
    0 at query 0. `induction`: (B, T, T) bool, the induction pattern of each window."""
    return {
        "previous_token": F.pad(attentions.diagonal(offset=-1, dim1=-2, dim2=-1), (1, 0)),  # query 0 has none
        "self": attentions.diagonal(dim1=-2, dim2=-1),
        "sink": attentions[..., 0],
        "induction": (attentions * induction[:, None]).sum(dim=-1),
    }


def add_batch(sums: Sums, attentions, ids: torch.Tensor, queries: torch.Tensor) -> dict:
    """Adds one batch's weights (per layer (B, H, T, T), one layer at a time: a GPT-2 window's temporaries stay at one
    layer's 50 MB) to `sums`; returns each role's per-query weights (L, B, H, T), -inf at the queries it does not
    read."""
    induction = torch.stack([induction_pattern(row.tolist()) for row in ids])  # (B, T, T)
    read = {role: queries & induction.any(dim=-1) if role == "induction" else queries for role in ROLES}  # (B, T)
    length = ids.shape[1]
    steps = torch.arange(length, device="cpu")
    distance = (steps[:, None] - steps[None]).clamp(min=0)  # (T, T): i - j, 0 above
    per_query = {role: [] for role in ROLES}
    for layer, weights in enumerate(attentions):
        weights = weights.float().cpu()
        for role, values in role_weights(weights, induction).items():
            mask = read[role][:, None]  # (B, 1, T)
            sums.on_roles[role][layer] += (values * mask).sum(dim=(0, 2)).double()
            per_query[role].append(values.masked_fill(~mask, -math.inf))
        sums.entropy[layer] += (torch.special.entr(weights).sum(dim=-1) * queries[:, None]).sum(dim=(0, 2)).double()
        pooled = (weights * queries[:, None, :, None]).sum(dim=0).flatten(-2)  # (H, T * T)
        sums.histogram[layer, :, :length] += torch.zeros(len(pooled), length, device="cpu").index_add_(
            -1, distance.flatten(), pooled
        )
    for role in ROLES:
        sums.role_queries[role] += int(read[role].sum())
    return {role: torch.stack(values) for role, values in per_query.items()}


def means(sums: Sums) -> dict[str, torch.Tensor]:
    """The attention metrics, (L, H) float each, from the sums."""
    queries = sums.role_queries["self"]
    result = {role: (sums.on_roles[role] / max(sums.role_queries[role], 1)).float() for role in ROLES}
    if not sums.role_queries["induction"]:  # no token of the corpus appears twice: nothing to score
        result["induction"] = torch.full_like(result["induction"], math.nan)
    result["entropy"] = (sums.entropy / max(queries, 1)).float()
    mass = sums.histogram / max(queries, 1)  # (L, H, block_size): sums to 1 over distances
    distances = torch.arange(mass.shape[-1], dtype=mass.dtype, device="cpu")
    mean = (mass * distances).sum(dim=-1)
    result["distance_mean"] = mean
    result["distance_spread"] = ((mass * distances**2).sum(dim=-1) - mean**2).clamp(min=0).sqrt()
    return result


def binned(sums: Sums, edges: list[int]) -> torch.Tensor:
    """(L, H, bins): the share of the weight at the distances of each bin (edges: the bins' left edges)."""
    histogram = sums.histogram / max(sums.role_queries["self"], 1)
    ends = [*edges[1:], histogram.shape[-1]]
    return torch.stack([histogram[..., a:b].sum(dim=-1) for a, b in zip(edges, ends)], dim=-1)


def beyond_even(per_query: dict, even: dict) -> dict:
    """Each query's role weight beyond what even attention gives it, w - 1 / (i + 1) for one key: the examples are
    chosen by it, so that a query with few keys to choose from (query 1: half its weight on the previous token by
    chance) does not win every window, and a head resting on the sink is shown far from it."""
    return {role: torch.where(w.isfinite(), w - even[role], -math.inf) for role, w in per_query.items()}


def even_attention(length: int) -> torch.Tensor:
    """(T, T): each query i spreads its weight evenly over keys 0..i."""
    return torch.ones(length, length, device="cpu").tril() / torch.arange(1, length + 1, device="cpu")[:, None]


class Examples:
    """Per head and role, the EXAMPLES windows where the head does that most: (value, window, query) of its best query
    in each, the best windows first."""

    def __init__(self, layers: int, heads: int):
        shape = (layers, heads, 0)
        self.values = {r: torch.empty(shape, device="cpu") for r in ROLES}
        self.windows = {r: torch.empty(shape, dtype=torch.long, device="cpu") for r in ROLES}
        self.queries = {r: torch.empty(shape, dtype=torch.long, device="cpu") for r in ROLES}

    def add(self, per_query: dict, rows: list[int]) -> None:
        """`per_query`: role -> (L, B, H, T) weights, -inf where not read; `rows`: each batch row's window."""
        for role, values in per_query.items():
            best, query = values.max(dim=-1)  # (L, B, H): each window's best query
            best, query = best.transpose(1, 2), query.transpose(1, 2)  # (L, H, B)
            window = torch.tensor(rows, device="cpu").expand_as(best)
            values_ = torch.cat([self.values[role], best], dim=-1)
            kept = values_.topk(min(EXAMPLES, values_.shape[-1]), dim=-1).indices  # (L, H, K)
            self.values[role] = values_.gather(-1, kept)
            self.windows[role] = torch.cat([self.windows[role], window], dim=-1).gather(-1, kept)
            self.queries[role] = torch.cat([self.queries[role], query], dim=-1).gather(-1, kept)

    def of(self, layer: int, head: int, role: str) -> list[dict]:
        values, windows, queries = (d[role][layer, head].tolist() for d in (self.values, self.windows, self.queries))
        return [{"value": v, "window": w, "query": q} for v, w, q in zip(values, windows, queries) if v > -math.inf]

    def to_json(self) -> dict:
        return {r: [self.values[r].tolist(), self.windows[r].tolist(), self.queries[r].tolist()] for r in ROLES}

    @classmethod
    def from_json(cls, saved: dict) -> "Examples":
        examples = cls(0, 0)
        for role, (values, windows, queries) in saved.items():
            examples.values[role] = torch.tensor(values, dtype=torch.float32, device="cpu")
            examples.windows[role] = torch.tensor(windows, device="cpu")
            examples.queries[role] = torch.tensor(queries, device="cpu")
        return examples


def batches(windows: list[list[int]], row_bytes) -> list[list[int]]:
    """Indices of `windows` grouped into batches of like lengths, each within ATTENTION_BYTES (`row_bytes(T)`: one
    window's bytes at length T), in corpus order within a batch."""
    order = sorted(range(len(windows)), key=lambda i: len(windows[i]))
    groups, current = [], []
    for index in order:
        if current and (len(current) + 1) * row_bytes(len(windows[index])) > ATTENTION_BYTES:
            groups.append(current)
            current = []
        current.append(index)
    return groups + [current] if current else groups


def ablation_rise(model, windows: list[list[int]], progress) -> tuple[torch.Tensor, float, int]:
    """(L, H) mean loss increase per predicted token with each head alone zero-ablated, the plain mean loss, and the
    tokens predicted: for each window, one batch of rows (ablation.losses_per_row), row 0 ablating nothing."""
    L, H = model.config.n_layer, model.config.n_head
    ablate = one_head_each(L, H)
    total, predicted = torch.zeros(1 + L * H, dtype=torch.float64, device="cpu"), 0
    for window in windows:
        total += losses_per_row(model, window, ablate, None).sum(dim=1).double()
        predicted += len(window) - 1
        progress(len(window) * (1 + L * H))
    mean = total / max(predicted, 1)
    return (mean[1:] - mean[0]).float().view(L, H), float(mean[0]), predicted


def measure(
    model, windows: list[list[int]], progress=lambda fraction: None, ablated: list[list[int]] | None = None
) -> dict:
    """Every head's metrics over `windows` (lists of token ids, each at most block_size), their chance levels, the
    distance histograms (binned), and the windows where each head does each role most. `progress(fraction)` is called
    as the work goes. `ablated`: the windows the ablation reads ((heads + 1) runs of each: the costly part), `windows`
    when None; a caller bounding its work gives fewer (the demo's server: the first that fit its budget)."""
    config = model.config
    L, H = config.n_layer, config.n_head
    named = {"windows": windows} if ablated is None else {"windows": windows, "ablated": ablated}
    for name, given in named.items():
        for index, window in enumerate(given):
            checked_ids(window, config.vocab_size, f"{name}[{index}]")
    ablated = windows if ablated is None else ablated
    started = time.perf_counter()
    work = 2 * sum(map(len, windows)) + (1 + L * H) * sum(map(len, ablated))  # an eager pass costs about two
    done = 0

    def advance(amount: int) -> None:
        nonlocal done
        done += amount
        progress(min(done / work, 1.0))

    sums, chance = Sums.zeros(L, H, config.block_size), Sums.zeros(1, 1, config.block_size)
    examples = Examples(L, H)
    row_bytes = lambda length: 3 * L * H * length * length * 4  # noqa: E731  (weights, and two of their size)
    for group in batches(windows, row_bytes):
        ids, queries = padded([windows[i] for i in group])
        with torch.no_grad():
            out = model(
                input_ids=ids.clamp(min=0).to(model.device), output_attentions=True, use_cache=False, logits_to_keep=1
            )
        even = add_batch(chance, even_attention(ids.shape[1]).expand(1, len(group), 1, -1, -1), ids, queries)
        examples.add(beyond_even(add_batch(sums, out.attentions, ids, queries), even), group)
        del out
        advance(2 * int(sum(len(windows[i]) for i in group)))
    metrics = means(sums)
    rise, plain_loss, predicted = ablation_rise(model, ablated, advance)
    metrics["ablation"] = rise
    levels = {name: float(value[0, 0]) for name, value in means(chance).items()}
    levels["ablation"] = 0.0
    edges = distance_edges(config.block_size)
    return {
        "metrics": {name: metrics[name].tolist() for name in METRICS},
        "chance": levels,
        "block_size": config.block_size,
        "distance_edges": edges,
        "distance_histogram": binned(sums, edges).tolist(),  # (L, H, bins): each head's sums to 1
        "distance_chance": binned(chance, edges)[0, 0].tolist(),
        "queries": sums.role_queries["self"],
        "induction_queries": sums.role_queries["induction"],
        "plain_loss": plain_loss,
        "ablation_tokens": predicted,
        "examples": examples.to_json(),
        "seconds": time.perf_counter() - started,
    }
