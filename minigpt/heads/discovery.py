"""The circuit found, not told: edges of the model's graph (`graph`) scored by attribution (`edge_attribution`: EAP
or EAP-IG), ranked by the size of their score, and the fewest top edges kept whose exact run keeps the behaviour.

An exact run of a circuit (a set of kept edges, `exact_runs`) runs the clean prompts with every receiver reading,
instead of the stream, the sum over its senders of the sender's output in this run where the edge is kept, else the
sender's ablated output, plus the constants (the attention biases), through the model's own modules (a head's q, k, v
from the layer's attn_norm and its rows of qkv_proj, the MLP through mlp_norm and mlp, the logits through final_norm
and lm_head). Ablated outputs: "mean", each sender's output averaged over the prompt set at each position; "corrupted",
its output on the prompt's corrupted prompt.

faithfulness = (metric(circuit) - metric(base)) / (metric(model) - metric(base)), base: every edge ablated (default)
or the corrupted run.

Edges are scored in EAP-IG's convention (`edge_attribution.edge_scores`: negative where ablating the edge lowers the
metric, the mean over prompts) against what the ablation puts in: the corrupted run's outputs for "corrupted" (the
papers' EAP and EAP-IG), the mean outputs for "mean"; they are ranked by size. Scored against the corrupted run but
checked with mean ablation, an edge that carries what the clean and corrupted prompts share (the current token, into an
induction head's query) scores nothing and is dropped, though mean ablation takes it away: on the specimen such a
ranking needs 41 of 110 edges and 6 heads for 0.9, the consistent one 22 and 4.

The search: binary search on the number k of top edges kept, one exact run of the prompt set a step (it takes the
faithfulness as growing with k; where it does not, it finds a k that reaches the target, not always the fewest).
Then edges into a head or an MLP whose output no kept edge reads are dropped: they change nothing that is read (the
faithfulness is measured again on what is left, and on held-out prompt sets). The minimal circuit: the top-k circuit
pruned, each head and then each edge removed in turn where every prompt set stays at its floor, and what each part
left adds (`minimal_circuit`).
"""

from dataclasses import dataclass, field

import torch

from minigpt.heads.circuit_tasks import as_prompts, task_of
from minigpt.heads.edge_attribution import checked_method, edge_scores
from minigpt.heads.errors import InstrumentError, checked_count, shortened, whole
from minigpt.heads.exact_runs import (
    ABLATIONS,
    NORMALISATIONS,
    Faithfulness,
    Setting,
    checked_ablation,
    checked_normalise,
    faithfulness_of,
    faithfulness_on,
    held_out_tasks,
    read_parts,
    setting_of,
)
from minigpt.heads.graph import INPUTS, Graph, graph_of
from minigpt.heads.nodes import node_name, parse_node


@dataclass
class Edge:
    """One edge of the graph, named as the page names its nodes."""

    sender: str  # "embed", "L.H", "mlp L"
    receiver: str  # "L.H", "mlp L", "logits"
    input: str | None  # "q", "k" or "v" into a head, else None
    score: float  # its attribution score in EAP-IG's convention: the metric's change when it is ablated (< 0: it helps)


@dataclass
class FoundCircuit:
    """A circuit found for a task, and what it keeps of the behaviour."""

    edges: list[Edge]  # the kept edges, largest score (in size) first
    faithfulness: float
    kept_edges: int
    total_edges: int
    prompts: int
    metric: str  # "log-probability of the repeated half" (induction) or "logit difference" (pairs)
    method: str  # "eap" or "eap-ig"
    ablation: str  # "mean" or "corrupted"
    heads: list[str]  # the heads whose output a kept edge reads, "L.H"
    target: float
    ranking: list[Edge] = field(repr=False)  # every edge, largest score first: the first k are the top-k circuit
    task: str = "induction"  # "induction" or "pairs"
    left_out: int = 0  # pairs left out: the same answer after both texts
    clean: torch.Tensor = field(default=None, repr=False)  # (N, T) the prompts it was found on
    corrupted: torch.Tensor = field(default=None, repr=False)
    model_metric: float = 0.0  # the metric of the whole model, and of every edge ablated
    ablated_metric: float = 0.0
    forward_passes: int = 0  # passes of the prompt set (a batch) that finding it took, backward ones among them
    backward_passes: int = 0
    metric_name: str = "log-probability"  # "log-probability", "logit difference" or "kl divergence"
    normalise: str = "ablated"  # the base of the faithfulness: every edge ablated, or the corrupted run
    base_metric: float = 0.0  # the metric of that base
    mean_ids: torch.Tensor | None = field(default=None, repr=False)  # the separate set mean ablation averaged over
    found_on: "Faithfulness" = None  # the top-k circuit's faithfulness on its prompts, with its spread over them
    held_out: list["Faithfulness"] = field(default_factory=list)  # and on each held-out prompt set
    minimal: "MinimalCircuit | None" = None  # the top-k circuit pruned (None: max_runs 0)
    held_out_passes: int = 0  # passes of the held-out sets (recorded, exact) besides the pruning's runs


