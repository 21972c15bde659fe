"""The model as a graph for circuit discovery: the nodes that write into the residual stream (senders) and the nodes
that read from it (receivers), an edge wherever a sender writes before a receiver reads, and the hooks that let every
receiver read a stream of its own.

- Senders, in the order they write: `embed` (token + position embeddings: the first block's input), each head `L.H`
  (its slice of out_proj's input through its columns of out_proj's weight; out_proj's bias belongs to no head: a
  constant), each `mlp L` (the MLP's output).
- Receivers: each head's q, k and v inputs (three receivers a head), each `mlp L`'s input (what its mlp_norm reads)
  and `logits` (what the final norm reads).
- An edge s -> r: s writes into the stream before r reads it (`nodes.writes_before`). The stream r reads is the sum of
  every sender before it plus the constants (the attention biases of earlier layers).

The receivers of one place in the pass (a layer's heads, its MLP, the logits) read after the same senders: the first
`before` senders of the list. `graph_hooks` hands each place's stream to `read`, which returns one stream per receiver
there (3H for a layer's heads: q of heads 0..H-1, then k, then v); a head's q, k or v is then computed from its own
stream with the layer's own attn_norm and its rows of qkv_proj's weight and bias, spliced into qkv_proj's output. The
MLP's and the logits' streams replace what mlp_norm and final_norm read: the model's own modules do the rest.

Shapes: L layers, H heads, S senders, R receivers, B batch, T tokens, C width, D = C // H.
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch

from minigpt.heads.hooks import Hook
from minigpt.heads.nodes import node_name, writers_before, writes_before

INPUTS = ("q", "k", "v")


@dataclass(frozen=True)
class Graph:
    """Every sender and receiver of a model, in the order the pass reaches them, and which edges exist."""

    senders: tuple[tuple, ...]  # ("embed",), ("head", L, H), ("mlp", L): as `nodes` writes them
    receivers: tuple[tuple[tuple, str | None], ...]  # (node, "q" / "k" / "v") for a head, (node, None) otherwise
    exists: torch.Tensor  # (S, R) bool: s writes before r reads

    @property
    def total_edges(self) -> int:
        return int(self.exists.sum())

    def edge_name(self, sender: int, receiver: int) -> tuple[str, str, str | None]:
        """(sender, receiver, input) as the page names them: ("0.2", "1.1", "k"), ("mlp 1", "logits", None)."""
        node, into = self.receivers[receiver]
        return node_name(self.senders[sender]), node_name(node), into


def graph_of(config) -> Graph:
    """The graph of a model of `config`'s shape: 1 + L (H + 1) senders, L (3H + 1) + 1 receivers."""
    senders = tuple(writers_before(config, config.n_layer))
    receivers = []
    for layer in range(config.n_layer):
        receivers += [(("head", layer, head), into) for into in INPUTS for head in range(config.n_head)]
        receivers.append((("mlp", layer), None))
    receivers.append((("logits",), None))
    exists = torch.tensor([[writes_before(sender, node) for node, _ in receivers] for sender in senders], device="cpu")
    return Graph(senders, tuple(receivers), exists)


def head_outputs(out_proj, merged: torch.Tensor, n_head: int) -> torch.Tensor:
    """(H, B, T, C) what each head adds to the stream: its slice of out_proj's input (B, T, C) through its columns of
    the weight, without the bias."""
    C = merged.shape[-1]
    return torch.einsum("bthd,chd->hbtc", merged.unflatten(-1, (n_head, -1)), out_proj.weight.view(C, n_head, -1))


def qkv_of(block, streams: torch.Tensor) -> torch.Tensor:
    """(B, T, 3C) qkv_proj's output with each head's q, k and v computed from a stream of its own: streams (3H, B, T,
    C), receiver i * H + h reading for head h's input INPUTS[i], through the layer's own attn_norm and that head's
    rows of qkv_proj's weight and bias (rows i * C + h * D .. + D: the i * H + h-th block of D rows)."""
    projection, receivers = block.attn.qkv_proj, streams.shape[0]
    rows = projection.weight.view(receivers, -1, projection.weight.shape[-1])  # (3H, D, C)
    found = torch.einsum("rbtc,rdc->btrd", block.attn_norm(streams), rows)
    if projection.bias is not None:
        found = found + projection.bias.view(receivers, -1)
    return found.flatten(-2)


# Where each receiver reads and how many senders wrote before it: read(stream (B, T, C), receivers (a slice of the
# graph's receivers), before (the number of senders that wrote into it)) -> (k, B, T, C), a stream per receiver.
Read = Callable[[torch.Tensor, slice, int], torch.Tensor]


def heads_read(block, read: Read, receivers: slice, before: int) -> list[Hook]:
    """The hooks through which a layer's 3H head inputs read their own streams: the block's input kept, qkv_proj's
    output recomputed from what `read` gives for each."""
    entering = {}

    def keep(module, args):
        entering["x"] = args[0]

    def recompute(module, args, output):
        return qkv_of(block, read(entering.pop("x"), receivers, before))

    return [Hook(block, "pre", keep), Hook(block.attn.qkv_proj, "post", recompute)]


def stream_read(read: Read, receiver: int, before: int) -> Callable:
    """A pre-hook giving a module (mlp_norm, final_norm) the stream that one receiver reads instead of its input."""
    return lambda module, args: (read(args[0], slice(receiver, receiver + 1), before)[0], *args[1:])


def graph_hooks(model, read: Read | None = None, write: Callable[[torch.Tensor], None] | None = None) -> list[Hook]:
    """The hooks (for `hooks.hooks`) that hand each place where receivers read to `read` (see `Read`), and each
    sender's output to `write` ((k, B, T, C): the embeddings, a layer's H heads, an MLP, in the graph's order of
    senders) as the pass makes it. Either may be None."""
    layers, H = model.model.layers, model.config.n_head
    found = []

    def written(outputs: torch.Tensor) -> None:  # None: the hook leaves the pass as it is
        write(outputs)

    if write is not None:
        found.append(Hook(layers[0], "pre", lambda module, args: written(args[0][None])))
    for layer, block in enumerate(layers):
        first, before = layer * (3 * H + 1), 1 + layer * (H + 1)  # the layer's first receiver; senders before it
        if read is not None:
            found += heads_read(block, read, slice(first, first + 3 * H), before)
            found.append(Hook(block.mlp_norm, "pre", stream_read(read, first + 3 * H, before + H)))
        if write is not None:
            found.append(
                Hook(block.attn.out_proj, "pre", lambda module, args: written(head_outputs(module, args[0], H)))
            )
            found.append(Hook(block.mlp, "post", lambda module, args, output: written(output[None])))
    if read is not None:
        receivers, senders = len(layers) * (3 * H + 1), 1 + len(layers) * (H + 1)
        found.append(Hook(model.model.final_norm, "pre", stream_read(read, receivers, senders)))
    return found


__all__ = ["INPUTS", "Graph", "graph_hooks", "graph_of", "head_outputs", "qkv_of"]
