"""Activation patching and path patching: which activations carry the answer. Clean activations are put back into a
corrupted run (the same number of tokens, another answer), and the logit difference LD = logit(clean answer) -
logit(corrupted answer) at the last position says how much of the clean answer they restore: heads (each head's output
at every position), the residual stream (entering each layer, one position at a time), or one path (a sender's output
into one head's query, key or value alone).

Every patch is a hook on the model's own modules during a real, batched forward pass (`hooks`): nothing here
re-implements the forward pass.

Shapes: L layers, H heads, T tokens, C width, D = C // H, V vocabulary. Ids: a list of ints, or a (T,) or (1, T)
tensor. The model runs as it is: put it in eval mode (dropout off) first.
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch

from minigpt.heads.errors import InstrumentError, checked_head, checked_position
from minigpt.heads.hooks import hooks
from minigpt.heads.runs import as_batch, last_logits

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


__all__ = ["Patching", "PathPatching", "patch_heads", "patch_path", "patch_residual"]
