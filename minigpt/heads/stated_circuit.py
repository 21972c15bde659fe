"""A circuit a person states, measured as a found one is (`discovery`): written as heads ("0.2, 1.1": every edge
among those heads, the embeddings, every MLP and the logits) or as edges and paths ("0.2 -> mlp 0 -> 1.1 k, mlp 0 ->
logits": each consecutive pair of a path an edge, an edge into a head naming its input q, k or v), or given as a list
of edges as `circuit_faithfulness` takes them; then its exact faithfulness on the prompts of a task and on held-out
sets, with the spread over each set's prompts, and what each of its parts (each head stated, or each edge) adds: the
faithfulness on the task's prompts lost without it (< 0: the circuit keeps more without it; the part works against).

    heads.measure_circuit(model, "0.2, 1.1")                      # the induction task and its held-out sets
    heads.measure_circuit(model, "embed -> 0.2 v -> 1.1 k -> logits")
"""

import re
from dataclasses import dataclass, field

import torch

from minigpt.heads.circuit_tasks import task_of
from minigpt.heads.discovery import edges_mask, part_name, without_edge, without_head
from minigpt.heads.errors import InstrumentError, checked_count, shortened
from minigpt.heads.exact_runs import Faithfulness, faithfulness_on, held_out_tasks, read_parts, setting_of
from minigpt.heads.graph import Graph, graph_of
from minigpt.heads.nodes import node_name, parse_node, writes_before

MAX_TEXT = 4000  # characters of a stated circuit (a model's every edge, written out, fits a GPT-2-sized one's heads)
ARROW = re.compile(r"->|→")
INPUT = re.compile(r"(.*[0-9])\s*([qkv])", re.IGNORECASE)  # "1.1 k", "1.1k": a head and which of its inputs
HOW = (
    "write heads ('0.2, 1.1': every edge among them, the embeddings, the MLPs and the logits) or edges and paths "
    "('0.2 -> mlp 0 -> 1.1 k, mlp 0 -> logits': each arrow an edge, an edge into a head naming its input q, k or v)"
)


@dataclass
class PartAdds:
    """A part of a stated circuit and what it adds: the faithfulness on the task's prompts lost without it (< 0: the
    circuit keeps more without it), and the faithfulness without it."""

    name: str  # "1.1" (a head: every edge out of it) or "0.2 -> 1.1 k" (an edge)
    kind: str  # "head" or "edge"
    adds: float
    without: float


@dataclass
class MeasuredCircuit:
    """A stated circuit measured: its edges as the page names them, its heads, its exact faithfulness on the task's
    prompts and on each held-out set, and what each part adds (`complete`: every part measured within the runs)."""

    form: str  # "heads" or "edges"
    edges: list[tuple[str, str, str | None]]  # (sender, receiver, input), in the graph's order
    heads: list[str]  # the heads whose output a kept edge reads
    unread: list[str]  # parts stated whose output no edge of the circuit reads (they change nothing)
    found_on: Faithfulness
    held_out: list[Faithfulness]
    parts: list[PartAdds]
    complete: bool
    kept_edges: int
    total_edges: int
    metric_name: str
    runs: int  # exact runs of a prompt set, the held-out sets' included
    kept: torch.Tensor = field(default=None, repr=False)  # (S, R) bool: the circuit as a mask of the graph's edges


# ---- the circuit as written -----------------------------------------------------------------------------------------


def node_and_input(text: str, config, name: str) -> tuple[tuple, str | None]:
    """A path's node as written: a node's name, a head's followed by the input an edge goes into ("1.1 k")."""
    match = INPUT.fullmatch(text.strip())
    node, into = (match[1], match[2].lower()) if match else (text, None)
    try:
        node = parse_node(node, config, name)
    except InstrumentError as error:
        raise InstrumentError(f"{error} In a circuit, {HOW}.") from None
    if into and node[0] != "head":
        raise InstrumentError(f"{name} {shortened(text.strip())}: only a head has inputs q, k and v.")
    return node, into