# ---- edges as a mask, by rank and by name ---------------------------------------------------------------------------


def ranked(graph: Graph, scores: torch.Tensor) -> list[tuple[int, int]]:
    """Every edge (sender index, receiver index), largest score in size first (ties in the graph's order)."""
    senders, receivers = graph.exists.nonzero(as_tuple=True)
    order = torch.argsort(scores[senders, receivers].abs(), descending=True, stable=True)
    return list(zip(senders[order].tolist(), receivers[order].tolist()))


def mask_of(graph: Graph, edges: list[tuple[int, int]]) -> torch.Tensor:
    kept = torch.zeros_like(graph.exists)
    for sender, receiver in edges:
        kept[sender, receiver] = True
    return kept


def edge_of(graph: Graph, sender: int, receiver: int, score: float) -> Edge:
    return Edge(*graph.edge_name(sender, receiver), score)


EDGE_FORMS = (
    "give each edge as an Edge (what find_circuit gives) or a (sender, receiver, input) tuple of node names, such as "
    "('0.2', '1.1', 'k') or ('mlp 1', 'logits', None)"
)


def edge_parts(edge, name: str) -> tuple:
    """(sender, receiver, input) of an Edge or a 3-tuple; anything else refused by `name`."""
    if isinstance(edge, Edge):
        return edge.sender, edge.receiver, edge.input
    if isinstance(edge, (tuple, list)) and len(edge) == 3:
        return tuple(edge)
    raise InstrumentError(f"{name} is {shortened(edge)}: {EDGE_FORMS}.")


def indices_of(graph: Graph, model, edge, name: str = "edge") -> tuple[int, int]:
    """(sender index, receiver index) of an Edge or a (sender, receiver, input) tuple of names or node tuples."""
    sender, receiver, into = edge_parts(edge, name)
    sender = parse_node(sender, model.config, f"{name}'s sender")
    receiver = parse_node(receiver, model.config, f"{name}'s receiver")
    if receiver[0] == "head" and into not in INPUTS or receiver[0] != "head" and into is not None:
        raise InstrumentError(
            f"{name}: an edge into a head names its input 'q', 'k' or 'v'; into {node_name(receiver)}, None."
        )
    try:
        found = graph.senders.index(sender), graph.receivers.index((receiver, into))
    except ValueError:
        found = None
    if found is None or not graph.exists[found]:
        raise InstrumentError(f"{name}: there is no edge {node_name(sender)} -> {node_name(receiver)} in the graph.")
    return found


def edges_mask(graph: Graph, model, edges) -> torch.Tensor:
    """(S, R) bool, True on `edges` (a list of Edges or (sender, receiver, input) tuples), each checked by name."""
    if isinstance(edges, (str, Edge)) or not hasattr(edges, "__iter__"):
        raise InstrumentError(f"edges must be a list of edges, got {shortened(edges)}: {EDGE_FORMS}.")
    return mask_of(graph, [indices_of(graph, model, edge, f"edges[{i}]") for i, edge in enumerate(edges)])


# ---- the search -----------------------------------------------------------------------------------------------------


def fewest_edges(model, setting: Setting, order: list[tuple[int, int]], target: float) -> int:
    """The fewest top edges whose exact run reaches `target` faithfulness, by binary search over k (every edge kept
    is the model itself: faithfulness 1)."""
    low, high = 0, len(order)  # faithfulness(low) < target <= faithfulness(high)
    while high - low > 1:
        middle = (low + high) // 2
        if faithfulness_of(model, setting, mask_of(setting.graph, order[:middle])) >= target:
            high = middle
        else:
            low = middle
    return high


# ---- the minimal circuit --------------------------------------------------------------------------------------------

SLACK = 0.01  # a held-out set already below the target may lose this much of what the top-k circuit keeps there


@dataclass
class Part:
    """A part of the minimal circuit and what it adds: the faithfulness on the found-on prompts lost without it (its
    edges, for a head), and the prompt set where, without it, the circuit falls below its floor."""

    name: str  # "1.1" (a head) or "0.2 -> 1.1 k" (an edge)
    kind: str  # "head" or "edge"
    adds: float
    needed_on: str


