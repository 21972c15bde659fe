"""Head ablation: a switch on the model that takes chosen heads out of its forward pass, what it puts in (zeros, each
head's mean output, another prompt's outputs), the text's pass again with heads ablated, and each head's importance
(the loss with it alone ablated), computed from the model's own modules.

Ablation is a switch on the model, `heads_ablated(model, ablate, means)`: a forward pre-hook on each chosen layer's
`attn.out_proj` replaces the chosen heads' D-wide slices of the merged heads (out_proj's input, (B, T, H * D)) with
zeros or with their mean over the text's positions. The hook sits after the attention function, so it acts the same
whichever attention implementation runs (eager, sdpa, flash), with the KV cache too; it needs no change to the model's
forward and no kwarg threaded through `generate()`. The server shares one model object between request threads, so the
hook acts on the forward pass of the thread that switched it on only (`hooks`).

Shapes: B batch, L layers, H heads, T tokens, C width, D = C // H, V vocabulary.
"""

import contextlib
from types import SimpleNamespace

import torch
from torch.nn import functional as F

from minigpt.heads.errors import InstrumentError, checked_count, checked_ids, shortened
from minigpt.heads.hooks import hooks
from minigpt.heads.nodes import head_of
from minigpt.heads.recorded_pass import ForwardPass, run_forward_pass

ABLATION_MODES = ("zero", "mean", "resample")


# ---- heads as a mask ------------------------------------------------------------------------------------------------


def head_mask(heads: list[tuple[int, int]], n_layer: int, n_head: int) -> torch.Tensor:
    """(L, H) bool, True for the heads to ablate."""
    mask = torch.zeros(n_layer, n_head, dtype=torch.bool, device="cpu")
    shape = SimpleNamespace(n_layer=n_layer, n_head=n_head)
    for head in heads:
        mask[head_of(head, shape, "heads")] = True
    return mask


def check_mode(mode: str) -> str:
    if mode not in ABLATION_MODES:
        raise InstrumentError(f"The ablation mode must be 'zero', 'mean' or 'resample', got {shortened(mode)}.")
    return mode


# ---- the ablation switch -------------------------------------------------------------------------------------------


def head_means(recorded: ForwardPass) -> torch.Tensor:
    """(L, C): each layer's merged heads averaged over the text's positions, what mean ablation puts in."""
    return recorded.merged_heads.mean(dim=1)


@contextlib.contextmanager
def heads_ablated(model, ablate: torch.Tensor, means: torch.Tensor | None = None):
    """Within the block, the calling thread's forward passes of `model` run with the heads in `ablate` switched off.

    `ablate` is (L, H) bool, or (B, L, H) for a different set of heads per batch row. A head switched off outputs
    zeros (`means` None) or its slice of `means`, what ablation puts in (see `ablation_values`): (L, C) the same at
    every position (mean ablation, e.g. `head_means`), (L, T, C) per position, or (B, L, T, C) per batch row
    (resample ablation: another text's activations). Its D numbers of out_proj's input are replaced, so the block's
    output and everything after it see the head gone. Nothing to ablate, no hook: the model runs exactly as it does
    without this."""
    config = model.config
    n_head, head_dim = config.n_head, config.head_dim
    per_row = ablate if ablate.dim() == 3 else ablate[None]  # (B or 1, L, H)

    def switch_off(layer: int):
        off = per_row[:, layer][:, None, :, None]  # (B or 1, 1, H, 1): broadcast over positions and head dims
        if means is None:
            replacement = torch.tensor(0.0, device="cpu")
        else:  # (C,), (T, C) or (B, T, C) -> (..., H, D)
            replacement = (means[:, layer] if means.dim() == 4 else means[layer]).unflatten(-1, (n_head, head_dim))

        def hook(module, args):
            merged = args[0].unflatten(-1, (n_head, head_dim))  # (B, T, C) -> (B, T, H, D)
            kept = torch.where(off.to(merged.device), replacement.to(merged.device, merged.dtype), merged)
            return (kept.flatten(-2), *args[1:])  # (B, T, C)

        return hook

    layers = model.model.layers
    registrations = [
        (layers[i].attn.out_proj, "pre", switch_off(i)) for i in range(config.n_layer) if per_row[:, i].any()
    ]
    with hooks(*registrations):
        yield


def merged_heads_of(model, prompts: torch.Tensor) -> torch.Tensor:
    """(N, L, T, C) every layer's merged heads (out_proj's input) on N prompts of T tokens, one batched pass."""
    seen = []
    with hooks(
        *[(block.attn.out_proj, "pre", lambda m, args: seen.append(args[0].detach())) for block in model.model.layers]
    ):
        with torch.no_grad():
            model(input_ids=prompts.to(model.device), use_cache=False, logits_to_keep=1)
    return torch.stack(seen, dim=1)


