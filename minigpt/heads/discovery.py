"""The circuit found, not told: edges of the model's graph (`graph`) scored by attribution (`edge_attribution`: EAP
or EAP-IG), ranked by the size of their score, and the fewest top edges kept whose exact run keeps the behaviour.

An exact run of a circuit (a set of kept edges) runs the clean prompts with every receiver reading, instead of the
stream, the sum over its senders of the sender's output in this run where the edge is kept, else the sender's
ablated output, plus the constants (the attention biases): stream - sum over its dropped edges of (output -
ablated output), through the model's own modules (a head's q, k, v from the layer's attn_norm and its rows of
qkv_proj, the MLP through mlp_norm and mlp, the logits through final_norm and lm_head). Ablated outputs: "mean", each
sender's output averaged over the prompt set at each position; "corrupted", its output on the prompt's corrupted
prompt.

faithfulness = (metric(circuit) - metric(every edge ablated)) / (metric(model) - metric(every edge ablated)).

Edges are scored in EAP-IG's convention (`edge_attribution.edge_scores`: negative where ablating the edge lowers the
metric, the mean over prompts) against what the ablation puts in: the corrupted run's outputs for "corrupted" (the
papers' EAP and EAP-IG), the mean outputs for "mean"; they are ranked by size. Scored against the corrupted run but
checked with mean ablation, an edge that carries what the clean and corrupted prompts share (the current token, into an
induction head's query) scores nothing and is dropped, though mean ablation takes it away: on the specimen such a
ranking needs 41 of 110 edges and 6 heads for 0.9, the consistent one 22 and 4.

The search: binary search on the number k of top edges kept, one exact run of the prompt set a step (it takes the
faithfulness as growing with k; where it does not, it finds a k that reaches the target, not always the fewest).
Then edges into a head or an MLP whose output no kept edge reads are dropped: they change nothing that is read (the
faithfulness is measured again on what is left).
"""

from dataclasses import dataclass, field

import torch

from minigpt.heads.circuit_tasks import Task, task_of
from minigpt.heads.edge_attribution import checked_method, edge_scores, recorded_outputs
from minigpt.heads.errors import InstrumentError, shortened, whole
from minigpt.heads.graph import INPUTS, Graph, graph_hooks, graph_of
from minigpt.heads.hooks import hooks
from minigpt.heads.nodes import node_name, parse_node

ABLATIONS = ("mean", "corrupted")


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


@dataclass
class Setting:
    """What exact runs of one task need: the graph, the prompts, the ablated outputs (S, 1 or N, T, C), the metric of
    the model and of every edge ablated, and the passes run so far."""

    graph: Graph
    task: Task
    ablated: torch.Tensor
    model_metric: float = 0.0
    ablated_metric: float = 0.0
    forward_passes: int = 0


def circuit_logits(model, setting: Setting, kept: torch.Tensor) -> torch.Tensor:
    """(N, T, V) the logits of one exact run of the circuit `kept` ((S, R) bool) on the clean prompts."""
    graph, written = setting.graph, []
    dropped = (graph.exists & ~kept.cpu()).to(model.device, setting.ablated.dtype)

    def read(stream, receivers, before):
        away = torch.cat(written)[:before] - setting.ablated[:before]  # (s, N, T, C): output - ablated output
        return stream[None] - torch.einsum("sr,sntc->rntc", dropped[:before, receivers], away)

    with hooks(*graph_hooks(model, read=read, write=written.append)), torch.no_grad():
        logits = model(input_ids=setting.task.clean.to(model.device), use_cache=False).logits
    setting.forward_passes += 1
    return logits


def circuit_metric(model, setting: Setting, kept: torch.Tensor) -> float:
    """The metric of one exact run of the circuit `kept` ((S, R) bool)."""
    return float(setting.task.measure(circuit_logits(model, setting, kept)))


def faithfulness_of(model, setting: Setting, kept: torch.Tensor) -> float:
    """(metric(circuit) - metric(every edge ablated)) / (metric(model) - metric(every edge ablated))."""
    found = circuit_metric(model, setting, kept)
    return (found - setting.ablated_metric) / (setting.model_metric - setting.ablated_metric)


def checked_ablation(ablation: str) -> None:
    if ablation not in ABLATIONS:
        raise InstrumentError(f"ablation is 'mean' or 'corrupted', not {shortened(ablation)}.")