@dataclass
class MinimalCircuit:
    """The top-k circuit pruned: heads, then edges, removed while every prompt set stays at its floor (the target on
    the found-on prompts; on a held-out set, the target, or what the top-k circuit keeps there less SLACK where that
    is below it); each part left is needed on some set (`complete`: the pruning ended within its runs)."""

    edges: list[Edge]
    heads: list[str]
    faithfulness: float  # on the found-on prompts
    held_out: list[Faithfulness]
    parts: list[Part]
    floors: dict[str, float]
    complete: bool
    runs: int  # exact runs of the prompt sets the pruning took


class OutOfRuns(Exception):
    pass


@dataclass
class Checks:
    """The prompt sets a pruned circuit must stay at the floor on (found-on first), and the runs left."""

    model: object
    settings: list[tuple[str, Setting]]
    floors: list[float]
    runs_left: int
    runs: int = 0

    def fall(self, kept: torch.Tensor) -> tuple[str | None, float]:
        """The first set where `kept` is below its floor (None: none), and its found-on faithfulness."""
        found = None
        for (name, setting), floor in zip(self.settings, self.floors):
            if self.runs >= self.runs_left:
                raise OutOfRuns
            self.runs += 1
            value = faithfulness_of(self.model, setting, kept)
            found = value if found is None else found
            if value < floor:
                return name, found
        return None, found


def without_head(graph: Graph, kept: torch.Tensor, sender: int) -> torch.Tensor:
    kept = kept.clone()
    kept[sender] = False
    return read_parts(graph, kept)


def without_edge(graph: Graph, kept: torch.Tensor, edge: tuple[int, int]) -> torch.Tensor:
    kept = kept.clone()
    kept[edge] = False
    return read_parts(graph, kept)


def kept_heads(graph: Graph, kept: torch.Tensor) -> list[int]:
    return [s for s, node in enumerate(graph.senders) if node[0] == "head" and kept[s].any()]


def parts_of(graph: Graph, kept: torch.Tensor, scores: torch.Tensor) -> list[tuple[str, object]]:
    """The parts to try removing, in order: heads, then edges, each smallest score (in size) first."""
    size = torch.where(kept, scores.abs(), 0.0)
    heads = sorted(kept_heads(graph, kept), key=lambda s: float(size[s].sum()))
    edges = sorted(map(tuple, kept.nonzero().tolist()), key=lambda e: float(size[e]))
    return [("head", s) for s in heads] + [("edge", e) for e in edges]


def part_removed(graph: Graph, kept: torch.Tensor, kind: str, part) -> torch.Tensor:
    return without_head(graph, kept, part) if kind == "head" else without_edge(graph, kept, part)


def part_name(graph: Graph, kind: str, part) -> str:
    if kind == "head":
        return node_name(graph.senders[part])
    sender, receiver, into = graph.edge_name(*part)
    return f"{sender} -> {receiver}" + (f" {into}" if into else "")


def pruned(checks: Checks, graph: Graph, kept: torch.Tensor, scores: torch.Tensor) -> tuple[torch.Tensor, list]:
    """Greedy pruning: each part (heads first) removed in turn where every set stays at its floor; then each part
    left removed once more to measure what it adds, any whose removal now keeps every floor removed and the round
    begun again (the faithfulness is not monotone in the parts kept)."""
    for kind, part in parts_of(graph, kept, scores):
        if kind == "head" and not kept[part].any() or kind == "edge" and not kept[part]:
            continue  # gone with a part removed before
        candidate = part_removed(graph, kept, kind, part)
        if checks.fall(candidate)[0] is None:
            kept = candidate
    while True:
        added = []
        for kind, part in parts_of(graph, kept, scores):
            candidate = part_removed(graph, kept, kind, part)
            fell, found = checks.fall(candidate)
            if fell is None:
                kept = candidate
                break
            added.append((kind, part, found, fell))
        else:
            return kept, added