def ablation_values(model, prompts: torch.Tensor, mode: str, seed: int = 0) -> torch.Tensor | None:
    """What `heads_ablated` puts in for `mode` on a prompt set (N, T): "zero" None; "mean" (L, C), every head's output
    averaged over the prompts and their positions; "resample" (N, L, T, C), each prompt's heads given another
    prompt's outputs (a seeded shuffle that moves every prompt: a run of prompt i reads prompt j's heads, j != i)."""
    if check_mode(mode) == "zero":
        return None
    prompts = checked_ids(prompts, model.config.vocab_size, "prompts")
    merged = merged_heads_of(model, prompts)  # (N, L, T, C)
    if mode == "mean":
        return merged.mean(dim=(0, 2))
    if len(prompts) < 2:
        raise InstrumentError("Resample ablation takes another prompt's activations: give at least two prompts.")
    shift = 1 + int(torch.randint(len(prompts) - 1, (1,), generator=torch.Generator().manual_seed(seed), device="cpu"))
    order = torch.randperm(len(prompts), generator=torch.Generator().manual_seed(seed), device="cpu")
    source = torch.empty_like(order)
    source[order] = order.roll(shift)  # a derangement: prompt order[k] reads order[k - shift]
    return merged[source]


# ---- the text ablated, and each head's importance --------------------------------------------------------------------


def ablated_pass(model, recorded: ForwardPass, heads: list[tuple[int, int]], mode: str, values=None) -> ForwardPass:
    """The text's forward pass again (the same eager path as `recorded`), with `heads` ablated: "zero", "mean" (each
    head's output averaged over the text's positions, or `values`) or "resample" (`values`: what `ablation_values`
    gives for a prompt set the text leads, its first row)."""
    config = model.config
    if check_mode(mode) == "resample" and values is None:
        raise InstrumentError("Resample ablation puts in another prompt's activations: pass them as values.")
    means = (head_means(recorded) if mode == "mean" else None) if values is None else values
    with heads_ablated(model, head_mask(heads, config.n_layer, config.n_head), means):
        return run_forward_pass(model, list(recorded.input_ids))


def one_head_each(L: int, H: int) -> torch.Tensor:
    """(1 + L * H, L, H) bool masks: row 0 ablates nothing, row 1 + l * H + h head h of layer l alone."""
    each = torch.eye(L * H, dtype=torch.bool, device="cpu").view(-1, L, H)
    return torch.cat([torch.zeros(1, L, H, dtype=torch.bool, device="cpu"), each])


def losses_per_row(model, ids: list[int], ablate: torch.Tensor, means, budget_bytes: int = 1 << 28) -> torch.Tensor:
    """(B, T - 1) per-token losses of `ids`, row b run with the heads ablate[b] (B, L, H) off, in batches whose
    logits stay within `budget_bytes`."""
    targets = torch.tensor(ids[1:], device=model.device)  # (T - 1,)
    rows_per_batch = max(1, budget_bytes // (len(ids) * model.config.vocab_size * 4))
    losses = []
    for chunk in ablate.split(rows_per_batch):
        input_ids = torch.tensor([ids], device=model.device).expand(len(chunk), -1)  # (b, T)
        with heads_ablated(model, chunk, means), torch.no_grad():
            logits = model(input_ids=input_ids, use_cache=False).logits[:, :-1].float()  # (b, T - 1, V)
        losses.append(F.cross_entropy(logits.transpose(1, 2), targets.expand(len(chunk), -1), reduction="none"))
    return torch.cat(losses)  # (B, T - 1)


# Work, in multiply-adds' worth of time on one CPU core (float32), measured on this project's 2-core machine by
# bench/bench_head_finder.py: it turns work into seconds for the bounds below and for heads.metrics' measure.


def head_importance(
    model, recorded: ForwardPass, mode: str = "zero", values=None, tokens: int | None = None
) -> tuple[torch.Tensor, float]:
    """(L, H) mean loss over the text with each head alone ablated, minus the plain model's, and the plain loss.
    `mode` "zero", "mean" (over the text's positions) or "resample" (`values`: (1, L, T, C), another prompt's heads).
    `tokens`: over the text's first `tokens` tokens alone (at least 2), which bounds the work (the demo's server sets
    it); None: the whole text.

    One batched forward pass (the model's own attention implementation): row 0 ablates nothing (the reference, run in
    the same batch so that both sides are computed alike), row 1 + l * H + h ablates head h of layer l."""
    L, H = model.config.n_layer, model.config.n_head
    if len(recorded.input_ids) < 2:
        raise InstrumentError("The text is empty: head importance needs at least one token after the start token.")
    ablate = one_head_each(L, H)
    if check_mode(mode) == "resample" and values is None:
        raise InstrumentError("Resample ablation puts in another prompt's activations: pass them as values.")
    length = len(recorded.input_ids)
    if tokens is not None:
        length = min(length, checked_count(tokens, "tokens", "the text's first tokens measured", least=2))
    ids = list(recorded.input_ids)[:length]
    means = (head_means(recorded) if mode == "mean" else None) if values is None else values[..., :length, :]
    losses = losses_per_row(model, ids, ablate, means).mean(dim=1)  # (1 + L * H,)
    return (losses[1:] - losses[0]).view(L, H), float(losses[0])


__all__ = [
    "ABLATION_MODES",
    "ablated_pass",
    "ablation_values",
    "check_mode",
    "head_importance",
    "head_mask",
    "head_means",
    "heads_ablated",
    "losses_per_row",
    "one_head_each",
]
