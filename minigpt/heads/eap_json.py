"""A found circuit in EAP-IG's graph JSON layout (Hanna et al. 2024, github.com/hannamw/EAP-IG: what its
`Graph.to_json` writes and `Graph.from_json` reads), and a circuit read back from one:

    {"cfg": {"n_layers": 2, "n_heads": 4, "parallel_attn_mlp": false, "d_model": 128},
     "nodes": {"input": {"in_graph": true}, "a0.h0": {"in_graph": true}, ..., "m1": ..., "logits": {"in_graph": true}},
     "edges": {"input->a0.h0<q>": {"score": -0.012, "in_graph": true}, ..., "a0.h1->m0": ..., "m1->logits": ...}}

Nodes: `input` (the page's `embed`), `a{L}.h{H}` (head L.H), `m{L}` (mlp L), `logits`; an edge is `sender->receiver`,
with `<q>`, `<k>` or `<v>` after a head it enters. Every edge of the graph is written, with its score (EAP-IG's
convention, as `find_circuit` gives it) and whether the circuit keeps it; a node is in the graph where a kept edge
leaves it (as `FoundCircuit.heads` names heads), the logits always. MiniGPT's blocks run attention then the MLP:
`parallel_attn_mlp` is false. Read back, a layout names the edges it keeps; edges it leaves out are not kept (as
EAP-IG's `from_json` leaves them), and its nodes are not read (the edges say the circuit).
"""

import re
from types import SimpleNamespace

from minigpt.heads.discovery import Edge, FoundCircuit
from minigpt.heads.errors import InstrumentError, shortened
from minigpt.heads.graph import graph_of

EDGE_NAME = re.compile(r"([^>]+)->([^<]+)(?:<([qkv])>)?")
MAX_HEADS = 2048  # the largest graph read (GPT-2 XL has 1,200 heads): the graph is built edge by edge
EAP_NODE = re.compile(r"input|logits|a([0-9]{1,6})\.h([0-9]{1,6})|m([0-9]{1,6})")


def eap_node(name: str) -> str:
    """The page's node name in EAP-IG's: "embed" -> "input", "1.1" -> "a1.h1", "mlp 0" -> "m0", "logits"."""
    if name in ("embed", "logits"):
        return "input" if name == "embed" else name
    if name.startswith("mlp "):
        return f"m{name.split()[1]}"
    layer, head = name.split(".")
    return f"a{layer}.h{head}"


def page_node(name: str, field: str) -> str:
    """EAP-IG's node name in the page's, the inverse of `eap_node`; anything else refused (`field`: where it was)."""
    match = EAP_NODE.fullmatch(name)
    if not match:
        raise InstrumentError(
            f"{field}: {shortened(name)} is not a node of EAP-IG's graph ('input', 'a1.h1', 'm0', 'logits')."
        )
    if match[1] is not None:
        return f"{match[1]}.{match[2]}"
    return f"mlp {match[3]}" if match[3] is not None else {"input": "embed", "logits": "logits"}[name]


def eap_edge(edge: Edge) -> str:
    """'input->a0.h0<q>', 'a0.h1->m0', 'm1->logits': an edge as EAP-IG's `Edge.name` writes it."""
    into = f"<{edge.input}>" if edge.input else ""
    return f"{eap_node(edge.sender)}->{eap_node(edge.receiver)}{into}"


def shape_of(config) -> SimpleNamespace:
    """The layers and heads of a model, a config (MiniGPT's n_layer, n_head) or EAP-IG's cfg (n_layers, n_heads)."""
    config = getattr(config, "config", config)
    if isinstance(config, dict):
        return SimpleNamespace(n_layer=config["n_layers"], n_head=config["n_heads"], n_embd=config.get("d_model"))
    return SimpleNamespace(n_layer=config.n_layer, n_head=config.n_head, n_embd=config.n_embd)


def graph_edges(shape) -> list[Edge]:
    """Every edge of the graph of a model of `shape`, in the graph's order, scored 0."""
    graph = graph_of(shape)
    return [Edge(*graph.edge_name(s, r), 0.0) for s, r in graph.exists.nonzero().tolist()]