def minimal_circuit(
    model, settings: list[tuple[str, Setting]], kept: torch.Tensor, scores: torch.Tensor, target: float,
    held_out: list[Faithfulness], max_runs: int, prune_on: int | None = None,
) -> MinimalCircuit:  # fmt: skip
    """The top-k circuit `kept` pruned on the found-on set and the first `prune_on` held-out ones (None: all;
    `held_out`: the top-k circuit's faithfulness there, which sets the floors), within `max_runs` exact runs of a
    prompt set; the minimal circuit then measured once on every set."""
    graph = settings[0][1].graph
    held = held_out if prune_on is None else held_out[:prune_on]
    floors = [target] + [min(target, h.faithfulness - SLACK) for h in held]
    checks = Checks(model, settings[: len(floors)], floors, max_runs)
    try:
        kept, added = pruned(checks, graph, kept, scores)
        complete = True
    except OutOfRuns:
        added, complete = [], False
    measured = [faithfulness_on(model, name, setting, kept) for name, setting in settings]
    parts = [
        Part(part_name(graph, kind, part), kind, measured[0].faithfulness - found, fell)
        for kind, part, found, fell in added
    ]
    order = ranked(graph, scores)
    return MinimalCircuit(
        edges=[edge_of(graph, s, r, float(scores[s, r])) for s, r in order if kept[s, r]],
        heads=[node_name(graph.senders[s]) for s in kept_heads(graph, kept)],
        faithfulness=measured[0].faithfulness,
        held_out=measured[1:],
        parts=parts,
        floors={name: floor for (name, _), floor in zip(settings, floors)},
        complete=complete,
        runs=checks.runs + len(settings),
    )


# ---- the search -----------------------------------------------------------------------------------------------------


def checked_search(method: str, ablation: str, target: float, steps: int, normalise: str, max_runs) -> None:
    """The search's parameters checked before any pass runs."""
    checked_method(method, steps)
    checked_ablation(ablation)
    checked_normalise(normalise)
    if isinstance(target, bool) or not isinstance(target, (int, float)) or not 0 < target <= 1:
        raise InstrumentError(f"target (the faithfulness to keep) is above 0 and at most 1, not {shortened(target)}.")
    checked_count(max_runs, "max_runs", "the exact runs the minimal circuit's pruning may take", least=0)


def checked_pairing(method: str, metric: str | None) -> None:
    """EAP takes the gradient at the clean run, where the KL divergence to the clean run is at its minimum: its
    gradient there is zero and every edge would score 0."""
    if method == "eap" and metric == "kl divergence":
        raise InstrumentError(
            "EAP takes its gradient at the clean run, where the KL divergence to the clean run is least (its gradient "
            "is zero there, so every edge would score 0): use method 'eap-ig' with KL, or another metric with EAP."
        )


def find_circuit(
    model, clean_ids=None, corrupted_ids=None, task: str | None = None, method: str = "eap-ig", steps: int = 5,
    ablation: str = "mean", target: float = 0.9, prompts: int = 20, half: int = 20, seed: int = 0,
    metric: str | None = None, normalise: str = "ablated", mean_ids=None, held_out=None, max_runs: int = 400,
    prune_on: int | None = None,
) -> FoundCircuit:  # fmt: skip
    """The fewest top-scored edges that keep `target` of the behaviour, with their faithfulness measured exactly, on
    the prompts they were found on and on held-out ones, and the minimal circuit pruned from them.

    Task (see `circuit_tasks`): with no texts, the induction task (`prompts` prompts of `half` random tokens written
    twice, seeded; metric: the mean log-probability of the repeated half); clean and corrupted texts (one pair, a list
    of pairs or (N, T) tensors), the pairs task (metric: the mean logit difference between each pair's answers at the
    last position). `metric`: "log-probability", "logit difference" or "kl divergence" (None: the task's).
    Scores: `method` "eap-ig" (`steps` interpolated runs) or "eap", against what the ablation puts in.
    Ablation: "mean" (each sender's mean output over the prompts, or over `mean_ids`, a separate set of the same
    length, at each position) or "corrupted" (its output on the corrupted prompt). `normalise`: faithfulness against
    every edge ablated ("ablated") or the plain run on the corrupted prompts ("corrupted", EAP-IG's code's).
    `held_out`: the prompt sets it is checked on besides (see `held_out_tasks`; {}: none). Passes: 1 or 2 recorded,
    1 or `steps` forward and backward, about log2(edges) + 2 exact, then the held-out sets' and the pruning's
    (at most `max_runs` exact runs; 0: no pruning; held to the found-on set and the first `prune_on` held-out sets,
    None: all, and measured on every set)."""
    checked_search(method, ablation, target, steps, normalise, max_runs)
    checked_pairing(method, metric)
    found_task = task_of(model, clean_ids, corrupted_ids, task, prompts, half, seed, metric)
    setting, clean_out = setting_of(model, found_task, ablation, normalise, mean_ids)
    graph = setting.graph
    scores = edge_scores(model, graph, found_task, clean_out, setting.ablated, method, steps)
    backward = steps if method == "eap-ig" else 1
    order = ranked(graph, scores)
    kept = read_parts(graph, mask_of(graph, order[: fewest_edges(model, setting, order, target)]))
    found_on = faithfulness_on(model, "found on", setting, kept)
    passes = setting.forward_passes + (1 if found_task.name == "pairs" else 0) + backward
    others = [
        (name, setting_of(model, t, ablation, normalise)[0])
        for name, t in held_out_tasks(model, found_task, held_out, prompts, half, seed)
    ]
    held = [faithfulness_on(model, name, other, kept) for name, other in others]
    held_out_passes = sum(other.forward_passes for _, other in others)
    minimal = None
    if max_runs:
        settings = [("found on", setting), *others]
        minimal = minimal_circuit(model, settings, kept, scores, target, held, max_runs, prune_on)
    edges = [edge_of(graph, s, r, float(scores[s, r])) for s, r in order if kept[s, r]]
    heads = [node_name(graph.senders[s]) for s in kept_heads(graph, kept)]
    return FoundCircuit(
        edges=edges,
        faithfulness=found_on.faithfulness,
        kept_edges=len(edges),
        total_edges=graph.total_edges,
        prompts=len(found_task.clean),
        metric=found_task.metric,
        method=method,
        ablation=ablation,
        heads=heads,
        target=target,
        ranking=[edge_of(graph, s, r, float(scores[s, r])) for s, r in order],
        task=found_task.name,
        left_out=found_task.left_out,
        clean=found_task.clean,
        corrupted=found_task.corrupted,
        model_metric=setting.model_metric,
        ablated_metric=setting.ablated_metric,
        forward_passes=passes,
        backward_passes=backward,
        metric_name=found_task.metric_name,
        normalise=normalise,
        base_metric=setting.base_metric,
        mean_ids=None if mean_ids is None else as_prompts(mean_ids, model.config.vocab_size, "mean_ids"),
        found_on=found_on,
        held_out=held,
        minimal=minimal,
        held_out_passes=held_out_passes,
    )