def path_edges(path: str, config) -> list[tuple[tuple, tuple, str | None]]:
    """The edges of one path: "0.2 -> mlp 0 -> 1.1 k" -> (0.2, mlp 0, None), (mlp 0, 1.1, k)."""
    hops = [node_and_input(hop, config, f"path {shortened(path.strip())}'s node") for hop in ARROW.split(path)]
    if hops[0][1]:
        raise InstrumentError(
            f"path {shortened(path.strip())} begins with {node_name(hops[0][0])} {hops[0][1]}: a path's first node "
            "sends, write it without q, k or v (the input belongs to the node an arrow goes into)."
        )
    edges = []
    for (sender, _), (receiver, into) in zip(hops, hops[1:]):
        edge = f"{node_name(sender)} -> {node_name(receiver)}"
        if sender[0] in ("logits", "resid") or receiver[0] in ("embed", "resid"):
            raise InstrumentError(
                f"{edge}: the embeddings, heads and MLPs send; heads, MLPs and the logits receive ('resid L' is no "
                f"part of the graph). In a circuit, {HOW}."
            )
        if not writes_before(sender, receiver):
            raise InstrumentError(
                f"there is no edge {edge}: a part sends only to parts of later layers (a head to its own layer's MLP "
                "too) and to the logits."
            )
        if receiver[0] == "head" and into is None:
            raise InstrumentError(
                f"{edge}: name the input of {node_name(receiver)} the edge goes into: '{node_name(receiver)} q', "
                f"'{node_name(receiver)} k' or '{node_name(receiver)} v'."
            )
        edges.append((node_name(sender), node_name(receiver), into))
    return edges


def head_names(items: list[str], config) -> list[tuple]:
    """The heads of a list ("0.2, 1.1" or "0.2 1.1"); any other node refused with what to write instead."""
    heads = []
    for item in items:
        try:
            node = parse_node(item, config)
        except InstrumentError:
            if len(item.split()) > 1:  # "0.2 1.1": heads apart by spaces
                heads += head_names(item.split(), config)
                continue
            node = parse_node(item, config, "head", f"cannot read it as a head ('1.1'). In a circuit, {HOW}.")
        if node[0] != "head":
            raise InstrumentError(
                f"{shortened(item)} is not a head: a list of heads names heads only ('0.2, 1.1'), the embeddings, "
                "every MLP and the logits come with them; to choose MLPs too, write edges ('0.2 -> mlp 0 -> 1.1 k')."
            )
        heads.append(node)
    return heads


def heads_mask(graph: Graph, heads: list[tuple]) -> torch.Tensor:
    """(S, R) bool: every edge among `heads`, the embeddings, every MLP and the logits."""
    sends = torch.tensor([node[0] != "head" or node in heads for node in graph.senders], device="cpu")
    reads = torch.tensor([node[0] != "head" or node in heads for node, _ in graph.receivers], device="cpu")
    return graph.exists & sends[:, None] & reads[None, :]


def parsed_circuit(circuit, model) -> tuple[str, torch.Tensor, list[tuple]]:
    """("heads" or "edges", the kept mask, the heads stated) of a circuit written as text or given as edges."""
    graph = graph_of(model.config)
    if not isinstance(circuit, str):
        return "edges", edges_mask(graph, model, circuit), []
    if len(circuit) > MAX_TEXT:
        raise InstrumentError(f"the circuit is {len(circuit)} characters: at most {MAX_TEXT}.")
    items = [item.strip() for item in re.split(r"[,;\n]", circuit) if item.strip()]
    if not items:
        raise InstrumentError(f"the circuit is empty: {HOW}.")
    paths = [item for item in items if ARROW.search(item)]
    if not paths:
        heads = head_names(items, model.config)
        return "heads", heads_mask(graph, heads), list(dict.fromkeys(heads))
    if len(paths) < len(items):
        alone = next(item for item in items if not ARROW.search(item))
        raise InstrumentError(
            f"{shortened(alone)} stands alone among edges: write either heads ('0.2, 1.1') or edges and paths "
            "('0.2 -> 1.1 k'), not both."
        )
    edges = [edge for path in paths for edge in path_edges(path, model.config)]
    return "edges", edges_mask(graph, model, edges), []