def circuit_to_eap_json(found: FoundCircuit, model) -> dict:
    """`found` in EAP-IG's graph JSON layout (a dict; `json.dump` it to a file EAP-IG's `Graph.from_json` reads):
    every edge of the graph with its score and whether the circuit keeps it, the nodes a kept edge leaves, and the
    model's shape (`model`: the model or its config)."""
    shape = shape_of(model)
    scores = {(e.sender, e.receiver, e.input): e.score for e in found.ranking}
    kept = {(e.sender, e.receiver, e.input) for e in found.edges}
    edges, every = {}, graph_edges(shape)
    for edge in every:
        key = (edge.sender, edge.receiver, edge.input)
        edges[eap_edge(edge)] = {"score": float(scores.get(key, 0.0)), "in_graph": key in kept}
    senders = {sender for sender, _, _ in kept}
    nodes = {eap_node(edge.sender): {"in_graph": edge.sender in senders} for edge in every}
    nodes["logits"] = {"in_graph": True}
    cfg = {"n_layers": shape.n_layer, "n_heads": shape.n_head, "parallel_attn_mlp": False, "d_model": shape.n_embd}
    return {"cfg": cfg, "nodes": nodes, "edges": edges}


def checked_layout(data, model) -> SimpleNamespace:
    """The shape EAP-IG's layout `data` gives, checked: the three keys, a sequential graph, and the model's shape
    where `model` is given."""
    if not isinstance(data, dict) or not {"cfg", "nodes", "edges"} <= data.keys():
        raise InstrumentError(
            "An EAP-IG graph is a dict with 'cfg', 'nodes' and 'edges' (what its Graph.to_json writes, read with "
            f"json.load), not {shortened(data)}."
        )
    cfg = data["cfg"]
    if not isinstance(cfg, dict) or not all(isinstance(cfg.get(key), int) for key in ("n_layers", "n_heads")):
        raise InstrumentError(f"The graph's cfg needs n_layers and n_heads (whole numbers), not {shortened(cfg)}.")
    if not (cfg["n_layers"] >= 1 and cfg["n_heads"] >= 1 and cfg["n_layers"] * cfg["n_heads"] <= MAX_HEADS):
        raise InstrumentError(
            f"The graph's cfg gives {shortened(cfg['n_layers'])} layers of {shortened(cfg['n_heads'])} heads: read "
            f"graphs of at least one layer and one head, at most {MAX_HEADS:,} heads in all."
        )
    if cfg.get("parallel_attn_mlp"):
        raise InstrumentError(
            "The graph is of parallel attention and MLP blocks: MiniGPT's run attention, then the MLP."
        )
    shape = shape_of(cfg)
    mine = shape if model is None else shape_of(model)
    if (shape.n_layer, shape.n_head) != (mine.n_layer, mine.n_head):
        raise InstrumentError(
            f"The graph is of {shape.n_layer} layers of {shape.n_head} heads, the model {mine.n_layer} of "
            f"{mine.n_head}: read it with the model it was found on."
        )
    if not isinstance(data["edges"], dict):
        raise InstrumentError(
            f"The graph's edges are a dict of name -> {{'score', 'in_graph'}}, not {shortened(data['edges'])}."
        )
    return shape


def circuit_from_eap_json(data: dict, model=None) -> list[Edge]:
    """The edges a graph in EAP-IG's JSON layout keeps (`in_graph` true), as `find_circuit` gives them: largest score
    in size first (ties in the graph's order), each with its score; `circuit_faithfulness` takes them. `data`: the
    dict (`json.load` of the file); `model` (or its config), when given, must be of the graph's shape. Names that are
    no edge of the graph are refused."""
    shape = checked_layout(data, model)
    order = {eap_edge(edge): edge for edge in graph_edges(shape)}
    kept = []
    for name, entry in data["edges"].items():
        if name not in order:
            match = EDGE_NAME.fullmatch(str(name))
            for node in match.groups()[:2] if match else ():
                page_node(node, f"edge {shortened(name)}")  # names the node that is wrong
            raise InstrumentError(
                f"{shortened(name)} is no edge of a graph of {shape.n_layer} layers of {shape.n_head} heads: EAP-IG "
                "writes 'input->a0.h0<q>', 'a0.h1->m0', 'm1->logits'."
            )
        if not isinstance(entry, dict) or not isinstance(entry.get("in_graph"), bool):
            raise InstrumentError(f"Edge {shortened(name)}: give {{'score': number, 'in_graph': true or false}}.")
        score = entry.get("score", 0.0)
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            raise InstrumentError(f"Edge {shortened(name)}: its score is a number, not {shortened(score)}.")
        if entry["in_graph"]:
            kept.append(Edge(order[name].sender, order[name].receiver, order[name].input, float(score)))
    position = {name: i for i, name in enumerate(order)}
    return sorted(kept, key=lambda edge: (-abs(edge.score), position[eap_edge(edge)]))


__all__ = ["circuit_from_eap_json", "circuit_to_eap_json"]