# ---- faithfulness of any circuit ------------------------------------------------------------------------------------


def circuit_faithfulness(
    model, edges, clean_ids=None, corrupted_ids=None, task: str | None = None, ablation: str = "mean",
    prompts: int = 20, half: int = 20, seed: int = 0, metric: str | None = None, normalise: str = "ablated",
    mean_ids=None,
) -> float:  # fmt: skip
    """The exact faithfulness of the circuit made of `edges` (Edges, or (sender, receiver, input) names such as
    ("0.2", "1.1", "k"), ("mlp 1", "logits", None)) on a task given as `find_circuit` takes it (its metric, its
    normalisation and its separate mean set too)."""
    kept = edges_mask(graph_of(model.config), model, edges)  # checked before any pass
    found_task = task_of(model, clean_ids, corrupted_ids, task, prompts, half, seed, metric)
    setting = setting_of(model, found_task, ablation, normalise, mean_ids)[0]
    return faithfulness_of(model, setting, kept)


def checked_k(k, total: int) -> int:
    k = whole(k, "ks")
    if not 0 <= k <= total:
        raise InstrumentError(f"ks holds {k}: give numbers of top edges kept, 0 to {total} (every edge).")
    return k


def faithfulness_curve(model, found: FoundCircuit, ks: list[int] | None = None) -> list[tuple[int, float]]:
    """(k, faithfulness) of the top-k edges of `found`'s ranking (not pruned) at each k of `ks` (default: 0, 1, 2, 4,
    ... up to every edge, and the number kept), on the prompts it was found on: one exact run each."""
    if ks is None:
        ks = sorted({0, found.total_edges, found.kept_edges} | {2**i for i in range(found.total_edges.bit_length())})
    ks = [checked_k(k, found.total_edges) for k in ks]
    task = task_of(model, found.clean, found.corrupted, found.task, len(found.clean), 0, 0, found.metric_name)
    setting = setting_of(model, task, found.ablation, found.normalise, found.mean_ids)[0]
    order = [indices_of(setting.graph, model, edge) for edge in found.ranking]
    return [(k, faithfulness_of(model, setting, mask_of(setting.graph, order[:k]))) for k in ks]


__all__ = [
    "ABLATIONS",
    "NORMALISATIONS",
    "Edge",
    "Faithfulness",
    "FoundCircuit",
    "MinimalCircuit",
    "Part",
    "circuit_faithfulness",
    "faithfulness_curve",
    "find_circuit",
]
