"""Circuits: which parts of a MiniGPT make its prediction, and how its heads compose. Direct logit attribution,
activation patching (heads, residual stream), path patching into one head's query, key or value, composition
scores between heads (Elhage et al. 2021) and the QK / OV circuits over tokens and positions.

Numbers come from the model's own modules and weights: hooks on the real modules during real forward passes, and the
weights of `qkv_proj` / `out_proj` read per head, in the convention x @ W (TransformerLens's W_Q, W_K, W_V (C, D)
and W_O (D, C) per head). Nothing here re-implements the forward pass.

Shapes: L layers, H heads, T tokens, C width, D = C // H, V vocabulary. Ids: a list of ints, or a (T,) or (1, T)
tensor. The model runs as it is: put it in eval mode (dropout off) first.
"""

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass

import torch

from minigpt.heads.errors import InstrumentError, checked_head, checked_layer, checked_position, checked_token

# ---- plumbing: ids, hooks on the calling thread, per-head weights ---------------------------------------------------


def as_batch(ids) -> torch.Tensor:
    """(1, T) long tensor of a list of ids or a (T,) / (1, T) tensor."""
    ids = torch.as_tensor(ids, dtype=torch.long)
    ids = ids if ids.dim() == 2 else ids[None]
    if ids.shape[0] != 1 or ids.shape[1] == 0:
        raise InstrumentError(
            f"Give one non-empty text (a list of token ids), not a batch of shape {tuple(ids.shape)}."
        )
    return ids


@contextlib.contextmanager
def hooks(*registrations):
    """Within the block, (module, "pre" | "post", fn) hooks act on the calling thread's forward passes only (the
    server shares one model between request threads, as `heads_ablated` does)."""
    caller = threading.get_ident()

    def gated(fn):
        return lambda *args: fn(*args) if threading.get_ident() == caller else None

    handles = []
    try:
        for module, kind, fn in registrations:
            register = module.register_forward_pre_hook if kind == "pre" else module.register_forward_hook
            handles.append(register(gated(fn)))
        yield
    finally:
        for handle in handles:
            handle.remove()


def run(model, ids: torch.Tensor, **kwargs):
    with torch.no_grad():
        return model(input_ids=ids.to(model.device), use_cache=False, **kwargs)


