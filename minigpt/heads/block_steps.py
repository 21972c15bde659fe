"""The rest of the block, step by step, around the attention steps (attention_steps.py): how the token enters the model
(token and position embeddings), what wraps each attention sublayer (layer norm, residual adds, the MLP with its GELU
neurons), and what leaves the last block (final norm, LM head, softmax). One query token at a time, with the model's
real numbers.

Every tensor comes from the recorded forward pass (forward_pass.py: the stream entering and leaving each block, each
attention sublayer's input and output) or from the model's own modules called on the query's row (mlp_norm, the MLP's
fc_in, act and out_proj, which the pass does not keep). The only arithmetic written here is the textbook's: a layer
norm's mean, variance and normalised vector, which the module computes inside and does not return, and the residual add
between the two sublayers.

Shapes: T tokens, C width, V vocabulary; i the query position.
"""

import torch
from torch import nn

from minigpt.heads.predictions import next_token_probabilities

TOP_NEURONS = 8  # the MLP neurons listed by activation, largest first
TOP_TOKENS = 10  # the next tokens listed by probability


def embedding_parts(model, recorded, i: int) -> dict:
    """Token i's rows of the token and position embedding tables, and their sum: the stream entering block 0 (the
    recorded one; the embedding dropout is the identity in evaluation)."""
    embeddings = model.model
    token_id = recorded.input_ids[i]
    return {
        "token_i": embeddings.token_embedding.weight[token_id].detach(),  # (C,)
        "position_i": embeddings.position_embedding.weight[i].detach(),  # (C,)
        "sum_i": recorded.residual[0, i],  # (C,)
    }


def layer_norm_parts(norm: nn.LayerNorm, x: torch.Tensor, out: torch.Tensor) -> dict:
    """A layer norm of the (C,) vector x written out: its mean and variance (biased, as LayerNorm takes it), the
    normalised x̂ = (x - mean) / sqrt(variance + eps), the module's own scale and shift, and `out`, the module's own
    output (γ x̂ + β, up to float rounding)."""
    mean, variance = x.mean(), x.var(unbiased=False)
    return {
        "mean": float(mean),
        "variance": float(variance),
        "eps": norm.eps,
        "hat": (x - mean) / torch.sqrt(variance + norm.eps),
        "scale": norm.weight.detach(),
        "shift": norm.bias.detach() if norm.bias is not None else None,
        "out": out,
    }


def block_parts(model, recorded, layer: int, i: int) -> dict:
    """Block `layer` at token i, in its order: attn_norm, the attention sublayer's residual add, mlp_norm, the MLP
    (fc_in, GELU, out_proj) and its residual add."""
    block = model.model.layers[layer]
    stream = recorded.residual[layer, i]  # (C,) entering the block
    with torch.no_grad():
        middle = stream + recorded.attn_outputs[layer, i]  # (C,) after the attention sublayer's residual add
        mlp_input = block.mlp_norm(middle)  # (C,)
        pre_activation = block.mlp.fc_in(mlp_input)  # (4C,)
        activation = block.mlp.act(pre_activation)  # (4C,): the neurons
        mlp_output = block.mlp.out_proj(activation)  # (C,): dropout is the identity in evaluation
    neurons = activation.abs().topk(min(TOP_NEURONS, activation.numel())).indices.tolist()
    return {
        "attn_norm": layer_norm_parts(block.attn_norm, stream, recorded.attn_inputs[layer, i]),
        "middle": middle,
        "mlp_norm": layer_norm_parts(block.mlp_norm, middle, mlp_input),
        "pre_activation": pre_activation,
        "activation": activation,
        "mlp_output": mlp_output,
        "after": recorded.residual[layer + 1, i],  # (C,) leaving the block: the next block's input
        "top_neurons": [[n, float(activation[n])] for n in neurons],
        "attention_update": float(recorded.attn_outputs[layer, i].norm()),  # how far each sublayer moves the stream
        "mlp_update": float(mlp_output.norm()),
    }


def probability_parts(model, recorded, i: int) -> dict:
    """What leaves the last block at token i: the final layer norm's output, the top next tokens with their logits
    and probabilities (the same code as the next-token view), and the probability of the token that follows."""
    with torch.no_grad():
        final = model.model.final_norm(recorded.residual[-1, i])  # (C,)
    found = next_token_probabilities(model, recorded, i, k=TOP_TOKENS)
    return {
        "final_i": final,
        "top_ids": found["top_ids"],
        "top_logits": found["logits"][found["top_ids"]],
        "top_probabilities": torch.tensor(found["top_probabilities"], device="cpu"),
        "next_id": found.get("next_id"),
        "next_probability": found.get("next_probability"),
        "vocabulary": model.config.vocab_size,
    }


def parameter_counts(model) -> list[tuple[str, int]]:
    """Where the model's weights are: (part, count) for the embeddings, each kind of sublayer summed over the blocks,
    the final norm and the LM head (0 when it shares the token embedding's weights)."""
    parts = {"token embedding": 0, "position embedding": 0, "layer norms": 0, "attention": 0, "MLP": 0, "LM head": 0}
    seen = set()
    for name, weight in model.named_parameters(remove_duplicate=False):
        if id(weight) in seen:
            continue
        seen.add(id(weight))
        if "token_embedding" in name:
            part = "token embedding"
        elif "position_embedding" in name:
            part = "position embedding"
        elif "norm" in name:
            part = "layer norms"
        elif ".attn." in name:
            part = "attention"
        elif ".mlp." in name:
            part = "MLP"
        else:
            part = "LM head"
        parts[part] += weight.numel()
    return list(parts.items())
