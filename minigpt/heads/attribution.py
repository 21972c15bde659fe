"""Direct logit attribution: each component of the residual stream's direct share of one logit (or logit difference),
through the final layer norm with its divisor frozen, as TransformerLens's decomposition computes it.

Numbers come from the model's own modules during a real forward pass (hooks on the embeddings, each out_proj's input,
each MLP's output, the final norm's input) and from out_proj's weights read per head (`weights.head_weights`).

Shapes: L layers, H heads, C width, D = C // H, V vocabulary, N components. Ids: a list of ints, or a (T,) or (1, T)
tensor. The model runs as it is: put it in eval mode (dropout off) first.
"""

from dataclasses import dataclass

import torch

from minigpt.heads.errors import checked_position, checked_token
from minigpt.heads.hooks import hooks
from minigpt.heads.runs import as_batch, run
from minigpt.heads.weights import head_weights


@dataclass
class Attribution:
    """Each component's direct share of one logit (or logit difference) through the final norm, its scale frozen."""

    labels: list[str]  # "embed", "pos", then per layer l: "head l.0" .. "head l.H-1", "attn bias l", "mlp l"
    values: torch.Tensor  # (N,) matching labels: values.sum() + bias_term == logit
    heads: torch.Tensor  # (L, H): the heads' entries of values
    logit: float  # the logit (or difference) the model computed
    bias_term: float  # the final norm's bias share (and the head's bias, if any): what no component writes
    token: int
    other_token: int | None
    position: int


def logit_attribution(model, input_ids, position: int = -1, token=None, other_token=None) -> Attribution:
    """Direct logit attribution of logit(`token`) at `position` (default: the model's top-1 token there), or of
    logit(token) - logit(other_token), to the residual stream's components: token and position embeddings, each
    head's output through its share of out_proj (W_O[h], no bias), each attention's out_proj bias, each MLP's output
    (its bias included, as TransformerLens's decomposition does without neurons).

    The final norm is linear once its divisor is fixed: as TransformerLens's apply_ln_to_stack, each component is
    centred, divided by the final residual's norm scale at that position (sqrt(var + eps), read from the final norm's
    real input) and multiplied by its weight; then dotted with the unembedding direction. The final norm's bias is
    the one term left over."""
    ids = as_batch(input_ids, model.config.vocab_size, "input_ids")
    position = checked_position(position, ids.shape[1])
    vocab_size = model.lm_head.weight.shape[0]
    token = None if token is None else checked_token(vocab_size, token)
    other_token = None if other_token is None else checked_token(vocab_size, other_token, "other_token")
    layers, core = model.model.layers, model.model
    seen = {}

    def keep(name, from_input):
        def hook(module, args, output=None):
            seen[name] = (args[0] if from_input else output)[0, position].detach().float().cpu()  # (C,)

        return hook

    registrations = [
        (core.token_embedding, "post", keep("embed", False)),
        (core.position_embedding, "post", keep("pos", False)),
        (core.final_norm, "pre", keep("final", True)),
    ]
    for layer, block in enumerate(layers):
        registrations += [(block.attn.out_proj, "pre", keep(f"merged {layer}", True))]
        registrations += [(block.mlp, "post", keep(f"mlp {layer}", False))]
    with hooks(*registrations):
        logits = (
            run(model, ids, logits_to_keep=torch.tensor([position], device=model.device)).logits[0, -1].float().cpu()
        )  # (V,)

    token = int(logits.argmax()) if token is None else int(token)
    unembedding = model.lm_head.weight.detach().float().cpu()  # (V, C)
    direction = unembedding[token] - (0 if other_token is None else unembedding[other_token])  # (C,)
    logit = logits[token] - (0 if other_token is None else logits[other_token])

    L, H = model.config.n_layer, model.config.n_head
    labels, parts = ["embed", "pos"], [seen["embed"], seen["pos"]]
    for layer, block in enumerate(layers):
        merged = seen[f"merged {layer}"].view(H, -1)  # (H, D): each head's output at this position
        heads = torch.einsum("hd,hdc->hc", merged, head_weights(model, layer)["W_O"])  # (H, C)
        bias = block.attn.out_proj.bias
        labels += [f"head {layer}.{h}" for h in range(H)] + [f"attn bias {layer}", f"mlp {layer}"]
        parts += [*heads, torch.zeros_like(heads[0]) if bias is None else bias.detach().float().cpu()]
        parts += [seen[f"mlp {layer}"]]
    parts = torch.stack(parts)  # (N, C): they sum to the final residual at `position`

    norm = core.final_norm
    scale = (seen["final"].var(unbiased=False) + norm.eps).sqrt()  # the final norm's divisor, frozen
    weight = norm.weight.detach().float().cpu()
    values = ((parts - parts.mean(-1, keepdim=True)) / scale * weight) @ direction  # (N,)
    bias_term = 0.0 if norm.bias is None else float(norm.bias.detach().float().cpu() @ direction)
    if model.lm_head.bias is not None:
        head_bias = model.lm_head.bias.detach().float().cpu()
        bias_term += float(head_bias[token] - (0 if other_token is None else head_bias[other_token]))
    grid = values[2:].view(L, H + 2)[:, :H]  # per layer: H heads, attn bias, mlp
    return Attribution(labels, values, grid, float(logit), bias_term, token, other_token, position)


__all__ = ["Attribution", "logit_attribution"]
