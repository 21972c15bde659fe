"""Activation patching: which activations carry the answer. Clean activations are put back into a corrupted run (the
same number of tokens, another answer), and the logit difference LD = logit(clean answer) - logit(corrupted answer) at
the last position says how much of the clean answer they restore, one unit at a time:

- "output": each head's output at every position (layer x head); "position": each head's output at one position
  (layer x head x position); "q", "k", "v": each head's query, key or value at every position; "pattern": each head's
  attention weights (its output recomputed from the clean weights and the corrupted values);
- "residual": the residual stream entering each layer, at one position (layer x position).

Path patching (one sender into one head's input) is in `paths`.

Every patch is a hook on the model's own modules during a real, batched forward pass (`hooks`): nothing here
re-implements the forward pass.

Shapes: L layers, H heads, T tokens, C width, D = C // H, V vocabulary. Ids: a list of ints, or a (T,) or (1, T)
tensor. The model runs as it is: put it in eval mode (dropout off) first.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from minigpt.heads.errors import InstrumentError, checked_count, shortened, whole
from minigpt.heads.hooks import hooks
from minigpt.heads.runs import as_batch, last_logits

# ---- activation patching --------------------------------------------------------------------------------------------


@dataclass
class Patching:
    """Effects of patching clean activations into the corrupted run: 0 changes nothing, 1 restores the clean logit
    difference. LD = logit(clean_token) - logit(corrupted_token) at the last position."""

    effects: torch.Tensor  # (L, H) for heads, (L, H, T) for heads at a position, (L, T) for the residual stream
    clean_difference: float
    corrupted_difference: float
    clean_token: int  # the clean text's top-1 next token
    corrupted_token: int  # the corrupted text's


def texts_pair(model, clean_ids, corrupted_ids) -> torch.Tensor:
    """(2, T): the clean and corrupted ids, which patching needs of the same length, each a token of `model`'s."""
    vocab_size = model.config.vocab_size
    clean = as_batch(clean_ids, vocab_size, "clean_ids")
    corrupted = as_batch(corrupted_ids, vocab_size, "corrupted_ids")
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


SITES = ("output", "position", "q", "k", "v", "pattern", "residual")


def clean_run(model, pair: torch.Tensor, weights: bool = True) -> tuple[dict, torch.Tensor, tuple[int, int]]:
    """One pass over (clean, corrupted): the clean row's merged heads, block inputs and qkv projections ((L, T, C)
    or (L, T, 3C) each) and with `weights` its attention weights (L, H, T, T: the eager path, slower), the LDs (2,)
    and the two answers."""
    layers, seen = model.model.layers, {"merged": [], "resid": [], "qkv": []}

    def keep(name, from_output=False):
        return lambda module, args, output=None: seen[name].append((output if from_output else args[0])[0].detach())

    registrations = [(block.attn.out_proj, "pre", keep("merged")) for block in layers]
    registrations += [(block, "pre", keep("resid")) for block in layers]
    registrations += [(block.attn.qkv_proj, "post", keep("qkv", from_output=True)) for block in layers]
    with hooks(*registrations):
        logits, out = last_logits(model, pair, output_attentions=weights)
    answers = answers_of(logits)
    clean = {name: torch.stack(values) for name, values in seen.items()}
    if weights:
        clean["pattern"] = torch.stack([layer_weights[0] for layer_weights in out.attentions])  # (L, H, T, T)
    return clean, difference(logits, answers), answers


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


def unit_shape(config, site: str, length: int) -> tuple[int, ...]:
    """The units patched one at a time: (L, H) heads, (L, H, T) heads at a position, (L, T) stream positions."""
    L, H = config.n_layer, config.n_head
    return {"position": (L, H, length), "residual": (L, length)}.get(site, (L, H))


def head_hooks(model, clean: dict, site: str, chunk: torch.Tensor) -> list:
    """The hooks that put the clean run's part of each patched head back, for `chunk` ((b, L, H) or (b, L, H, T)
    masks): out_proj's input slice ("output", "position"), qkv_proj's output slice ("q", "k", "v"), or out_proj's
    input slice recomputed as clean weights @ corrupted values ("pattern")."""
    layers, H, C = model.model.layers, model.config.n_head, model.config.n_embd
    per_position = chunk if site == "position" else chunk[..., None]  # (b, L, H, T or 1)
    values = {}

    def merged_hook(layer):
        def hook(module, args):
            merged = args[0].unflatten(-1, (H, -1))  # (b, T, H, D)
            if site == "pattern":  # each head's output from the clean weights and this run's values
                v = values.pop(layer)[..., 2 * C :].unflatten(-1, (H, -1)).transpose(1, 2)  # (b, H, T, D)
                replacement = (clean["pattern"][layer] @ v).transpose(1, 2)  # (b, T, H, D)
            else:
                replacement = clean["merged"][layer].unflatten(-1, (H, -1))  # (T, H, D)
            patched = per_position[:, layer].transpose(1, 2)[..., None]  # (b, T or 1, H, 1)
            return (torch.where(patched, replacement, merged).flatten(-2), *args[1:])

        return hook

    def qkv_hook(layer):
        def hook(module, args, output):
            if site == "pattern":
                values[layer] = output
                return None
            first = "qkv".index(site) * C
            part = output[..., first : first + C].unflatten(-1, (H, -1))  # (b, T, H, D)
            clean_part = clean["qkv"][layer][..., first : first + C].unflatten(-1, (H, -1))
            patched = torch.where(chunk[:, layer, None, :, None], clean_part, part).flatten(-2)
            return torch.cat([output[..., :first], patched, output[..., first + C :]], dim=-1)

        return hook

    touched = [layer for layer in range(len(layers)) if chunk[:, layer].any()]
    found = []
    if site in ("output", "position", "pattern"):
        found += [(layers[layer].attn.out_proj, "pre", merged_hook(layer)) for layer in touched]
    if site in ("q", "k", "v", "pattern"):
        found += [(layers[layer].attn.qkv_proj, "post", qkv_hook(layer)) for layer in touched]
    return found


