"""The block, step by step: how one token of the text goes through the model, and in detail how one head of one layer
turns the token's input into its output, with the model's real numbers, in the order of the textbook derivation.

    0. the tokens' embeddings: token and position rows, their sum (block_steps.py)
    1. the inputs: x_i (after the layer norm) and every x_j it may look at (j <= i)
    2. for contrast, attention without trainable weights: x_i . x_j, softmax, the weighted sum of the x_j
    3. q_i, k_j, v_j of the head: D-wide slices (rows of the fused qkv_proj weight) of the layer's projection
    4. the scores q_i . k_j, scaled by 1/sqrt(D)
    5. the causal mask (-inf after i) and the softmax: the exponentials, their sum, the weights
    6. dropout: identity in evaluation; in training mode the model's own, under a seed
    7. z_i = sum_j w_ij v_j, all heads' z_i side by side, the output projection, the residual add
    +  multi-head two ways: H single-head modules cut from the fused weight, against the fused projection split in heads
    +  the block around attention: both layer norms written out, the residual adds, the MLP (block_steps.py)
    +  what leaves the last block: the final norm, the top next tokens' logits and probabilities (block_steps.py)

Every number comes from the model's own modules and weights. The recorded forward pass (forward_pass.py) gives the
sublayer's input, its attention weights, its merged heads and its output; the layer's `qkv_proj` and `split_heads` give
q, k and v (which the pass does not keep), and the model's own `eager_attention_forward` applies dropout in training
mode. The only arithmetic written here is the textbook's: step 2 (no trainable weights, by definition) and the scores of
step 4, which the eager function computes inside and does not return.

Nothing here knows of Gradio, nor says anything in words: `attention_steps` returns tensors and `steps_json` the same
as JSON lists, keyed by step and number; the demo puts each step's title and explanation and each number's name into
that JSON (its `step` endpoint's answer), and its views draw it.

Shapes: L layers, T tokens, C width, H heads, D = C // H; i the query position, j a key position.
"""

import copy
import sys
from contextlib import AbstractContextManager, nullcontext

import torch
from torch import nn

from minigpt.heads.block_steps import block_parts, embedding_parts, probability_parts
from minigpt.heads.errors import InstrumentError
from minigpt.heads.shapes import trace_steps


class StepChoiceError(InstrumentError):
    """A layer, head or query position the model or the text does not have; the message says what to choose."""


# The steps, in the order of the textbook derivation, each with the rows of the shape trace (shapes.trace_steps, by
# name) of the tensors it works on inside the model. Numbers and keys only: the words that explain them are the page's.
TRACE_ROWS = {
    "embeddings": [],
    "inputs": ["input x (after attn_norm)"],
    "no_weights": [],
    "qkv": ["fused Q/K/V projection", "Q, K, V before the split", "after the split into heads"],
    "scores": ["scores"],
    "softmax": ["weights"],
    "dropout": ["weights"],
    "output": [
        "weighted sum of values",
        "heads side by side again",
        "after merging the heads",
        "after the output projection",
    ],
    "multi_head": [],
    "block": [],
    "probabilities": [],
}

NORMS = ("attn_norm", "mlp_norm")  # the block's two layer norms, by their module names


def model_eager_attention(attn):
    """The eager attention function of the model's own code (the one `output_attentions=True` runs): from the module
    that defines its attention class, the repo's modeling_minigpt or the copy a saved folder ships."""
    return sys.modules[type(attn).__module__].eager_attention_forward


def head_rows(n_embd: int, head_dim: int, head: int) -> dict[str, tuple[int, int]]:
    """[start, stop) rows of qkv_proj.weight (3C, C) that make the head's q, k and v: the fused output is q | k | v,
    each C wide and split into H heads of D."""
    return {
        name: (part * n_embd + head * head_dim, part * n_embd + (head + 1) * head_dim)
        for part, name in enumerate("qkv")
    }


def rows_of(linear: nn.Linear, start: int, stop: int) -> nn.Linear:
    """A Linear of its own holding rows [start, stop) of `linear` (skip_init: no random init to overwrite, and the
    global random generator that seeded requests rely on is left alone)."""
    part = torch.nn.utils.skip_init(
        nn.Linear,
        linear.in_features,
        stop - start,
        bias=linear.bias is not None,
        device=linear.weight.device,
        dtype=linear.weight.dtype,
    )
    with torch.no_grad():
        part.weight.copy_(linear.weight[start:stop])
        if linear.bias is not None:
            part.bias.copy_(linear.bias[start:stop])
    return part