def stated_heads(circuit, model) -> list[str]:
    """The heads a circuit written as text (or given as edges) names, in the graph's order: each head of a list, or
    each head an edge goes out of or into; read as `measure_circuit` reads it (a refusal says what to write)."""
    form, kept, heads = parsed_circuit(circuit, model)
    graph = graph_of(model.config)
    if form == "edges":
        heads = {graph.senders[s] for s in kept.any(dim=1).nonzero().flatten().tolist()}
        heads |= {graph.receivers[r][0] for r in kept.any(dim=0).nonzero().flatten().tolist()}
    return [node_name(node) for node in graph.senders if node[0] == "head" and node in heads]


# ---- the circuit measured -------------------------------------------------------------------------------------------


def unread_parts(graph: Graph, kept: torch.Tensor) -> list[str]:
    """Heads and MLPs that receive an edge of the circuit but send none: what they compute reaches nothing."""
    reading = {graph.receivers[r][0] for r in kept.any(dim=0).nonzero().flatten().tolist()}
    return [node_name(node) for node in graph.senders if node in reading and not kept[graph.senders.index(node)].any()]


def parts_added(model, setting, kept: torch.Tensor, form: str, heads: list[tuple], full: float, max_runs: int):
    """What each part adds on the task's prompts: each head stated (every edge out of it), else each edge; at most
    `max_runs` parts measured."""
    graph = setting.graph
    if form == "heads":
        parts = [("head", graph.senders.index(head)) for head in heads]
    else:
        parts = [("edge", edge) for edge in map(tuple, kept.nonzero().tolist())]
    measured = []
    for kind, part in parts[:max_runs]:
        removed = without_head(graph, kept, part) if kind == "head" else without_edge(graph, kept, part)
        without = faithfulness_on(model, "found on", setting, removed).faithfulness
        measured.append(PartAdds(part_name(graph, kind, part), kind, full - without, without))
    return measured, len(parts) <= max_runs


def measure_circuit(
    model, circuit, clean_ids=None, corrupted_ids=None, task: str | None = None, ablation: str = "mean",
    prompts: int = 20, half: int = 20, seed: int = 0, metric: str | None = None, normalise: str = "ablated",
    mean_ids=None, held_out=None, max_runs: int = 200,
) -> MeasuredCircuit:  # fmt: skip
    """A stated circuit (text: heads "0.2, 1.1" or edges and paths "0.2 -> mlp 0 -> 1.1 k"; or a list of edges as
    `circuit_faithfulness` takes them) measured exactly as `find_circuit` measures what it finds: its faithfulness on
    the task's prompts (the task, ablation, metric and normalisation as `find_circuit` takes them) and on `held_out`
    sets (as `find_circuit` takes them; None: the task's own), each with its spread over the prompts, and what each
    part adds (at most `max_runs` exact runs of the task's prompts)."""
    checked_count(max_runs, "max_runs", "the exact runs measuring what each part adds", least=0)
    form, kept, heads = parsed_circuit(circuit, model)  # checked before any pass
    found_task = task_of(model, clean_ids, corrupted_ids, task, prompts, half, seed, metric)
    setting = setting_of(model, found_task, ablation, normalise, mean_ids)[0]
    graph = setting.graph
    kept = read_parts(graph, kept) if form == "heads" else kept
    found_on = faithfulness_on(model, "found on", setting, kept)
    others = held_out_tasks(model, found_task, held_out, prompts, half, seed)
    held = [faithfulness_on(model, name, setting_of(model, t, ablation, normalise)[0], kept) for name, t in others]
    parts, complete = parts_added(model, setting, kept, form, heads, found_on.faithfulness, max_runs)
    return MeasuredCircuit(
        form=form,
        edges=[graph.edge_name(s, r) for s, r in kept.nonzero().tolist()],
        heads=[node_name(node) for s, node in enumerate(graph.senders) if node[0] == "head" and kept[s].any()],
        unread=unread_parts(graph, kept),
        found_on=found_on,
        held_out=held,
        parts=parts,
        complete=complete,
        kept_edges=int(kept.sum()),
        total_edges=graph.total_edges,
        metric_name=found_task.metric_name,
        runs=2 + len(held) * 2 + len(parts),
        kept=kept,
    )


__all__ = ["MeasuredCircuit", "PartAdds", "measure_circuit"]
