"""The lesson's words. First the lesson: a guided path through the whole block on the learner's own text, in the order
of the seeds (Raschka's chapter 3, then a GPT on names). Each step says what happens in plain words or with formulas
and shapes (two depths), names what to try and the question the view answers, and points at the part of the step view
(steps_view.py) whose numbers it shows: the `step` endpoint's, computed by minigpt/heads/steps.py. Steps 11 and 12 show
the head roles (the `head_roles` endpoint) and where the model's weights are; step 13, how heads work together (the
circuits views). Then the step view's words: each step's title and one sentence of explanation, and each number's shape
in letters and what it is. `minigpt.heads.steps` computes the numbers (`steps_json`: numbers and their keys, no words);
`worded` puts these words into that answer, which makes it the `step` endpoint's JSON, the one steps_view.py and view.py
draw. Text only: no Gradio, no model."""

from dataclasses import dataclass

LESSON_INTRO = (  # the section's introduction on the page
    "## Lesson: the block, step by step\nHow the model turns your text into next-token probabilities, one step "
    "at a time, with its real numbers on the text above: pick a lesson step (or every step at once), a layer, "
    "a head and the query token, or click a row of the enlarged head below, or a box of the diagram."
)

DEPTHS = ("plain", "formulas")  # plain words; or with formulas and shapes


@dataclass(frozen=True)
class LessonStep:
    title: str
    sections: tuple[str, ...]  # the step view's sections it shows (STEPS keys, below), or "roles", "weights"
    boxes: tuple[str, ...]  # where it is in the block diagram (lesson/view.py BOXES)
    plain: str
    formulas: str
    try_this: str
    question: str


