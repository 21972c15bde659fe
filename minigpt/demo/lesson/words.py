"""The step view's words: each step's title and one sentence of explanation, and each number's shape in letters and
what it is. `minigpt.heads.steps` computes the numbers (`steps_json`: numbers and their keys, no words); `worded` puts
these words into that answer, which makes it the `step` endpoint's JSON, the one lesson/steps_view.py and lesson/view.py
draw. The lesson's own words, at two depths, are in lesson.py. Text only: no Gradio, no model.
"""

# Each step, by the name `minigpt.heads.steps` gives it: its title and one sentence of explanation.
STEPS = {
    "embeddings": (
        "Tokens and embeddings",
        "Each token id picks a row of the token embedding table, its position a row of the position "
        "embedding table; their sum is the residual stream entering block 0.",
    ),
    "inputs": (
        "The inputs",
        "The attention sublayer reads the residual stream after its layer norm (attn_norm): one "
        "C-wide vector per token. Token i may look at itself and at every token before it.",
    ),
    "no_weights": (
        "Attention without trainable weights",
        "For contrast, the simplest attention: score each x_j by its "
        "dot product with x_i, softmax the scores, and mix the x_j with those weights. Nothing here can "
        "learn, and a token mostly matches itself.",
    ),
    "qkv": (
        "Queries, keys and values",
        "Learned projections turn each x into a query (what token i looks for), a key "
        "(what token j offers) and a value (what token j passes on). One fused qkv_proj makes them for every "
        "head; this head's q, k and v are D-wide slices of it, made by the rows of its weight named here.",
    ),
    "scores": (
        "Scores",
        "q_i . k_j says how well key j matches query i. The scores are multiplied by 1/sqrt(D): "
        "the dot product of two D-wide vectors grows like sqrt(D), and unscaled scores would make the softmax "
        "nearly one-hot.",
    ),
    "softmax": (
        "Causal mask and softmax",
        "Keys after i are future tokens: their scores are set to -inf, so that "
        "their weight is exactly 0. The softmax turns the row into weights that are positive and sum to 1: "
        "exp(s_j - max s) for each key, divided by their sum. The row of the heatmap.",
    ),
    "dropout": (
        "Dropout",
        "In training, dropout zeroes each weight with probability p and multiplies the others by "
        "1/(1-p), so that the expected sum stays 1. In evaluation (how the demo runs the model) it does "
        "nothing.",
    ),
    "output": (
        "Weighted sum, heads, output projection, residual",
        "z_i = sum_j w_ij v_j mixes the values with the "
        "weights. The H heads' z_i side by side make C numbers again; the output projection mixes them across "
        "heads, and the residual add puts the result onto the stream: what the MLP sublayer receives (after "
        "its own layer norm).",
    ),
    "multi_head": (
        "Multi-head two ways",
        "The same layer computed as H separate single-head modules, each with its "
        "own W_q, W_k, W_v of width D cut from the fused weight, their outputs stacked; against the fused "
        "projection split into heads (what the model does, one matrix product instead of 3H). The same "
        "numbers, up to float rounding. Both without dropout.",
    ),
    "block": (
        "The block around attention",
        "Pre-LayerNorm: the stream is normalised (mean 0, variance 1, then the "
        "norm's scale and shift) before each sublayer, and each sublayer's output is added back onto it. The MLP "
        "works on each token alone: C numbers to 4C neurons, GELU, back to C.",
    ),
    "probabilities": (
        "Next-token probabilities",
        "After the last block: the final layer norm, the LM head (one logit per "
        "vocabulary token) and a softmax over the whole vocabulary.",
    ),
}

