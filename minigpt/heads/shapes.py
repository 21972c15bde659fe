"""The shape trace: the steps of MiniGPTAttention.forward, each with the shape one recorded pass gave its tensor, for a
batch of one (B, T, C -> B, H, T, D -> ...)."""

from dataclasses import dataclass


@dataclass
class TraceStep:
    step: str  # what happens, in words
    code: str  # where it happens in modeling_minigpt.py's MiniGPTAttention.forward
    symbols: str  # the shape in letters, e.g. (B, T, C)
    shape: tuple  # the same shape in numbers, as the tensor printed it
    meaning: str


def trace_steps(attn, recorded, layer: int) -> list[TraceStep]:
    """The steps of MiniGPTAttention.forward with the shapes one recorded pass (forward_pass.ForwardPass) produced,
    for a batch of one. The per-head tensors are those of the module's own `split_heads`; the scores have the
    weights' shape (softmax keeps it)."""
    x = recorded.attn_inputs[layer][None]  # (1, T, C)
    qkv_shape = (*x.shape[:-1], 3 * x.shape[-1])  # what qkv_proj makes of it
    heads = attn.split_heads(x)  # (B, H, T, D), as forward splits each of q, k, v
    weights = recorded.attentions[layer][None]  # (B, H, T, S)
    per_head_out = (*weights.shape[:-1], heads.shape[-1])  # weights (B, H, T, S) @ V (B, H, S, D)
    batch, n_head, length, head_dim = per_head_out
    return [
        TraceStep(
            "input x (after attn_norm)", "hidden_states", "(B, T, C)", tuple(x.shape), "one C-wide vector per token"
        ),
        TraceStep(
            "fused Q/K/V projection",
            "qkv_proj(x)",
            "(B, T, 3C)",
            qkv_shape,
            "query, key and value of every token, side by side",
        ),
        TraceStep(
            "Q, K, V before the split",
            ".split(C, dim=-1)",
            "(B, T, C) each",
            tuple(x.shape),
            "three tensors, all heads still together",
        ),
        TraceStep(
            "after the split into heads",
            "split_heads(q / k / v)",
            "(B, H, T, D) each",
            tuple(heads.shape),
            "H heads, each looking at its own D = C / H numbers",
        ),
        TraceStep(
            "scores",
            "q @ k.transpose(-2, -1) * D**-0.5",
            "(B, H, T, S)",
            tuple(weights.shape),
            "how well each query matches each key; future keys masked to -inf",
        ),
        TraceStep(
            "weights",
            "softmax(scores, dim=-1)",
            "(B, H, T, S)",
            tuple(weights.shape),
            "each row sums to 1: the heatmaps above",
        ),
        TraceStep(
            "weighted sum of values",
            "weights @ v",
            "(B, H, T, D)",
            per_head_out,
            "each head's output: a mix of the values it attends to",
        ),
        TraceStep(
            "heads side by side again",
            "output.transpose(1, 2)",
            "(B, T, H, D)",
            (batch, length, n_head, head_dim),
            "per token, the H head outputs",
        ),
        TraceStep(
            "after merging the heads",
            "output.flatten(2)",
            "(B, T, C)",
            tuple(recorded.merged_heads[layer][None].shape),
            "the H outputs of D numbers, concatenated back to C",
        ),
        TraceStep(
            "after the output projection",
            "out_proj(output)",
            "(B, T, C)",
            tuple(recorded.attn_outputs[layer][None].shape),
            "mixed across heads, ready to add to the residual stream",
        ),
    ]


def trace_table(trace: list[TraceStep], sizes: dict[str, int]) -> tuple[list[str], list[list[str]]]:
    """Headers and rows for a table of the trace; `sizes` gives the letters' numbers (B, T, C, H, D) for the legend."""
    rows = [[s.step, s.code, s.symbols, str(s.shape), s.meaning] for s in trace]
    legend = ", ".join(f"{k}={v}" for k, v in sizes.items())
    return ["step", "code", "shape", f"shape here ({legend})", "meaning"], rows
