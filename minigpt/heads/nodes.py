"""The parts of a model that write into the residual stream and read from it, named as the page names them: the
embeddings `embed`, head `L.H`, `mlp L`, the whole stream entering layer L `resid L`, and the `logits`. Path patching
and circuit discovery use these names in their answers; the library's calls take the tuples too.

    ("embed",)  ("head", 0, 2)  ("mlp", 0)  ("resid", 1)  ("logits",)  <->  "embed" "0.2" "mlp 0" "resid 1" "logits"
"""

import re

from minigpt.heads.errors import InstrumentError, checked_head, checked_layer, shortened

NODE = re.compile(r"(embed|logits)|([0-9]{1,6})\.([0-9]{1,6})|(mlp|resid) ([0-9]{1,6})")


def node_name(node: tuple) -> str:
    """("head", 0, 2) -> "0.2"; ("mlp", 0) -> "mlp 0"; ("embed",) -> "embed"."""
    kind, *where = node
    return f"{where[0]}.{where[1]}" if kind == "head" else " ".join(map(str, node))


def parse_node(name, config) -> tuple:
    """A node's name or tuple, checked against the model: "0.2" -> ("head", 0, 2), "mlp 1", "resid 1", "embed"."""
    if isinstance(name, tuple):
        name = node_name(name)
    match = NODE.fullmatch(str(name).strip().lower())
    if not match:
        raise InstrumentError(
            f"Cannot read the node {shortened(name)}: write a head as 'L.H' ('0.2'), 'mlp L', 'resid L', 'embed' or "
            "'logits'."
        )
    if match[1]:
        return (match[1],)
    if match[2]:
        return ("head", *checked_head(config, int(match[2]), int(match[3])))
    layer = int(match[5])
    if match[4] == "resid":  # the stream entering layer L; L = n_layer is the stream the final norm reads
        if not 0 <= layer <= config.n_layer:
            raise InstrumentError(f"resid L takes L from 0 to {config.n_layer}, got {layer}.")
        return ("resid", layer)
    return ("mlp", checked_layer(config, layer))


def writers_before(config, layer: int) -> list[tuple]:
    """Every part that writes into the stream entering `layer`, in the order they write: the embeddings, then per
    layer its heads and its MLP."""
    found = [("embed",)]
    for earlier in range(layer):
        found += [("head", earlier, head) for head in range(config.n_head)] + [("mlp", earlier)]
    return found


def place(node: tuple) -> tuple:
    """Where a node sits in the forward pass, for ordering: a head of layer L reads the stream entering L and writes
    before L's MLP reads; `resid L` is that stream itself."""
    kind, *where = node
    layer = {"embed": -1, "logits": float("inf")}.get(kind, where[0] if where else 0)
    return (layer, {"resid": -1, "head": 0, "mlp": 1}.get(kind, 0))


def writes_before(writer: tuple, reader: tuple) -> bool:
    """Whether what `writer` writes is in the stream `reader` reads (directly, through the residual stream)."""
    return place(writer) < place(reader)
