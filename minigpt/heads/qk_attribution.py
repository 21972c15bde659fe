"""Why a head attends where it does: one attention score q·k/√D split into a table, what each part of the residual
stream puts into the query times what each part puts into the key, whose entries sum to the score.

The stream entering layer L is a sum of parts, named as the page names nodes: `embed token` and `embed position` (the
two embeddings, whose sum is the node `embed`), each earlier head `L.H` (its slice of out_proj's input through its
columns of out_proj's weight), each earlier `attn bias L` (out_proj's bias, which belongs to no head) and `mlp L` (its
output, its bias included). The layer's attn_norm is linear in the stream once its divisor sqrt(var(x) + eps) at each
position is fixed (read from the stream the norm really reads, as TransformerLens's apply_ln_to_stack fixes it): each
part is centred, divided by its position's divisor and multiplied by the norm's weight. Then the head's rows of
qkv_proj make q and k: linear, so q = sum of the parts' shares + `bias` (the norm's shift through those rows, plus the
rows' own bias: what no part writes), and the same for k. The score q·k/√D is then the sum, over every query part i
and key part j, of (share i of q)·(share j of k)/√D: the table.

Every number comes from the model's own modules and weights: hooks (`hooks`) on the embeddings, on each earlier
out_proj's input and each MLP's output, on the layer's input (the divisors) and on its qkv_proj's output (the model's
own q and k, whose score the table is checked against), the weights from output_attentions. The pass stops at the
head's layer: nothing after it is needed.

Shapes: P parts (the same on both sides), K keys (0 .. query), D = C // H.
"""

from dataclasses import dataclass

import torch

from minigpt.heads.errors import InstrumentError, checked_head, checked_position
from minigpt.heads.hooks import Hook, hooks
from minigpt.heads.runs import as_batch, run


@dataclass
class QKAttribution:
    """One head's score from one query to one key, split into query part x key part; and the same split for every key
    the query sees, so that the weights follow."""

    layer: int
    head: int
    query: int
    key: int
    parts: list[str]  # the P parts, the same on both sides: "embed token", "embed position", "0.2", "attn bias 0",
    # "mlp 0", ... (each earlier layer's heads, attention bias and MLP), and "bias" last
    table: torch.Tensor  # (P, P): [i, j] = query part i's share of q · key part j's share of k / sqrt(D)
    score: float  # the model's own q·k/sqrt(D) at (query, key): table.sum() up to float32 rounding
    query_totals: torch.Tensor  # (P,): table.sum(1), each query part against the whole key
    key_totals: torch.Tensor  # (P,): table.sum(0), each key part against the whole query
    scores: torch.Tensor  # (K,): the model's own scores of the query over keys 0 .. query
    weights: torch.Tensor  # (K,): the model's weights (softmax of scores)
    every_query_totals: torch.Tensor  # (K, P): query_totals for each key
    every_key_totals: torch.Tensor  # (K, P): key_totals for each key
    query_shares: torch.Tensor  # (P, D): what each part puts into q at the query (`bias`: the constant)
    key_shares: torch.Tensor  # (K, P, D): what each part puts into k at each key
    divisors: torch.Tensor  # (K,): attn_norm's fixed divisor sqrt(var + eps) at each position 0 .. query

    def table_of(self, key: int) -> torch.Tensor:
        """(P, P) the table of another key (0 .. query)."""
        key = checked_position(key, len(self.scores), "key")
        return self.query_shares @ self.key_shares[key].T * self.query_shares.shape[-1] ** -0.5  # the model's 1/sqrt(D)

    def runner_up(self) -> int | None:
        """The key other than `key` the query weighs most (None: the query sees one key)."""
        if len(self.weights) < 2:
            return None
        others = self.weights.clone()
        others[self.key] = -1
        return int(others.argmax())


def part_names(config, layer: int, biased: bool) -> list[str]:
    """The stream's parts entering `layer`, in the order they write, then the constant."""
    names = ["embed token", "embed position"]
    for earlier in range(layer):
        names += [f"{earlier}.{head}" for head in range(config.n_head)]
        names += [f"attn bias {earlier}"] * biased + [f"mlp {earlier}"]
    return names + ["bias"] * biased