LESSON = (
    LessonStep(
        "Tokens and embeddings",
        ("embeddings",),
        ("tokens", "embed"),
        "The model reads your text as tokens (for the names model, one letter each, after a start token). Each token "
        "becomes a list of numbers taken from a table, its token embedding; a second table adds where the token "
        "stands, its position embedding. Their sum is what the first block reads.",
        "x⁰_i = E_tok[id_i] + E_pos[i]: row id_i of token_embedding.weight (V, C) plus row i of "
        "position_embedding.weight (block_size, C). The whole text enters block 0 as a (T, C) matrix.",
        "Pick another query token: the token row changes with the letter, the position row with the place.",
        "Do two equal letters at different places enter the model as the same vector?",
    ),
    LessonStep(
        "Attention without trainable weights",
        ("inputs", "no_weights"),
        ("attention", "attn_norm"),
        "Attention lets a token gather information from the tokens before it. The simplest kind: compare the token "
        "with each earlier one (a dot product, large when two vectors point the same way), turn the comparisons into "
        "weights that add up to 1, and mix the earlier vectors with those weights. Nothing in it can learn.",
        "s_j = x_i · x_j for j ≤ i, w = softmax(s), out_i = Σ_j w_j x_j, with x (T, C) the block's input after its "
        "layer norm: no parameter at all.",
        "Look at the weight each token gets, then pick a query whose letter appeared before.",
        "Without learned weights, which token does a token mostly attend to?",
    ),
    LessonStep(
        "Queries, keys and values",
        ("qkv",),
        ("qkv",),
        "A trained model learns what to compare. Three learned matrices turn each token's vector into a query (what "
        "it looks for), a key (what it offers) and a value (what it passes on). Each head has its own, and they are "
        "narrower than the token's vector.",
        "q_i = W_q x_i, k_j = W_k x_j, v_j = W_v x_j, each (D,) with D = C / H. The head's W_q, W_k and W_v are D "
        "rows each of the fused qkv_proj.weight (3C, C).",
        "Switch to another head: the same inputs give another query, other keys and values.",
        "Which rows of qkv_proj.weight make this head's query?",
    ),
    LessonStep(
        "Scores and the 1/√D scale",
        ("scores",),
        ("scores",),
        "The query is compared with every key: one dot product, one score per token it may see. The scores are "
        "shrunk by a fixed factor that depends on the head's width, so that wide heads do not become overconfident.",
        "s_ij = q_i · k_j / √D. A dot product of two D-wide vectors with unit-variance entries has variance D; "
        "dividing by √D brings it back to 1, and the softmax stays soft.",
        "Compare the two columns: the ranking of the keys does not change, only the gaps between them.",
        "Which key matches this query best?",
    ),
    LessonStep(
        "Causal mask and softmax",
        ("softmax",),
        ("softmax",),
        "A token may not look at the tokens after it: their scores become minus infinity. The softmax then makes each "
        "score positive (its exponential) and divides by the total, so the weights add up to 1. These weights are "
        "the row of the attention map.",
        "w_ij = exp(s_ij − m) / Σ_k exp(s_ik − m), the sum over the keys k ≤ i, with m = max_j s_ij (the same "
        "weights, without overflow); s_ij = −∞ for j > i gives exp(−∞) = 0.",
        "Pick a query early in the text: fewer keys share the weight.",
        "What weight does a future token get, and why exactly 0?",
    ),
    LessonStep(
        "Dropout",
        ("dropout",),
        ("dropout",),
        "While training, dropout switches off some weights at random, so that the model cannot rely on any single "
        "path; the weights it keeps are scaled up to make up for it. When the model is used, as here, it does nothing.",
        "w′_ij = w_ij · m_ij / (1 − p), m_ij ~ Bernoulli(1 − p): E[w′] = w, but a row no longer sums to exactly 1. "
        "The identity in evaluation (model.eval()).",
        "Tick Training mode on a model trained with attention dropout (names; the specimen has none), then "
        "change the seed.",
        "After dropout, does the row still sum to 1?",
    ),
    LessonStep(
        "Weighted sum and output projection",
        ("output",),
        ("sum", "add_attention"),
        "The head's output for this token is a mix of the values, each weighted by its attention weight. All heads' "
        "outputs are put side by side, one more learned matrix (the output projection) mixes them, and the result is "
        "added to the token's vector: the residual stream.",
        "z_i = Σ_j w_ij v_j (D,); [z_i¹ … z_iᴴ] (C,); out_i = W_O [z_i¹ … z_iᴴ] + b (C,); the stream becomes "
        "x_i + out_i.",
        "Read each key's share of z_i: the longest bars are the values this output is made of. Then find this "
        "head's D numbers, highlighted, inside the heads side by side.",
        "Which values does this token's output mostly come from?",
    ),
    LessonStep(
        "Multi-head: one split projection",
        ("multi_head",),
        ("attention",),
        "A layer has several heads, each with its own queries, keys and values, so each can look for something else. "
        "H small attention modules with their outputs stacked give the same numbers as the model's one big matrix "
        "split into H parts: the split is just faster.",
        "Q = X W_qᵀ (T, C) → (T, H, D) → (H, T, D): the same as H projections of (D, C) each, computed as one "
        "matrix product instead of 3H. The difference is float rounding.",
        "Change the layer: the difference stays at rounding level.",
        "Are H single heads and one split projection the same computation?",
    ),
    LessonStep(
        "The whole block: layer norm, residual, MLP",
        ("block",),
        ("attn_norm", "add_attention", "mlp_norm", "mlp", "add_mlp"),
        "Attention is half a block. Before it, a layer norm rescales the token's vector to mean 0 and spread 1, then "
        "applies a learned scale and shift; after it, its output is added to the stream. Then the same again with an "
        "MLP: each token alone goes through a layer four times wider (its neurons, with a GELU), back to the width "
        "of the stream, and is added to it.",
        "LN(x) = γ ⊙ (x − μ) / √(σ² + ε) + β; h = x + Attn(LN₁(x)); y = h + W₂ GELU(W₁ LN₂(h) + b₁) + b₂ with "
        "W₁ (4C, C), W₂ (C, 4C). GELU(u) ≈ u Φ(u): negative inputs are mostly cut.",
        "Look at the most active neurons, then pick another query or layer.",
        "Which sublayer moves the stream more at this token, attention or the MLP?",
    ),
    LessonStep(
        "Next-token probabilities",
        ("probabilities",),
        ("final", "probs"),
        "After the last block, a final layer norm and one more matrix turn the token's vector into a score (a logit) "
        "for every token of the vocabulary; a softmax makes them the probabilities of what comes next.",
        "logits_i = W_U LN_f(x_i) (V,), p = softmax(logits_i). Training minimises −log p(the token that follows), "
        "averaged over every position.",
        "Pick each query in turn and read the probability of the token that really follows.",
        "How sure is the model of the next token here?",
    ),
    LessonStep(
        "What heads learn",
        ("roles",),
        ("attention",),
        "Trained heads take on jobs. A previous-token head looks one token back; a sink parks attention on the first "
        "token when there is nothing useful to see; an induction head finds an earlier copy of the current token and "
        "looks at what came after it, so that the model can repeat. The specimen model has all three. A head can hold "
        "two roles, and a score says what it was measured on: on prose, with little to copy, the specimen's 1.1 rests "
        "on the first token (the Head Finder calls it a sink); on random tokens written twice it copies (induction).",
        "A role's score is the head's mean attention on a pattern: j = i − 1 (previous token), j = 0 (first token), "
        "j = the position after an earlier copy of token i (induction, on random tokens written twice). Chance: the "
        "score of attention spread evenly.",
        "Open the maps of the specimen model on a line written twice and click head 1.1.",
        "Which head of the specimen copies what came after the last time it saw this token?",
    ),
    LessonStep(
        "Train your own",
        ("weights",),
        ("embed", "attention", "mlp", "final"),
        "Every number you have seen was learned: training shows the model text, measures how surprised it was by each "
        "next token (the loss) and nudges every weight to be a little less surprised. The Train tab does it from "
        "this page, in minutes on a laptop CPU.",
        "loss = mean over t of −log p(x_t+1 | x_1 … x_t); AdamW moves every weight θ against the loss's gradient "
        "∇θ. The command python train.py --preset names --output_dir my-names is the same run as the Train tab's.",
        "Train the induction lab in the Train tab, then open its maps and head roles.",
        "Where are this model's weights: how many in attention, how many in the MLPs?",
    ),
    LessonStep(
        "Heads work together: finding the circuit",
        ("circuits",),
        ("attention",),
        "No head works alone, and which heads work together, and how, is found by measuring, not by guessing. Four "
        "measurements in turn: which head writes the answer into the output (attribution); which head's output, put "
        "back from the text into a text with one token changed, brings the answer back (patching); through which of "
        "that head's inputs, its query (what it looks for), its key (where it looks) or its value (what it copies), "
        "and from which earlier parts the answer arrives (path patching); and which heads the model needs to copy "
        "at all (ablation on random tokens written twice). Below, each of them on your text, in the model's numbers.",
        "Attribution: logit(t) = Σ_c LN_f(x_c) · W_U[t] over the components c (embeddings, each head's output "
        "W_O[h] z_h, each MLP) with the final norm's divisor frozen. Patching: effect = (LD_patched − LD_corrupted) / "
        "(LD_clean − LD_corrupted), LD = logit(clean answer) − logit(corrupted answer). Path patching: the receiver "
        "computes one input, q, k or v, from corrupted stream + (clean − corrupted output of one sender); a two-step "
        "path feeds a sender's difference to an intermediate (an MLP) and only the intermediate's change on. "
        "Ablation: a head's output replaced by its mean over the prompts.",
        "Show a text that repeats a phrase with its second copy cut short, then follow the steps below; open the "
        "Circuits section to draw each one whole.",
        "Which input of the head that carries the answer, its query, key or value, carries it on this text?",
    ),
)


ALL_STEPS = 0  # the lesson step value that shows every step of the view at once


def lesson_number(value) -> int:
    """The lesson step `value` names (1 to 13; a link's or client's string too), or ALL_STEPS for anything else."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        return ALL_STEPS
    return number if 1 <= number <= len(LESSON) else ALL_STEPS


def next_step(value, by: int) -> int:
    """The lesson step `by` steps on from `value` (Back: -1, Next: +1), held within the lesson; from every step at once,
    Next starts the lesson and Back opens its last step."""
    number = lesson_number(value)
    if number == ALL_STEPS:
        return 1 if by > 0 else len(LESSON)
    return min(max(number + by, 1), len(LESSON))


# The lesson step that teaches each section of the step view (its number in the view of every step at once).
SECTION_STEP = {section: n for n, step in enumerate(LESSON, start=1) for section in step.sections}
MASK_STEP = SECTION_STEP["softmax"]  # the causal mask: seen from a query that has later tokens to mask

LESSON_CHOICES = [(f"{n}. {step.title}", n) for n, step in enumerate(LESSON, start=1)] + [
    ("Every step at once (attention in detail)", ALL_STEPS)
]


# ---- the step view's words ----

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