class SingleHeadAttention(nn.Module):
    """One head as its own module, as textbooks first build multi-head attention: W_q, W_k, W_v of width D (here cut
    from the fused qkv_proj of `attn`), and the model's attention function."""

    def __init__(self, attn, head: int):
        super().__init__()
        rows = head_rows(attn.config.n_embd, attn.head_dim, head)
        self.q_proj, self.k_proj, self.v_proj = (rows_of(attn.qkv_proj, *rows[name]) for name in "qkv")
        self.scaling, self.attention = attn.scaling, model_eager_attention(attn)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (T, C) -> (T, D)
        q, k, v = (proj(x)[None, None] for proj in (self.q_proj, self.k_proj, self.v_proj))  # (1, 1, T, D) each
        output, _ = self.attention(self, q, k, v, None, scaling=self.scaling)  # (1, T, 1, D)
        return output[0, :, 0]


def heads_separately(attn, x: torch.Tensor) -> torch.Tensor:
    """(T, C) -> (T, C): the layer's H heads as H single-head modules, outputs stacked side by side."""
    return torch.cat([SingleHeadAttention(attn, h)(x) for h in range(attn.n_head)], dim=-1)


def queries_keys_values(attn, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(T, C) -> 3 x (H, T, D), by the layer's own fused projection and split, as its forward does."""
    q, k, v = attn.qkv_proj(x[None]).split(attn.config.n_embd, dim=-1)  # 3 x (1, T, C)
    return attn.split_heads(q)[0], attn.split_heads(k)[0], attn.split_heads(v)[0]


def attention_in_training(attn, q, k, v, seed: int, rng_lock: AbstractContextManager):
    """The model's eager attention on (H, T, D) q, k, v as it runs in training: dropout p = config.attention_dropout,
    drawn from torch's global generator seeded with `seed` (F.dropout takes no generator of its own; the global state
    is restored after, and `rng_lock` keeps other users of that generator out meanwhile). The layer itself stays in
    evaluation mode: a shallow copy marked as training runs it, so requests sharing the model never see dropout.
    Returns the output (T, H, D) and the weights after dropout (H, T, T)."""
    training_view = copy.copy(attn)
    training_view.training = True
    devices = [] if q.device.type == "cpu" else [q.device]
    with rng_lock, torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        attention = model_eager_attention(attn)
        p = attn.config.attention_dropout  # as the layer's forward passes it when training
        output, weights = attention(training_view, q[None], k[None], v[None], None, dropout=p, scaling=attn.scaling)
    return output[0], weights[0]


def key_shares(weights: torch.Tensor, values: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """How much of z = sum_j w_j v_j each key j gives, measured along z: w_j (v_j . z) / |z|^2, (i+1,). The shares add
    up to 1 (their sum is z . z / |z|^2); a negative one pulls z back. All zero when z is zero."""
    length = z @ z
    if length == 0:
        return torch.zeros_like(weights)
    return weights * (values @ z) / length


def check_choice(what: str, value: int, count: int, context: str) -> None:
    if not 0 <= value < count:
        raise StepChoiceError(f"{what} must be 0 to {count - 1} ({context}), got {value}.")


def check_choices(config, layer: int, head: int, query: int, length: int, seed: int) -> None:
    check_choice("layer", layer, config.n_layer, f"the model has {config.n_layer} layers")
    check_choice("head", head, config.n_head, f"each layer has {config.n_head} heads")
    check_choice("query position", query, length, f"the text is {length} tokens, position 0 being the start token")
    if not 0 <= seed < 2**63:
        raise StepChoiceError(f"seed must be 0 or more and below 2**63, got {seed}.")


def attention_steps(
    model,
    recorded,
    layer: int,
    head: int,
    query: int | None = None,
    training: bool = False,
    seed: int = 0,
    rng_lock: AbstractContextManager | None = None,
) -> dict:
    """Every step of head `head` of layer `layer` for the token at position `query` (default: the last), as tensors
    keyed by step (TRACE_ROWS' keys) and number, with `meta` (sizes, the qkv_proj rows, the scale, dropout), `trace`
    (shapes in the model) and `extras` (what steps say besides their vectors: plain numbers).

    `model` is a MiniGPTForCausalLM, `recorded` its forward_pass.ForwardPass of the text. `training` applies the
    model's attention dropout seeded by `seed` (see `attention_in_training`); the weights before dropout, and
    everything in evaluation mode, are those of the recorded pass.
    """
    T = len(recorded.input_ids)
    i = T - 1 if query is None else query
    check_choices(model.config, layer, head, i, T, seed)
    attn = model.model.layers[layer].attn
    with torch.no_grad():
        steps = head_steps(attn, recorded, layer, head, i, training, seed, rng_lock or nullcontext())
        separate = heads_separately(attn, recorded.attn_inputs[layer])  # (T, C)
    fused = recorded.merged_heads[layer]  # (T, C)
    difference = float((separate - fused).abs().max())
    trace = {s.step: s for s in trace_steps(attn, recorded, layer)}
    return {
        "meta": step_meta(model.config, attn, layer, head, i, T, training, seed, difference),
        "trace": {name: [trace[row] for row in rows] for name, rows in TRACE_ROWS.items()},
        "embeddings": embedding_parts(model, recorded, i),
        **steps,
        "multi_head": {"separate_i": separate[i], "fused_i": fused[i]},
        **around_attention(model, recorded, layer, i),
    }


def head_steps(attn, recorded, layer: int, h: int, i: int, training: bool, seed: int, rng_lock) -> dict:
    """Steps 1 to 7 of head h at query i, in the layer `attn` of the recorded pass: its input, attention without
    weights, q, k and v, the scores, the mask and softmax, dropout, and the output up to the residual add."""
    T, D, seen = len(recorded.input_ids), attn.head_dim, slice(0, i + 1)
    stream, x = recorded.residual[layer], recorded.attn_inputs[layer]  # (T, C) each: before and after attn_norm
    weights = recorded.attentions[layer, h, i]  # (T,): the model's softmax row, zero after i
    plain_scores = x[seen] @ x[i]  # (i+1,)
    plain_weights = plain_scores.softmax(-1)  # (i+1,)
    q, k, v = queries_keys_values(attn, x)  # (H, T, D) each
    scores = k[h, seen] @ q[h, i]  # (i+1,)
    masked = torch.full((T,), float("-inf"), dtype=scores.dtype, device=scores.device)  # (T,)
    masked[seen] = scores * attn.scaling
    if training:  # dropout changes the weights, and so everything after them
        output, dropped = attention_in_training(attn, q, k, v, seed, rng_lock)
        merged = output.flatten(1)  # (T, H, D) -> (T, C)
        out, dropped = attn.out_proj(merged), dropped[h, i]  # (T, C), (T,)
    else:
        merged, out, dropped = recorded.merged_heads[layer], recorded.attn_outputs[layer], weights
    z = merged[i, h * D : (h + 1) * D]  # (D,): this head's output at the query
    keep = (dropped[seen] != 0).int() if training else None  # dropout zeroes a weight, or scales it by 1/(1-p)
    exps = (masked[seen] - masked[seen].max()).exp()  # (i+1,): the softmax's numerators
    return {
        "inputs": {"x_i": x[i], "x_j": x[seen], "residual_i": stream[i]},
        "no_weights": {"scores": plain_scores, "weights": plain_weights, "output": plain_weights @ x[seen]},
        "qkv": {"q_i": q[h, i], "k_j": k[h, seen], "v_j": v[h, seen]},
        "scores": {"scores": scores, "scaled": masked[seen]},
        "softmax": {"masked": masked, "exps": exps, "weights": weights},
        "dropout": {"keep": keep, "weights": dropped},
        "output": {
            "z_i": z,
            "shares": key_shares(dropped[seen], v[h, seen], z),
            "heads_z_i": merged[i],
            "out_i": out[i],
            "next_i": stream[i] + out[i],
        },
    }


def step_meta(config, attn, layer, head, i, T, training, seed, max_abs_difference) -> dict:
    """The choices and sizes the steps are of, where the head's q, k and v come from, the scale, and dropout."""
    p = config.attention_dropout if training else 0.0
    C, D = config.n_embd, attn.head_dim
    return dict(
        L=config.n_layer,
        T=T,
        C=C,
        H=config.n_head,
        D=D,
        layer=layer,
        head=head,
        query=i,
        training=training,
        seed=seed,
        dropout_p=p,
        model_dropout_p=config.attention_dropout,  # what training mode would apply
        keep_scale=1 / (1 - p),
        rows=head_rows(C, D, head),
        scale=attn.scaling,
        bias=attn.qkv_proj.bias is not None,
        max_abs_difference=max_abs_difference,
    )


def around_attention(model, recorded, layer: int, i: int) -> dict:
    """The steps around the attention sublayer at token i (block_steps.py): the block's layer norms, residual adds and
    MLP, what leaves the last block, and the plain numbers those steps and the embeddings say (`extras`)."""
    block, leaving = block_parts(model, recorded, layer, i), probability_parts(model, recorded, i)

    def norm(name: str) -> dict:
        return {f"{name}_{part}": block[name][part] for part in ("hat", "scale", "shift", "out")}

    return {
        "block": {
            **norm("attn_norm"),
            "middle_i": block["middle"],
            **norm("mlp_norm"),
            "pre_activation_i": block["pre_activation"],
            "activation_i": block["activation"],
            "mlp_out_i": block["mlp_output"],
            "after_i": block["after"],
        },
        "probabilities": {key: leaving[key] for key in ("final_i", "top_logits", "top_probabilities")},
        "extras": {
            "embeddings": {"token_id": recorded.input_ids[i], "ids": list(recorded.input_ids)},
            "block": {
                **{norm: {k: block[norm][k] for k in ("mean", "variance", "eps")} for norm in NORMS},
                **{k: block[k] for k in ("top_neurons", "attention_update", "mlp_update")},
            },
            "probabilities": {k: leaving[k] for k in ("top_ids", "next_id", "next_probability", "vocabulary")},
        },
    }


NEG_INF = "-inf"  # JSON has no infinity: a masked score is written as this string (float("-inf") reads it back)


def as_lists(tensor: torch.Tensor | None):
    if tensor is None:
        return None
    values = tensor.tolist()
    if tensor.dim() == 1 and tensor.is_floating_point() and torch.isinf(tensor).any():
        return [NEG_INF if v == float("-inf") else v for v in values]
    return values


def steps_json(steps: dict, tokens: list[str], model: str = "", notes: list[str] = (), label=None) -> dict:
    """`attention_steps`' result as plain JSON: numbers as (nested) lists of floats, exact (float32 values), masked
    scores as "-inf"; each step with its shapes in the model (`shapes`) and each number's (`number_shapes`, key ->
    shape). Numbers and keys, no words: a page adds each step's title and explanation and each number's name.
    `label` turns token ids into the readable labels of the text's tokens (the next tokens' names); none: the ids."""
    meta = steps["meta"]
    chosen = {k: meta[k] for k in ("layer", "head", "query", "training", "seed")}
    out = {
        "model": model,
        "tokens": list(tokens),
        **chosen,
        "sizes": {k: meta[k] for k in "LTCHD"},
        "notes": list(notes),
        "steps": {},
    }
    for name in TRACE_ROWS:
        numbers = steps[name]
        shapes = [dict(what=t.step, code=t.code, symbols=t.symbols, shape=list(t.shape)) for t in steps["trace"][name]]
        number_shapes = {key: list(value.shape) for key, value in numbers.items() if value is not None}
        out["steps"][name] = {"shapes": shapes, "number_shapes": number_shapes}
        out["steps"][name].update({key: as_lists(value) for key, value in numbers.items()})
    s = out["steps"]
    s["qkv"].update(
        weight="qkv_proj.weight",
        weight_shape=[3 * meta["C"], meta["C"]],
        bias=meta["bias"],
        rows={k: list(r) for k, r in meta["rows"].items()},
    )
    s["scores"].update(D=meta["D"], scale=meta["scale"])
    s["softmax"].update(sum=float(steps["softmax"]["weights"].sum()), exp_sum=float(steps["softmax"]["exps"].sum()))
    s["dropout"].update(applied=meta["training"], p=meta["dropout_p"], seed=meta["seed"], scale=meta["keep_scale"])
    s["dropout"]["model_p"] = meta["model_dropout_p"]
    s["dropout"]["sum"] = float(steps["dropout"]["weights"].sum())  # 1 only on average once dropout is applied
    s["multi_head"]["max_abs_difference"] = meta["max_abs_difference"]
    for name, extras in steps["extras"].items():
        s[name].update(extras)
    label = label or (lambda ids: [str(i) for i in ids])
    leaving = s["probabilities"]
    leaving["top_tokens"] = label(leaving["top_ids"])
    leaving["next_token"] = label([leaving["next_id"]])[0] if leaving["next_id"] is not None else None
    return out