# The numbers of each step: key -> (shape in letters, what it is), in the order they are drawn (the library's order).
NUMBERS = {
    "embeddings": {
        "token_i": ("(C,)", "token embedding: row id_i of token_embedding.weight"),
        "position_i": ("(C,)", "position embedding: row i of position_embedding.weight"),
        "sum_i": ("(C,)", "their sum: the stream entering block 0"),
    },
    "inputs": {
        "x_i": ("(C,)", "x_i, the query token's input"),
        "x_j": ("(i+1, C)", "x_j, the inputs it may look at (j <= i)"),
        "residual_i": ("(C,)", "the residual stream at i, before attn_norm"),
    },
    "no_weights": {
        "scores": ("(i+1,)", "x_i . x_j"),
        "weights": ("(i+1,)", "softmax"),
        "output": ("(C,)", "sum_j softmax_j x_j"),
    },
    "qkv": {"q_i": ("(D,)", "q_i"), "k_j": ("(i+1, D)", "k_j"), "v_j": ("(i+1, D)", "v_j")},
    "scores": {"scores": ("(i+1,)", "q_i . k_j"), "scaled": ("(i+1,)", "q_i . k_j / sqrt(D)")},
    "softmax": {
        "masked": ("(T,)", "masked scores"),
        "exps": ("(i+1,)", "exp(s_j - max s)"),
        "weights": ("(T,)", "w_ij = softmax"),
    },
    "dropout": {"keep": ("(i+1,)", "kept (1) or dropped (0)"), "weights": ("(T,)", "weights after dropout")},
    "output": {
        "z_i": ("(D,)", "z_i = sum_j w_ij v_j"),
        "shares": ("(i+1,)", "each key's share of z_i: w_ij (v_j . z_i) / |z_i|^2, summing to 1"),
        "heads_z_i": ("(C,)", "all heads' z_i side by side"),
        "out_i": ("(C,)", "out_proj(heads' z_i): the sublayer's output"),
        "next_i": ("(C,)", "residual + output: the stream the MLP sublayer reads"),
    },
    "multi_head": {
        "separate_i": ("(C,)", "H single-head modules, stacked"),
        "fused_i": ("(C,)", "fused projection split into heads"),
    },
    "block": {
        "attn_norm_hat": ("(C,)", "x̂ = (x - mean) / sqrt(variance + eps): the stream entering the block, normalised"),
        "attn_norm_scale": ("(C,)", "γ: attn_norm's scale"),
        "attn_norm_shift": ("(C,)", "β: attn_norm's shift"),
        "attn_norm_out": ("(C,)", "γ x̂ + β: attn_norm's output, the attention's input x_i"),
        "middle_i": ("(C,)", "stream + attention output"),
        "mlp_norm_hat": ("(C,)", "x̂: that stream, normalised"),
        "mlp_norm_scale": ("(C,)", "γ: mlp_norm's scale"),
        "mlp_norm_shift": ("(C,)", "β: mlp_norm's shift"),
        "mlp_norm_out": ("(C,)", "γ x̂ + β: mlp_norm's output, the MLP's input"),
        "pre_activation_i": ("(4C,)", "fc_in: each neuron's input"),
        "activation_i": ("(4C,)", "GELU: the neurons' activations"),
        "mlp_out_i": ("(C,)", "out_proj: the MLP's output"),
        "after_i": ("(C,)", "stream + MLP output: the next block's input"),
    },
    "probabilities": {
        "final_i": ("(C,)", "final_norm of the stream leaving the last block"),
        "top_logits": ("(k,)", "logits of the most likely next tokens"),
        "top_probabilities": ("(k,)", "their probabilities: softmax over all V logits"),
    },
}


def worded(answer: dict) -> dict:
    """`steps_json`'s answer with the words: the `step` endpoint's JSON. A number without words here raises KeyError:
    the page would have no name for it."""
    return {**answer, "steps": {name: worded_step(name, step) for name, step in answer["steps"].items()}}


def worded_step(name: str, step: dict) -> dict:
    """One step headed by its title and explanation, and its numbers' shapes (the library's `number_shapes`) named and
    written in letters after the model's shapes."""
    title, explanation = STEPS[name]
    named = [
        dict(what=NUMBERS[name][key][1], code="", symbols=NUMBERS[name][key][0], shape=shape)
        for key, shape in step["number_shapes"].items()
    ]
    numbers = {key: value for key, value in step.items() if key != "number_shapes"}
    return {"title": title, "explanation": explanation, **numbers, "shapes": step["shapes"] + named}