def setting_of(model, task: Task, ablation: str) -> tuple[Setting, torch.Tensor]:
    """The setting of a task (one or two recorded passes and one exact run with every edge ablated), and every
    sender's clean outputs (S, N, T, C)."""
    checked_ablation(ablation)
    clean_out, clean_logits = recorded_outputs(model, task.clean)
    if ablation == "mean":
        ablated = clean_out.mean(dim=1, keepdim=True)
    else:
        ablated = recorded_outputs(model, task.corrupted)[0]
    graph = graph_of(model.config)
    setting = Setting(graph, task, ablated, float(task.measure(clean_logits)), forward_passes=1 + (ablation != "mean"))
    setting.ablated_metric = circuit_metric(model, setting, torch.zeros_like(graph.exists))
    gap = setting.model_metric - setting.ablated_metric
    if abs(gap) <= 1e-6 * max(1.0, abs(setting.model_metric)):
        raise InstrumentError(
            f"With every edge ablated ({ablation}) the metric is what the model's is ({setting.model_metric:.4g}): "
            "there is no behaviour for a circuit to keep. Give more prompts (a mean over one prompt is that prompt), "
            "or ablate to the corrupted prompts."
        )
    return setting, clean_out


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


def read_parts(graph: Graph, kept: torch.Tensor) -> torch.Tensor:
    """`kept` without the edges into heads and MLPs whose output no kept edge reads: the latest first, so that a
    part read only by such parts goes too."""
    kept = kept.clone()
    for sender in reversed(range(len(graph.senders))):
        node = graph.senders[sender]
        if node[0] != "embed" and not kept[sender].any():
            kept[:, [r for r, (reader, _) in enumerate(graph.receivers) if reader == node]] = False
    return kept


def checked_search(method: str, ablation: str, target: float, steps: int) -> None:
    """The search's parameters checked before any pass runs."""
    checked_method(method, steps)
    checked_ablation(ablation)
    if isinstance(target, bool) or not isinstance(target, (int, float)) or not 0 < target <= 1:
        raise InstrumentError(f"target (the faithfulness to keep) is above 0 and at most 1, not {shortened(target)}.")


def find_circuit(
    model, clean_ids=None, corrupted_ids=None, task: str | None = None, method: str = "eap-ig", steps: int = 5,
    ablation: str = "mean", target: float = 0.9, prompts: int = 20, half: int = 20, seed: int = 0,
) -> FoundCircuit:  # fmt: skip
    """The fewest top-scored edges that keep `target` of the behaviour, with their faithfulness measured exactly.

    Task (see `circuit_tasks`): with no texts, the induction task (`prompts` prompts of `half` random tokens written
    twice, seeded; metric: the mean log-probability of the repeated half); clean and corrupted texts (one pair, a list
    of pairs or (N, T) tensors), the pairs task (metric: the mean logit difference between each pair's answers at the
    last position). Scores: `method` "eap-ig" (`steps` interpolated runs) or "eap", against what the ablation puts in.
    Ablation: "mean" (each sender's mean output over the prompts, at each position) or "corrupted" (its output on the
    corrupted prompt). Passes: 1 or 2 recorded, 1 or `steps` forward and backward, about log2(edges) + 2 exact."""
    checked_search(method, ablation, target, steps)
    found_task = task_of(model, clean_ids, corrupted_ids, task, prompts, half, seed)
    setting, clean_out = setting_of(model, found_task, ablation)
    graph = setting.graph
    scores = edge_scores(model, graph, found_task, clean_out, setting.ablated, method, steps)
    backward = steps if method == "eap-ig" else 1
    order = ranked(graph, scores)
    kept = read_parts(graph, mask_of(graph, order[: fewest_edges(model, setting, order, target)]))
    faithfulness = faithfulness_of(model, setting, kept)
    edges = [edge_of(graph, s, r, float(scores[s, r])) for s, r in order if kept[s, r]]
    heads = [node_name(node) for node, row in zip(graph.senders, kept) if node[0] == "head" and row.any()]
    return FoundCircuit(
        edges=edges,
        faithfulness=faithfulness,
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
        forward_passes=setting.forward_passes + (1 if found_task.name == "pairs" else 0) + backward,
        backward_passes=backward,
    )


# ---- faithfulness of any circuit ------------------------------------------------------------------------------------


def circuit_faithfulness(
    model, edges, clean_ids=None, corrupted_ids=None, task: str | None = None, ablation: str = "mean",
    prompts: int = 20, half: int = 20, seed: int = 0,
) -> float:  # fmt: skip
    """The exact faithfulness of the circuit made of `edges` (Edges, or (sender, receiver, input) names such as
    ("0.2", "1.1", "k"), ("mlp 1", "logits", None)) on a task given as `find_circuit` takes it."""
    kept = edges_mask(graph_of(model.config), model, edges)  # checked before any pass
    found_task = task_of(model, clean_ids, corrupted_ids, task, prompts, half, seed)
    setting = setting_of(model, found_task, ablation)[0]
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
    task = task_of(model, found.clean, found.corrupted, found.task, len(found.clean), 0, 0)
    setting = setting_of(model, task, found.ablation)[0]
    order = [indices_of(setting.graph, model, edge) for edge in found.ranking]
    return [(k, faithfulness_of(model, setting, mask_of(setting.graph, order[:k]))) for k in ks]


__all__ = ["ABLATIONS", "Edge", "FoundCircuit", "circuit_faithfulness", "faithfulness_curve", "find_circuit"]