def residual_hooks(model, clean: dict, chunk: torch.Tensor) -> list:
    """The hooks that put the clean stream back entering each patched layer, at the patched positions."""
    layers = model.model.layers

    def replace_positions(layer):  # the block's input, (b, T, C)
        return lambda module, args: (torch.where(chunk[:, layer, :, None], clean["resid"][layer], args[0]), *args[1:])

    return [(layers[layer], "pre", replace_positions(layer)) for layer in range(len(layers)) if chunk[:, layer].any()]


def patching(model, clean_ids, corrupted_ids, site: str, progress, batch_size, units=None) -> Patching:
    """Each unit of `site` (SITES) patched alone, in batched runs of the corrupted text; `units` (index tuples into
    `unit_shape`): those alone, their effects (N,) in that order."""
    if site not in SITES:
        raise InstrumentError(f"The patched part must be one of {', '.join(SITES)}, not {site!r}.")
    batch_size = checked_count(batch_size, "batch_size", "the patched runs a forward pass takes at once")
    pair = texts_pair(model, clean_ids, corrupted_ids)
    clean, lds, answers = clean_run(model, pair, weights=site == "pattern")
    shape = unit_shape(model.config, site, pair.shape[1])
    if units is None:
        masks = torch.eye(math.prod(shape), dtype=torch.bool, device=model.device).view(-1, *shape)  # row i: unit i
    else:
        masks = unit_masks(shape, units, model.device)

    def hooks_for(chunk):
        return residual_hooks(model, clean, chunk) if site == "residual" else head_hooks(model, clean, site, chunk)

    patched = patched_differences(model, pair[1:], masks, hooks_for, answers, progress, batch_size)
    effects = (patched - lds[1]) / (lds[0] - lds[1])  # the clean LD is > the corrupted one: answers differ
    return Patching(effects.view(shape) if units is None else effects, float(lds[0]), float(lds[1]), *answers)


def unit_masks(shape: tuple[int, ...], units, device) -> torch.Tensor:
    """(N, *shape) one mask per unit, each patching that unit alone; a unit outside `shape` refused."""
    masks = torch.zeros(len(units), *shape, dtype=torch.bool, device=device)
    for row, unit in enumerate(units):
        unit = tuple(whole(i, "units") for i in (unit if hasattr(unit, "__iter__") else (unit,)))
        if len(unit) != len(shape) or not all(0 <= i < n for i, n in zip(unit, shape)):
            raise InstrumentError(
                f"units holds {shortened(unit)}, outside the patched units' shape {tuple(shape)}: give each unit as an "
                "index tuple of that shape."
            )
        masks[(row, *unit)] = True
    return masks


def patch_units(model, clean_ids, corrupted_ids, site: str, units, batch_size: int = 32) -> Patching:
    """Exact patching of the chosen units alone (`site` one of SITES; each unit an index tuple of its result's shape:
    (layer, head) for a head's part, (layer, head, position), (layer, position) for the residual stream): effects
    (N,), each the number `patch_heads`, `patch_heads_by_position` or `patch_residual` gives that unit, for N runs
    instead of all. What checks an estimate (`edge_attribution.estimated_patching`) where a learner asks."""
    return patching(model, clean_ids, corrupted_ids, site, None, batch_size, units)


def patch_heads(
    model, clean_ids, corrupted_ids, progress: Callable[[float], None] | None = None, batch_size: int = 32,
    part: str = "output",
) -> Patching:  # fmt: skip
    """(L, H) effect of patching one part of each head from the clean run into the corrupted run, at every position:
    `part` "output" (out_proj's input slice of that head, as `heads_ablated` replaces it with zeros), "q", "k", "v"
    (its slice of qkv_proj's output), or "pattern" (its attention weights). Raises InstrumentError (a ValueError)
    for texts of different token counts or with the same top-1 answer."""
    if part not in ("output", "q", "k", "v", "pattern"):
        raise InstrumentError(f"A head's patched part is 'output', 'q', 'k', 'v' or 'pattern', not {part!r}.")
    return patching(model, clean_ids, corrupted_ids, part, progress, batch_size)


def patch_heads_by_position(
    model, clean_ids, corrupted_ids, progress: Callable[[float], None] | None = None, batch_size: int = 32
) -> Patching:
    """(L, H, T) effect of patching each head's output at one position from the clean run into the corrupted run."""
    return patching(model, clean_ids, corrupted_ids, "position", progress, batch_size)


def patch_residual(
    model, clean_ids, corrupted_ids, progress: Callable[[float], None] | None = None, batch_size: int = 32
) -> Patching:
    """(L, T) effect of patching the residual stream entering each layer at each position (the block's input) from
    the clean run into the corrupted run."""
    return patching(model, clean_ids, corrupted_ids, "residual", progress, batch_size)


__all__ = ["SITES", "Patching", "patch_heads", "patch_heads_by_position", "patch_residual", "patch_units"]
