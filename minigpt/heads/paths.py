"""Path patching: which parts feed one head's query, key or value, and through what. In a run of the corrupted text,
the receiver head computes one input (q, k or v) from the corrupted stream plus what a sender wrote differently in the
clean run (clean output - corrupted output); every other head, the receiver's other two inputs and everything after
read the corrupted stream. The effect on the answer says how much of the clean answer that one path restores.

- `patch_paths`: every sender at once (the embeddings, every earlier head and MLP, and the whole stream entering the
  receiver's layer) into each of q, k and v: one grid, the effect first, the receiver's attention on the key second.
- `patch_path`: one sender into one input.
- `patch_two_step`: a sender through an intermediate (0.2 -> mlp 0 -> 1.1's key): the intermediate reads the clean
  sender's difference, and only the change in what it writes reaches the receiver's input.

effect = (LD_patched - LD_corrupted) / (LD_clean - LD_corrupted), LD = logit(clean answer) - logit(corrupted answer)
at the last position. Every number comes from the model's own modules (hooks on embeddings, out_proj, the MLPs; the
receiver's layer's own attn_norm and qkv_proj recompute its input on the patched stream; the weights from
output_attentions): nothing re-implements the forward pass.

Shapes: L layers, H heads, T tokens, C width, D = C // H; S senders.
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch

from minigpt.heads.errors import InstrumentError, checked_count, checked_position, shortened
from minigpt.heads.hooks import hooks
from minigpt.heads.nodes import head_of, node_name, parse_node, writers_before, writes_before
from minigpt.heads.patching import answers_of, difference, texts_pair
from minigpt.heads.runs import last_logits

INPUTS = ("q", "k", "v")


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


@dataclass
class PathGrid:
    """Every sender into each of the receiver's inputs: row s, column i is sender s into INPUTS[i]."""

    receiver: tuple[int, int]
    senders: list[str]  # node names: "embed", "0.2", "mlp 0", ..., "resid L2" (the whole stream) last
    effects: torch.Tensor  # (S, 3): the share of the clean answer restored
    attention: torch.Tensor  # (S, 3): the receiver's weight from the last query on key_position, patched
    attention_clean: float
    attention_corrupted: float
    key_position: int
    clean_difference: float
    corrupted_difference: float
    clean_token: int
    corrupted_token: int


# ---- what each sender writes, in the clean and the corrupted run ----------------------------------------------------


def sender_site(model, sender: tuple):
    """(module, kind) of the hook that sees what `sender` writes: a head's slice of out_proj's input, an MLP's
    output, the first block's input (embeddings + positions) or a block's input (the whole stream)."""
    layers = model.model.layers
    kind, *where = sender
    return {
        "head": lambda: (layers[where[0]].attn.out_proj, "pre"),
        "mlp": lambda: (layers[where[0]].mlp, "post"),
        "embed": lambda: (layers[0], "pre"),
        "resid": lambda: (layers[where[0]], "pre"),
    }[kind]()


def head_output(out_proj, merged: torch.Tensor, head: int, n_head: int) -> torch.Tensor:
    """(..., T, C) what one head adds to the stream: its slice of out_proj's input through its columns of the weight
    (the bias belongs to no head)."""
    D = merged.shape[-1] // n_head
    return merged[..., head * D : (head + 1) * D] @ out_proj.weight[:, head * D : (head + 1) * D].T


def written(model, pair: torch.Tensor, senders: list[tuple]) -> tuple[dict, torch.Tensor, tuple[int, int]]:
    """One pass over (clean, corrupted): each sender's output in both rows ((2, T, C) each, by sender), the LDs (2,)
    and the two answers (the clean and corrupted top-1 tokens)."""
    seen, n_head = {}, model.config.n_head

    def keep(sender):
        kind, *where = sender

        def hook(module, args, output=None):
            if kind == "head":
                seen[sender] = head_output(module, args[0], where[1], n_head).detach()
            else:
                seen[sender] = (output if kind == "mlp" else args[0]).detach()

        return hook

    with hooks(*[(*sender_site(model, sender), keep(sender)) for sender in senders]):
        logits, _ = last_logits(model, pair)
    answers = answers_of(logits)
    return seen, difference(logits, answers), answers


# ---- the receiver's input recomputed on a patched stream ------------------------------------------------------------


