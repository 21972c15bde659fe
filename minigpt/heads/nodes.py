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


UNREADABLE = (
    "cannot read it as a node: write a head as 'L.H' ('1.1'), (layer, head) or ('head', layer, head); 'mlp L', "
    "'resid L', 'embed' or 'logits'."
)
NOT_A_HEAD = "not a head: give (layer, head) such as (1, 1), or its name '1.1'."


def parse_node(value, config, name: str = "node", unreadable: str = UNREADABLE) -> tuple:
    """A node's name or tuple, checked against the model: "0.2", (0, 2) and ("head", 0, 2) -> ("head", 0, 2);
    "mlp 1", "resid 1", "embed", "logits" (or their tuples). A refusal names `name` (the argument) and says
    `unreadable` of what is no node."""
    try:
        return node_of(value, config, unreadable)
    except InstrumentError as error:
        raise InstrumentError(f"{name} {shortened(value)}: {error}") from None


def node_of(value, config, unreadable: str) -> tuple:
    if isinstance(value, (tuple, list)):
        kind, *where = value if value and isinstance(value[0], str) else ("head", *value)  # (layer, head): a head
        if kind == "head":
            if len(where) != 2:
                raise InstrumentError(unreadable)
            return ("head", *checked_head(config, *where))
        value = " ".join(map(str, (kind, *where)))
    match = NODE.fullmatch(str(value).strip().lower())
    if not match:
        raise InstrumentError(unreadable)
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


def head_of(value, config, name: str = "head") -> tuple[int, int]:
    """(layer, head) of a head given as (layer, head), ("head", layer, head) or its name "L.H"; any other node, or
    anything else, refused by `name`."""
    node = parse_node(value, config, name, NOT_A_HEAD)
    if node[0] != "head":
        raise InstrumentError(f"{name} {shortened(value)}: {NOT_A_HEAD}")
    return node[1:]


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