def head_weights(model, layer: int, fold_ln: bool = True) -> dict[str, torch.Tensor]:
    """One layer's W_Q, W_K, W_V (H, C, D) and W_O (H, D, C), float32 on the CPU: x @ W_Q[h] is head h's query
    (bias aside). `qkv_proj` is an nn.Linear C -> 3C whose output rows h*D..(h+1)*D of each third are head h's;
    `out_proj`'s input columns h*D.. read head h. fold_ln: the layer norm's weight multiplies the rows of W_Q, W_K,
    W_V (what its elementwise scale does to the input they read)."""
    block = model.model.layers[checked_layer(model.config, layer)]
    C, H = model.config.n_embd, model.config.n_head
    weights = block.attn.qkv_proj.weight.detach().float().cpu()  # (3C, C): (out, in)
    per_head = [w.T.unflatten(1, (H, C // H)).permute(1, 0, 2) for w in weights.split(C)]  # 3 x (H, C, D)
    if fold_ln:
        scale = block.attn_norm.weight.detach().float().cpu()[:, None]  # (C, 1): one factor per input row
        per_head = [scale * w for w in per_head]
    W_O = block.attn.out_proj.weight.detach().float().cpu().T.unflatten(0, (H, C // H))  # (H, D, C)
    return dict(zip(("W_Q", "W_K", "W_V"), per_head)) | {"W_O": W_O}


def last_logits(model, ids: torch.Tensor, **kwargs) -> tuple[torch.Tensor, object]:
    """(B, V) float logits at the last position, and the model's output."""
    out = run(model, ids, logits_to_keep=1, **kwargs)
    return out.logits[:, -1].float().cpu(), out


# ---- direct logit attribution ---------------------------------------------------------------------------------------


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
    ids = as_batch(input_ids)
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
        logits = run(model, ids, logits_to_keep=torch.tensor([position])).logits[0, -1].float().cpu()  # (V,)

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


# ---- activation patching --------------------------------------------------------------------------------------------


@dataclass
class Patching:
    """Effects of patching clean activations into the corrupted run: 0 changes nothing, 1 restores the clean logit
    difference. LD = logit(clean_token) - logit(corrupted_token) at the last position."""

    effects: torch.Tensor  # (L, H) for heads, (L, T) for the residual stream
    clean_difference: float
    corrupted_difference: float
    clean_token: int  # the clean text's top-1 next token
    corrupted_token: int  # the corrupted text's


def texts_pair(clean_ids, corrupted_ids) -> torch.Tensor:
    """(2, T): the clean and corrupted ids, which patching needs of the same length."""
    clean, corrupted = as_batch(clean_ids), as_batch(corrupted_ids)
    if clean.shape[1] != corrupted.shape[1]:
        raise InstrumentError(
            f"The clean text is {clean.shape[1]} tokens long and the corrupted text {corrupted.shape[1]}: patching "
            f"swaps activations position by position, so both need the same number of tokens. Change the corrupted "
            f"text to {clean.shape[1]} tokens (replace a word by one of the same length)."
        )
    return torch.cat([clean, corrupted])


def difference(logits: torch.Tensor, answers: tuple[int, int]) -> torch.Tensor:
    """(B,) LD of (B, V) logits: logit(clean answer) - logit(corrupted answer)."""
    return logits[:, answers[0]] - logits[:, answers[1]]


def answers_of(logits: torch.Tensor) -> tuple[int, int]:
    """The clean and corrupted top-1 tokens of (2, V) logits; the same one leaves nothing to restore."""
    clean, corrupted = (int(i) for i in logits.argmax(-1))
    if clean == corrupted:
        raise InstrumentError(
            f"The model's top next token is the same after both texts (id {clean}): there is no difference for "
            f"patching to restore. Change the corrupted text so that the model predicts another next token (change "
            f"what the answer depends on, such as the earlier word it copies)."
        )
    return clean, corrupted


def clean_run(model, pair: torch.Tensor) -> tuple[dict, torch.Tensor, tuple[int, int]]:
    """One pass over (clean, corrupted): the clean row's merged heads and block inputs (L, T, C) each, the LDs (2,)
    and the two answers."""
    layers, seen = model.model.layers, {"merged": [], "resid": []}

    def keep(name):
        return lambda module, args: seen[name].append(args[0][0].detach())  # the clean row: (T, C)

    registrations = [(block.attn.out_proj, "pre", keep("merged")) for block in layers]
    registrations += [(block, "pre", keep("resid")) for block in layers]
    with hooks(*registrations):
        logits, _ = last_logits(model, pair)
    answers = answers_of(logits)
    return {name: torch.stack(values) for name, values in seen.items()}, difference(logits, answers), answers


def patched_differences(model, corrupted, masks, hooks_for, answers, progress, batch_size) -> torch.Tensor:
    """(N,) LDs of N runs of the corrupted text, row i patched as masks[i] says (hooks_for(chunk of masks) gives the
    hooks), in batches of at most batch_size rows; progress(fraction done) after each batch."""
    found = []
    for start in range(0, len(masks), batch_size):
        chunk = masks[start : start + batch_size]
        with hooks(*hooks_for(chunk)):
            logits, _ = last_logits(model, corrupted.expand(len(chunk), -1))
        found.append(difference(logits, answers))
        if progress is not None:
            progress(min(start + batch_size, len(masks)) / len(masks))
    return torch.cat(found)


def patching(model, clean_ids, corrupted_ids, site: str, progress, batch_size) -> Patching:
    """Each (layer, unit) patched alone: units are heads (site "heads") or positions (site "residual")."""
    pair = texts_pair(clean_ids, corrupted_ids)
    clean, lds, answers = clean_run(model, pair)
    L, H, T = model.config.n_layer, model.config.n_head, pair.shape[1]
    units = H if site == "heads" else T
    masks = torch.eye(L * units, dtype=torch.bool).view(-1, L, units).to(model.device)  # row i patches unit i

    def hooks_for(chunk):
        def replace_heads(layer):  # out_proj's input, (b, T, H * D): the patched heads' slices from the clean run
            def hook(module, args):
                merged = args[0].unflatten(-1, (H, -1))  # (b, T, H, D)
                clean_heads = clean["merged"][layer].unflatten(-1, (H, -1))  # (T, H, D)
                return (torch.where(chunk[:, layer, None, :, None], clean_heads, merged).flatten(-2), *args[1:])

            return hook

        def replace_positions(layer):  # the block's input, (b, T, C): the patched positions from the clean run
            def hook(module, args):
                patched = torch.where(chunk[:, layer, :, None], clean["resid"][layer], args[0])
                return (patched, *args[1:])

            return hook

        layers = model.model.layers
        if site == "heads":
            return [(layers[i].attn.out_proj, "pre", replace_heads(i)) for i in range(L) if chunk[:, i].any()]
        return [(layers[i], "pre", replace_positions(i)) for i in range(L) if chunk[:, i].any()]

    patched = patched_differences(model, pair[1:], masks, hooks_for, answers, progress, batch_size)
    effects = (patched - lds[1]) / (lds[0] - lds[1])  # the clean LD is > the corrupted one: answers differ
    return Patching(effects.view(L, units), float(lds[0]), float(lds[1]), *answers)


def patch_heads(
    model, clean_ids, corrupted_ids, progress: Callable[[float], None] | None = None, batch_size: int = 32
) -> Patching:
    """(L, H) effect of patching each head's output (at every position) from the clean run into the corrupted run:
    out_proj's input slice of that head replaced, as `heads_ablated` replaces it with zeros. Raises InstrumentError (a
    ValueError) for texts of different token counts or with the same top-1 answer."""
    return patching(model, clean_ids, corrupted_ids, "heads", progress, batch_size)


def patch_residual(
    model, clean_ids, corrupted_ids, progress: Callable[[float], None] | None = None, batch_size: int = 32
) -> Patching:
    """(L, T) effect of patching the residual stream entering each layer at each position (the block's input) from
    the clean run into the corrupted run."""
    return patching(model, clean_ids, corrupted_ids, "residual", progress, batch_size)


# ---- path patching --------------------------------------------------------------------------------------------------


@dataclass
class PathPatching:
    """The clean sender's output fed into one input (q, k or v) of the receiver head alone, in the corrupted run."""

    effect: float  # (LD_patched - LD_corrupted) / (LD_clean - LD_corrupted)
    attention_clean: float  # the receiver's weight from the last query to key_position, in each run
    attention_corrupted: float
    attention_patched: float
    key_position: int
    clean_difference: float
    corrupted_difference: float
    patched_difference: float


def check_path(config, sender: tuple, receiver: tuple, receiver_input: str) -> None:
    layer, head = checked_head(config, *receiver)
    if receiver_input not in ("q", "k", "v"):
        raise InstrumentError(f"The receiver's input must be 'q', 'k' or 'v', not {receiver_input!r}.")
    kind, *where = sender
    valid = {
        "head": len(where) == 2 and 0 <= where[0] < layer and 0 <= where[1] < config.n_head,
        "mlp": len(where) == 1 and 0 <= where[0] < layer,
        "embed": not where,
        "resid": len(where) == 1 and 0 <= where[0] <= layer,
    }
    if not valid.get(kind, False):
        raise InstrumentError(
            f"The sender {sender} cannot reach head {layer}.{head}: give ('head', L, H) or ('mlp', L) of an earlier "
            f"layer, ('embed',), or ('resid', L) with L <= {layer} (the residual stream entering layer L)."
        )


def patch_path(
    model, clean_ids, corrupted_ids, sender: tuple, receiver: tuple, receiver_input: str, key_position=None
) -> PathPatching:
    """Path patching: in the corrupted run, head receiver = (L2, H2) computes its `receiver_input` ("q", "k" or "v")
    from corrupted_resid + (clean_sender - corrupted_sender) (the residual stream entering L2, normed by L2's own
    attn_norm); every other head, and its other two inputs, read the corrupted stream. Senders: ("head", L, H) (its
    output through W_O[h]), ("mlp", L), ("embed",) (token + position embeddings), ("resid", L) (the whole stream
    entering layer L, so that ("resid", L2) feeds the clean stream itself).

    One batched pass of three rows: clean, corrupted, and the corrupted one patched. The sender's output in the first
    two rows is read by hooks on its module; a forward hook on L2's qkv_proj runs attn_norm and qkv_proj themselves on
    the patched stream and splices head H2's q, k or v slice into the third row. The attention weights come from
    output_attentions; key_position defaults to the key the clean run's receiver weighs most from the last query."""
    check_path(model.config, sender, receiver, receiver_input)
    pair = texts_pair(clean_ids, corrupted_ids)
    if key_position is not None:
        key_position = checked_position(key_position, pair.shape[1], "key_position")
    rows = torch.cat([pair, pair[1:]])  # clean, corrupted, corrupted with the patched path
    layers, (L2, H2) = model.model.layers, receiver
    C, H = model.config.n_embd, model.config.n_head
    D = C // H
    sent, entering, busy = {}, {}, []

    def keep_sender(module, args, output=None):
        kind, *where = sender
        if kind == "head":  # that head's share of out_proj: its slice of the merged heads through W_O[h]
            merged = args[0][:2].unflatten(-1, (H, D))[:, :, where[1]]  # (2, T, D)
            sent["out"] = merged @ module.weight[:, where[1] * D : (where[1] + 1) * D].T  # (2, T, C)
        else:
            sent["out"] = (output if kind == "mlp" else args[0])[:2]

    def keep_stream(module, args):
        entering["x"] = args[0][2]  # (T, C): the patched row's stream entering L2, the corrupted one

    def splice(module, args, output):
        if busy:  # the call below, on the patched stream
            return None
        stream = entering["x"] + sent["out"][0] - sent["out"][1]
        busy.append(True)
        try:
            patched = module(layers[L2].attn_norm(stream))  # (T, 3C): the layer's own norm and projection
        finally:
            busy.pop()
        columns = slice("qkv".index(receiver_input) * C + H2 * D, "qkv".index(receiver_input) * C + (H2 + 1) * D)
        output = output.clone()
        output[2, :, columns] = patched[:, columns]
        return output

    kind, *where = sender
    site = {
        "head": (lambda: layers[where[0]].attn.out_proj, "pre"),
        "mlp": (lambda: layers[where[0]].mlp, "post"),
        "embed": (lambda: layers[0], "pre"),
        "resid": (lambda: layers[where[0]], "pre"),
    }[kind]
    registrations = [(site[0](), site[1], keep_sender), (layers[L2], "pre", keep_stream)]
    with hooks(*registrations, (layers[L2].attn.qkv_proj, "post", splice)):
        logits, out = last_logits(model, rows, output_attentions=True)
    answers = answers_of(logits[:2])
    lds = difference(logits, answers)  # (3,)
    weights = out.attentions[L2][:, H2, -1].float().cpu()  # (3, T): from the last query
    key = int(weights[0].argmax()) if key_position is None else key_position
    return PathPatching(
        effect=float((lds[2] - lds[1]) / (lds[0] - lds[1])),
        attention_clean=float(weights[0, key]),
        attention_corrupted=float(weights[1, key]),
        attention_patched=float(weights[2, key]),
        key_position=key,
        clean_difference=float(lds[0]),
        corrupted_difference=float(lds[1]),
        patched_difference=float(lds[2]),
    )


# ---- composition scores ---------------------------------------------------------------------------------------------


def check_kind(kind: str) -> str:
    if str(kind).lower() not in ("q", "k", "v"):
        raise InstrumentError(f"The composition kind must be 'q', 'k' or 'v', not {kind!r}.")
    return str(kind).lower()


def composition(P, R, X, Y) -> torch.Tensor:
    """(n, m) ||A B||_F / (||A||_F ||B||_F) for writers A = P R (P (n, C, D), R (n, D, C)) and readers B = X Yᵀ (X,
    Y (m, C, D)), from D x D products alone (GPT-2's 144 x 144 pairs of 768 x 768 products would take minutes): with
    M = R X, ||P M Yᵀ||² = tr(Mᵀ PᵀP M YᵀY) = sum(M * (PᵀP M YᵀY)), ||P R||² = sum(R * PᵀP R), ||X Yᵀ||² =
    sum(XᵀX * YᵀY). In float64: these are sums of squares' worth of products."""
    P, R, X, Y = (t.double() for t in (P, R, X, Y))
    gram_P, gram_X, gram_Y = P.mT @ P, X.mT @ X, Y.mT @ Y  # (n or m, D, D)
    M = torch.einsum("ndc,mce->nmde", R, X)  # (n, m, D, D)
    product = (M * (gram_P[:, None] @ M @ gram_Y[None])).sum((-2, -1)).clamp(min=0).sqrt()  # (n, m)
    writer = (R * (gram_P @ R)).sum((-2, -1)).clamp(min=0).sqrt()  # (n,)
    reader = (gram_X * gram_Y).sum((-2, -1)).clamp(min=0).sqrt()  # (m,)
    return (product / writer[:, None] / reader[None]).float()


def composition_scores(model, kind: str, fold_ln: bool = True) -> torch.Tensor:
    """(L, H, L, H) composition scores (Elhage et al. 2021) of each earlier head (writer, first two indices) into
    each later head (reader), 0 where the reader's layer is not later; NaN for a head whose weights are all zero.

    score = ||A B||_F / (||A||_F ||B||_F), with TransformerLens's conventions (all_composition_scores): A = the
    writer's OV = W_V W_O (C x C, x @ W); B = the reader's W_Q W_Kᵀ for "q", its transpose W_K W_Qᵀ for "k" (the
    writer's output read as keys), its OV for "v". fold_ln: each reader's and writer's attn_norm weight folded into
    the W_Q, W_K, W_V it feeds (TransformerLens's bridge compares without folding: fold_ln=False)."""
    kind = check_kind(kind)
    weights = [head_weights(model, layer, fold_ln) for layer in range(model.config.n_layer)]
    W = {name: torch.stack([w[name] for w in weights]) for name in ("W_Q", "W_K", "W_V", "W_O")}  # (L, H, ...)
    W["W_O^T"] = W["W_O"].mT  # (L, H, C, D): the reader's OV is W_V (W_Oᵀ)ᵀ
    X, Y = (W[name] for name in {"q": ("W_Q", "W_K"), "k": ("W_K", "W_Q"), "v": ("W_V", "W_O^T")}[kind])  # B = X Yᵀ
    L, H = model.config.n_layer, model.config.n_head
    scores = torch.zeros(L, H, L, H)
    for layer in range(L - 1):  # one writing layer at a time: (H, later heads, D, D) at most in memory
        later = X[layer + 1 :].flatten(0, 1), Y[layer + 1 :].flatten(0, 1)
        scores[layer, :, layer + 1 :] = composition(W["W_V"][layer], W["W_O"][layer], *later).view(H, -1, H)
    return scores


def composition_baseline(model, kind: str, samples: int = 32, seed: int = 0) -> float:
    """The mean composition score of i.i.d. Gaussian W_V, W_O, W_Q, W_K of this model's shapes (C, D), over
    samples x samples writer-reader pairs, seeded: what "no composition" looks like at this width (it shrinks as C
    grows). The score is scale-free and every kind reads two (C, D) factors, so q, k and v share one baseline."""
    check_kind(kind)
    C, D = model.config.n_embd, model.config.n_embd // model.config.n_head
    generator = torch.Generator().manual_seed(seed)
    P, R, X, Y = (torch.randn(samples, *shape, generator=generator) for shape in ((C, D), (D, C), (C, D), (C, D)))
    return float(composition(P, R, X, Y).mean())


# ---- QK and OV circuits ---------------------------------------------------------------------------------------------

MAX_ENTRIES = 1 << 26  # the largest V x V matrix ov_circuit builds whole (256 MB of float32: V up to 8,192)


def centred(x: torch.Tensor) -> torch.Tensor:
    """x minus its mean over the width: what a layer norm does first, exactly (it is linear)."""
    return x - x.mean(-1, keepdim=True)


def ov_circuit(model, layer: int, head: int, top: int | None = None, rows_per_block: int | None = None):
    """The head's full OV circuit over tokens: entry (s, t) is how much attending to token s raises the logit of t,
    W_E W_V[h] W_O[h] W_U. The layer norms on the way (the head's attn_norm, the final norm) are linear but for their
    divisors: each one's centring and weight are applied exactly (weights folded into W_V and W_U), and their
    division by the vector's norm scale and their biases (a row the same for every source token) are left out, the
    approximation TransformerLens's folded weights make too. Also left out: the other layers.

    top None: the (V, V) matrix (refused above MAX_ENTRIES). top k: (values, indices), (V, k) each: every row's k
    largest entries, computed in blocks of rows so that no V x V matrix is built (GPT-2: 50,257 x 50,257)."""
    layer, head = checked_head(model.config, layer, head)
    W = head_weights(model, layer)
    embedding = centred(model.model.token_embedding.weight.detach().float().cpu())  # (V, C)
    final = model.model.final_norm.weight.detach().float().cpu()
    unembedding = final[:, None] * model.lm_head.weight.detach().float().cpu().T  # (C, V)
    left = embedding @ W["W_V"][head]  # (V, D)
    right = centred(W["W_O"][head]) @ unembedding  # (D, V): the final norm centres the head's output
    V = left.shape[0]
    if top is None:
        if V * V > MAX_ENTRIES:
            raise InstrumentError(
                f"The OV circuit of a {V:,}-token vocabulary is {V:,} x {V:,} numbers: pass top=k for each row's k "
                f"largest entries instead."
            )
        return left @ right
    rows = rows_per_block or max(1, (1 << 24) // V)  # 64 MB of float32 a block
    blocks = [(block @ right).topk(min(top, V), dim=-1) for block in left.split(rows)]
    return torch.cat([b.values for b in blocks]), torch.cat([b.indices for b in blocks])


def copying_score(matrix: torch.Tensor) -> float:
    """The share of the eigenvalue mass of a square circuit that is positive: sum(max(Re λ, 0)) / sum(|λ|), in
    [0, 1]. 1: every eigenvalue positive, a head that copies (its output raises the tokens it attends to); 0: none
    positive (it suppresses them, or rotates them: λ = ±i counts 0). Elhage et al. 2021 summarise with
    Σλ / Σ|λ| in [-1, 1]; for real eigenvalues this score is (1 + that) / 2."""
    eigenvalues = torch.linalg.eigvals(matrix.detach().double().cpu())
    return float(eigenvalues.real.clamp(min=0).sum() / eigenvalues.abs().sum())


def positional_qk_circuit(model, layer: int, head: int) -> torch.Tensor:
    """(P, P) the head's attention scores from the position embeddings alone, P = block_size: entry (i, j) =
    (W_pos[i] W_Q[h]) · (W_pos[j] W_K[h]) times the head's scaling, with the norm's centring and weight applied (as in
    ov_circuit: divisor, biases and token embeddings left out) and -inf above the diagonal (keys after the query,
    which the causal mask hides). A previous-token head shows its maximum of each row just below the diagonal."""
    layer, head = checked_head(model.config, layer, head)
    W = head_weights(model, layer)
    positions = centred(model.model.position_embedding.weight.detach().float().cpu())  # (P, C)
    scores = (positions @ W["W_Q"][head]) @ (positions @ W["W_K"][head]).T * model.model.layers[layer].attn.scaling
    return scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), float("-inf"))


__all__ = [
    "Attribution",
    "Patching",
    "PathPatching",
    "composition_baseline",
    "composition_scores",
    "copying_score",
    "head_weights",
    "logit_attribution",
    "ov_circuit",
    "patch_heads",
    "patch_path",
    "patch_residual",
    "positional_qk_circuit",
]