def patched_rows(model, corrupted, receiver, rows, batch_size, progress=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Runs of the corrupted text (1, T), row i with the receiver's input rows[i][1] ("q", "k" or "v") computed from
    the corrupted stream entering its layer plus rows[i][0] ((T, C)): the LDs' logits (N, V) and the receiver's
    weights from the last query (N, T). In batches of at most batch_size rows; progress(fraction) after each."""
    layer, head = receiver
    block, C, D = model.model.layers[layer], model.config.n_embd, model.config.head_dim
    logits, weights, entering, busy = [], [], {}, []

    def keep_stream(module, args):
        entering["x"] = args[0]  # (b, T, C): the corrupted stream, the same in every row

    for start in range(0, len(rows), batch_size):
        chunk = rows[start : start + batch_size]
        added = torch.stack([delta for delta, _ in chunk]).to(model.device)  # (b, T, C)
        columns = torch.zeros(len(chunk), 1, 3 * C, dtype=torch.bool, device=model.device)
        for i, (_, into) in enumerate(chunk):
            first = INPUTS.index(into) * C + head * D
            columns[i, 0, first : first + D] = True

        def splice(module, args, output, added=added, columns=columns):
            if busy:  # the call below, on the patched stream
                return None
            busy.append(True)
            try:
                patched = module(block.attn_norm(entering["x"] + added))  # (b, T, 3C): the layer's own norm, qkv_proj
            finally:
                busy.pop()
            return torch.where(columns, patched, output)

        with hooks((block, "pre", keep_stream), (block.attn.qkv_proj, "post", splice)):
            found, out = last_logits(model, corrupted.expand(len(chunk), -1), output_attentions=True)
        logits.append(found)
        weights.append(out.attentions[layer][:, head, -1].float().cpu())
        if progress is not None:
            progress(min(start + batch_size, len(rows)) / len(rows))
    return torch.cat(logits), torch.cat(weights)


def receiver_weights(model, pair: torch.Tensor, receiver) -> torch.Tensor:
    """(2, T) the receiver's weights from the last query in the clean and corrupted runs."""
    _, out = last_logits(model, pair, output_attentions=True)
    return out.attentions[receiver[0]][:, receiver[1], -1].float().cpu()


def key_of(weights: torch.Tensor, key_position) -> int:
    """The key whose weight the answer reports: as given, or the one the clean run's receiver weighs most."""
    return int(weights[0].argmax()) if key_position is None else key_position


# ---- the three calls ------------------------------------------------------------------------------------------------


def checked_receiver(model, receiver, receiver_input: str | None = None) -> tuple[int, int]:
    layer, head = head_of(receiver, model.config, "receiver")
    if receiver_input is not None and receiver_input not in INPUTS:
        raise InstrumentError(f"receiver_input must be 'q', 'k' or 'v', not {shortened(receiver_input)}.")
    return layer, head


def patch_paths(
    model,
    clean_ids,
    corrupted_ids,
    receiver: tuple[int, int] | str,
    key_position: int | None = None,
    progress: Callable[[float], None] | None = None,
    batch_size: int = 32,
) -> PathGrid:
    """Every sender into each of the receiver head's q, k and v, one at a time: the embeddings, every head and MLP
    of earlier layers, and the whole clean stream entering the receiver's layer (`resid L2`: all of them together,
    what the receiver would read in the clean run). 3 x (2 + L2 x (H + 1)) patched runs, batched."""
    layer, head = checked_receiver(model, receiver)
    batch_size = checked_count(batch_size, "batch_size", "the patched runs a forward pass takes at once")
    pair = texts_pair(model, clean_ids, corrupted_ids)
    if key_position is not None:
        key_position = checked_position(key_position, pair.shape[1], "key_position")
    senders = [*writers_before(model.config, layer), ("resid", layer)]
    outputs, lds, answers = written(model, pair, senders)
    rows = [(outputs[s][0] - outputs[s][1], into) for s in senders for into in INPUTS]
    logits, weights = patched_rows(model, pair[1:], (layer, head), rows, batch_size, progress)
    runs = receiver_weights(model, pair, (layer, head))
    key = key_of(runs, key_position)
    effects = (difference(logits, answers) - lds[1]) / (lds[0] - lds[1])
    return PathGrid(
        receiver=(layer, head),
        senders=[node_name(s) for s in senders],
        effects=effects.view(len(senders), 3),
        attention=weights[:, key].view(len(senders), 3),
        attention_clean=float(runs[0, key]),
        attention_corrupted=float(runs[1, key]),
        key_position=key,
        clean_difference=float(lds[0]),
        corrupted_difference=float(lds[1]),
        clean_token=answers[0],
        corrupted_token=answers[1],
    )


def one_path(model, pair, delta, receiver, receiver_input, key_position, lds, answers) -> PathPatching:
    """The corrupted run with `delta` ((T, C)) added to the stream the receiver's input reads."""
    logits, weights = patched_rows(model, pair[1:], receiver, [(delta, receiver_input)], batch_size=1)
    runs = receiver_weights(model, pair, receiver)
    key = key_of(runs, key_position)
    patched = difference(logits, answers)[0]
    return PathPatching(
        effect=float((patched - lds[1]) / (lds[0] - lds[1])),
        attention_clean=float(runs[0, key]),
        attention_corrupted=float(runs[1, key]),
        attention_patched=float(weights[0, key]),
        key_position=key,
        clean_difference=float(lds[0]),
        corrupted_difference=float(lds[1]),
        patched_difference=float(patched),
    )


def checked_sender(model, sender, reader: tuple, name: str = "sender") -> tuple:
    sender = parse_node(sender, model.config, name)
    if sender[0] == "logits" or not writes_before(sender, reader):
        raise InstrumentError(
            f"The sender {node_name(sender)} writes nothing that {node_name(reader)} reads: give the embeddings, a "
            f"head or an MLP that comes before it, or the stream entering its layer."
        )
    return sender


def patch_path(
    model, clean_ids, corrupted_ids, sender, receiver: tuple[int, int] | str, receiver_input: str, key_position=None
) -> PathPatching:
    """Path patching: in the corrupted run, head receiver = (L2, H2) (or its name "L2.H2") computes its
    `receiver_input` ("q", "k" or "v") from corrupted_resid + (clean_sender - corrupted_sender) (the residual stream
    entering L2, normed by L2's own attn_norm); every other head, and its other two inputs, read the corrupted stream.
    Senders (a node name or tuple, see `nodes`): a head "L.H" / (L, H) / ("head", L, H) (its output through W_O[h]),
    "mlp L", "embed" (token + position embeddings), "resid L" (the whole stream entering layer L, so that "resid L2"
    feeds the clean stream itself).
    key_position defaults to the key the clean run's receiver weighs most from the last query."""
    receiver = checked_receiver(model, receiver, receiver_input)
    sender = checked_sender(model, sender, ("head", *receiver))
    pair = texts_pair(model, clean_ids, corrupted_ids)
    if key_position is not None:
        key_position = checked_position(key_position, pair.shape[1], "key_position")
    outputs, lds, answers = written(model, pair, [sender])
    delta = outputs[sender][0] - outputs[sender][1]
    return one_path(model, pair, delta, receiver, receiver_input, key_position, lds, answers)


def intermediate_change(model, corrupted, sender_delta, intermediate: tuple) -> torch.Tensor:
    """(T, C) how much what `intermediate` (a head or an MLP) writes changes in the corrupted run when the stream it
    reads carries `sender_delta` more: its own modules run once more on the patched stream (the head's layer's
    attn_norm and attention, or the MLP's mlp_norm and MLP), the run itself left as it is."""
    kind, layer, *head = intermediate
    block, n_head, found, busy = model.model.layers[layer], model.config.n_head, {}, []
    reading = block.attn_norm if kind == "head" else block.mlp_norm  # its pre-hook sees the stream the part reads

    def merged_of(module, args):
        found["merged"] = args[0]

    def patched_write(module, args):
        if busy:
            return None
        busy.append(True)
        try:
            if kind == "mlp":
                found["patched"] = block.mlp(block.mlp_norm(args[0] + sender_delta))
            else:
                with hooks((block.attn.out_proj, "pre", merged_of)):
                    block.attn(block.attn_norm(args[0] + sender_delta))
                found["patched"] = head_output(block.attn.out_proj, found.pop("merged"), head[0], n_head)
        finally:
            busy.pop()

    def actual_write(module, args, output=None):
        if not busy:
            found["actual"] = output if kind == "mlp" else head_output(module, args[0], head[0], n_head)

    site = (block.mlp, "post") if kind == "mlp" else (block.attn.out_proj, "pre")
    with hooks((reading, "pre", patched_write), (*site, actual_write)):
        last_logits(model, corrupted)
    return (found["patched"] - found["actual"])[0]


def patch_two_step(
    model, clean_ids, corrupted_ids, sender, intermediate, receiver: tuple[int, int] | str, receiver_input: str,
    key_position=None,
) -> PathPatching:  # fmt: skip
    """A two-step path, sender -> intermediate -> the receiver's input: in the corrupted run, the intermediate (a head
    "L.H", all three of its inputs, or an MLP "mlp L") reads the corrupted stream plus the sender's clean - corrupted
    difference; the change in what it writes then reaches the receiver's `receiver_input` alone (as `patch_path`
    feeds a sender). What 0.2 does for 1.1 through MLP 0: patch_two_step(model, clean, corrupted, "0.2", "mlp 0",
    (1, 1), "k")."""
    receiver = checked_receiver(model, receiver, receiver_input)
    intermediate = parse_node(intermediate, model.config, "intermediate")
    if intermediate[0] not in ("head", "mlp"):
        raise InstrumentError(
            f"The intermediate must be a head 'L.H' or an MLP 'mlp L', not {node_name(intermediate)}."
        )
    intermediate = checked_sender(model, intermediate, ("head", *receiver), "intermediate")
    sender = checked_sender(model, sender, intermediate)
    if sender[0] == "resid":
        raise InstrumentError("A two-step path starts at a part that writes (embed, a head, an MLP), not at resid L.")
    pair = texts_pair(model, clean_ids, corrupted_ids)
    if key_position is not None:
        key_position = checked_position(key_position, pair.shape[1], "key_position")
    outputs, lds, answers = written(model, pair, [sender])
    sender_delta = outputs[sender][0] - outputs[sender][1]
    delta = intermediate_change(model, pair[1:], sender_delta, intermediate)
    return one_path(model, pair, delta, receiver, receiver_input, key_position, lds, answers)


__all__ = ["INPUTS", "PathGrid", "PathPatching", "patch_path", "patch_paths", "patch_two_step"]