def folded_rows(block, head: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The head's q and k rows of qkv_proj folded with attn_norm: (C, 2D) G such that a part x's share of [q, k] is
    x @ G / divisor (G's rows centred: (x - mean x) · g = x · (g - mean g)), and the (2D,) constant (the norm's shift
    through the rows, plus their bias)."""
    C, D = block.attn.qkv_proj.in_features, block.attn.head_dim
    rows = torch.cat([block.attn.qkv_proj.weight[i * C + head * D :][:D] for i in (0, 1)]).float()  # (2D, C): q, k
    folded = block.attn_norm.weight.float()[:, None] * rows.T  # (C, 2D)
    constant = torch.zeros(2 * D, device=rows.device)
    if block.attn_norm.bias is not None:
        constant = constant + block.attn_norm.bias.float() @ rows.T
    if block.attn.qkv_proj.bias is not None:
        constant = constant + torch.cat([block.attn.qkv_proj.bias[i * C + head * D :][:D] for i in (0, 1)]).float()
    return folded - folded.mean(0), constant


class Reached(Exception):
    """Raised by the hook on the head's layer's attention: everything the split needs is read, the pass stops there."""


def written_parts(model, ids: torch.Tensor, layer: int, head: int, query: int) -> dict:
    """One pass over ids with hooks, up to the head's layer's attention: what each part writes at positions 0 ..
    query ("embed token", "embed position", "merged L" (K, C) each, "mlp L"), the stream entering `layer` (its
    divisors), the layer's qkv_proj output and the head's weights from the query (K,). Each earlier layer's weights
    are let go as the layer returns them (GPT-2 at 1,024 tokens: 50 MB a layer), and the layers after it never run."""
    core, seen, keys = model.model, {}, query + 1

    def keep(name, from_output):
        def hook(module, args, output=None):
            seen[name] = (output if from_output else args[0])[0, :keys].detach()

        return hook

    def weights_of(attn, args, output):
        if attn.layer_idx == layer:
            seen["weights"] = output[1][0, head, query, :keys].detach().clone()
            raise Reached
        return output[0], output[1].new_empty(0)

    registrations = [
        (core.token_embedding, "post", keep("embed token", True)),
        (core.position_embedding, "post", keep("embed position", True)),
        (core.layers[layer], "pre", keep("entering", False)),
        (core.layers[layer].attn.qkv_proj, "post", keep("qkv", True)),
    ]
    for earlier in range(layer):
        registrations.append((core.layers[earlier].attn.out_proj, "pre", keep(f"merged {earlier}", False)))
        registrations.append((core.layers[earlier].mlp, "post", keep(f"mlp {earlier}", True)))
    registrations += [Hook(block.attn, "post", weights_of, prepend=True) for block in core.layers[: layer + 1]]
    try:
        with hooks(*registrations):
            run(model, ids, output_attentions=True, logits_to_keep=1)
    except Reached:
        pass
    return seen


def qk_attribution(model, input_ids, layer: int, head: int, query: int = -1, key: int | None = None) -> QKAttribution:
    """Head (layer, head)'s score from `query` to `key` (positions from 0; -1: the last token; key defaults to the key
    the query weighs most) split into the table query part x key part (see the module), with the same split for every
    key 0 .. query. attn_norm's divisor at each position is fixed at its value in this pass: the one approximation,
    and no approximation of this pass's score (the table sums to it up to float32 rounding)."""
    layer, head = checked_head(model.config, layer, head)
    ids = as_batch(input_ids, model.config.vocab_size, "input_ids")
    query = checked_position(query, ids.shape[1], "query")
    if key is not None:
        key = checked_position(key, ids.shape[1], "key")
        if key > query:
            raise InstrumentError(
                f"key {key} comes after the query {query}: a query sees the keys 0 to {query} (the causal mask)."
            )
    block, H, keys = model.model.layers[layer], model.config.n_head, query + 1
    with torch.no_grad():
        seen = written_parts(model, ids, layer, head, query)
        folded, constant = folded_rows(block, head)  # (C, 2D), (2D,)
        D = constant.shape[0] // 2
        seen = {name: value.float() for name, value in seen.items()}  # float32 whatever the model's dtype
        shares = [seen["embed token"] @ folded, seen["embed position"] @ folded]  # each (K, 2D)
        for earlier in range(layer):
            out_proj = model.model.layers[earlier].attn.out_proj
            weight = out_proj.weight.float().view(-1, H, out_proj.in_features // H)  # (C, H, D)
            through = torch.einsum("chd,ce->hde", weight, folded)
            shares += list(torch.einsum("khd,hde->hke", seen[f"merged {earlier}"].unflatten(-1, (H, -1)), through))
            if out_proj.bias is not None:
                shares.append((out_proj.bias.float() @ folded).expand(keys, -1))
            shares.append(seen[f"mlp {earlier}"] @ folded)
        entering = seen["entering"]
        divisors = (entering.var(-1, unbiased=False) + block.attn_norm.eps).sqrt()  # (K,)
        shares = torch.stack(shares, 1) / divisors[:, None, None]  # (K, P, 2D)
        biased = block.attn_norm.bias is not None or block.attn.qkv_proj.bias is not None
        if biased:
            shares = torch.cat([shares, constant.expand(keys, 1, -1)], 1)
        query_shares, key_shares = shares[query, :, :D], shares[:, :, D:]  # (P, D), (K, P, D)
        C = model.config.n_embd
        q = seen["qkv"][query, head * D : (head + 1) * D]
        k = seen["qkv"][:, C + head * D : C + (head + 1) * D]  # (K, D)
        scale = block.attn.scaling
        scores = k @ q * scale  # (K,): the model's own
        head_weights = seen["weights"]
        key = int(head_weights.argmax()) if key is None else key
        table = query_shares @ key_shares[key].T * scale  # (P, P)
        every_query_totals = query_shares @ key_shares.sum(1).T * scale  # (P, K)
        every_key_totals = key_shares @ query_shares.sum(0) * scale  # (K, P)
    cpu = lambda x: x.detach().cpu()  # noqa: E731
    return QKAttribution(
        layer=layer,
        head=head,
        query=query,
        key=key,
        parts=part_names(model.config, layer, biased),
        table=cpu(table),
        score=float(scores[key]),
        query_totals=cpu(table.sum(1)),
        key_totals=cpu(table.sum(0)),
        scores=cpu(scores),
        weights=cpu(head_weights),
        every_query_totals=cpu(every_query_totals.T),
        every_key_totals=cpu(every_key_totals),
        query_shares=cpu(query_shares),
        key_shares=cpu(key_shares),
        divisors=cpu(divisors),
    )


__all__ = ["QKAttribution", "qk_attribution"]
