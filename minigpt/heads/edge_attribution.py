"""Attribution patching: the effect of patching estimated from gradients, one backward pass instead of one run per
patched part.

- Edge attribution patching (EAP, Syed et al. 2023): every edge s -> r of the graph (`graph`) scored at once, in
  EAP-IG's convention (Hanna et al. 2024, github.com/hannamw/EAP-IG): score(s -> r) = (reference_out_s - clean_out_s)
  . d metric / d input_r, summed over positions and prompts and divided by the number of prompts, the gradient taken
  at the clean run: the first-order estimate of how the metric changes when the edge is ablated. An edge whose
  ablation lowers the metric (one the behaviour needs) scores negative; circuits are ranked by the size. The reference
  is what ablation puts in: the corrupted run's outputs (the papers'), or the prompts' mean outputs for mean ablation
  (the mean outputs; EAP-IG's code does the same for its "mean" intervention). The metric is the task's, itself a
  mean over the prompts (as in EAP-IG's notebooks); EAP-IG's code divides the summed scores by the number of prompts
  once more, and so does this. Each receiver reads its own copy of the stream, stream + a zero tensor that requires
  grad, so that one backward pass gives d metric / d input_r for every receiver r; the zeros add nothing, and the
  pass's values are the model's.
- EAP with integrated gradients (EAP-IG, Hanna et al. 2024, its "inputs" variant): the same with the gradient averaged
  over `steps` runs whose input embeddings (the first block's input) lie between the reference run's and the clean
  run's, reference + k / steps (clean - reference) for k = 0 .. steps - 1, as EAP-IG's code takes them (the first at
  the reference run, none at the clean run), which makes the scores faithful where the metric bends between the two
  runs.
- `attribution_patching`: each head's output at each position, in the normalised units of exact patching
  (`patching.patch_heads_by_position`): to first order from one forward pass on each text and one backward pass, then
  its `exact_top` largest cells patched exactly (one batched run), since first order underestimates the top cells up
  to 30x where attention saturates (docs/circuits.md); `estimated_patching` gives, from the same passes, the stream
  entering each layer at each position (`patching.patch_residual`) and each head at every position
  (`patching.patch_heads`) too.

Gradients are taken with `torch.autograd.grad` for the zero tensors alone: the model's parameters get no `.grad`.
"""

from dataclasses import dataclass

import torch

from minigpt.heads.circuit_tasks import Task
from minigpt.heads.errors import InstrumentError, checked_count, shortened
from minigpt.heads.graph import Graph, graph_hooks
from minigpt.heads.hooks import Hook, hooks
from minigpt.heads.patching import answers_of, head_hooks, patched_differences, texts_pair, unit_masks

METHODS = ("eap", "eap-ig")


def recorded_outputs(model, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One plain pass over (N, T) prompts: every sender's output (S, N, T, C), in the graph's order, and the logits
    (N, T, V)."""
    written = []
    with hooks(*graph_hooks(model, write=written.append)), torch.no_grad():
        logits = model(input_ids=ids.to(model.device), use_cache=False).logits
    return torch.cat(written), logits


def graph_gradients(model, graph: Graph, ids: torch.Tensor, task: Task, embeds: torch.Tensor | None = None):
    """One forward and one backward pass over (N, T) prompts with every receiver reading stream + its own zeros:
    the metric (float), d metric / d input_r for every receiver (R, N, T, C) and the pass's logits (N, T, V),
    detached. `embeds` (N, T, C), when given, replaces the first block's input (the embeddings)."""
    N, T = ids.shape
    shape = (len(graph.receivers), N, T, model.config.n_embd)
    zeros = torch.zeros(shape, device=model.device, dtype=model.dtype, requires_grad=True)

    def read(stream, receivers, before):
        return stream[None] + zeros[receivers]

    registrations = graph_hooks(model, read=read)
    if embeds is not None:  # before the hooks that read the first block's input
        registrations.insert(0, Hook(model.model.layers[0], "pre", lambda m, args: (embeds, *args[1:]), True))
    with hooks(*registrations), torch.enable_grad():
        logits = model(input_ids=ids.to(model.device), use_cache=False).logits
        value = task.measure(logits)
        (gradients,) = torch.autograd.grad(value, zeros)
    return float(value.detach()), gradients, logits.detach()


def checked_method(method: str, steps: int) -> None:
    if method not in METHODS:
        raise InstrumentError(f"method is 'eap' or 'eap-ig', not {shortened(method)}.")
    if method == "eap-ig":
        checked_count(steps, "steps", "the interpolated runs EAP-IG averages gradients over")


def edge_scores(model, graph: Graph, task: Task, clean_out, reference_out, method: str, steps: int) -> torch.Tensor:
    """(S, R) every edge's score in EAP-IG's convention (0 where there is no edge): (reference_out_s - clean_out_s) .
    d metric / d input_r, summed over positions and prompts and divided by the number of prompts; the gradient at the
    clean run ("eap", Syed et al.) or averaged over the `steps` runs on embeddings reference + k / steps (clean -
    reference), k = 0 .. steps - 1 ("eap-ig", EAP-IG's inputs variant). The reference is what ablation puts in (S, N
    or 1, T, C): the corrupted run's outputs, or the prompts' mean outputs for mean ablation, so that an edge scores
    what ablating it changes: negative where the ablation lowers the metric."""
    checked_method(method, steps)
    if method == "eap":
        gradients = graph_gradients(model, graph, task.clean, task)[1]
    else:
        start = reference_out[0].expand_as(clean_out[0])  # the embeddings (N, T, C)
        way = clean_out[0] - start
        # The runs read the interpolated embeddings; the corrupted ids they are given only set the prompts' shape.
        runs = (graph_gradients(model, graph, task.corrupted, task, start + k / steps * way)[1] for k in range(steps))
        gradients = sum(runs) / steps
    scores = torch.einsum("sntc,rntc->sr", reference_out - clean_out, gradients) / len(task.clean)
    return torch.where(graph.exists.to(scores.device), scores, 0.0).cpu()


# ---- attribution patching of each head at each position -------------------------------------------------------------
# First order ranks the cells well but misjudges the size of the ones that matter: where a patch restores the answer
# whole, the logit difference bends on the way from the corrupted part to the clean one (a softmax saturates, the
# layer norms and MLPs after the head are far from linear), and the gradient at the corrupted end reads the wrong
# slope. On the specimen's Bexley pair 1.1 at the last position is estimated at 0.34 and restores 1.00 (the slope along
# its own path goes 0.34 -> 1.39 -> 0.60); 0.2 at position 9 of the Zorbak pair at 0.03 for 0.97. AtP*'s fix
# (Kramar et al. 2024: the attention patterns recomputed for changed queries and keys) cannot reach the first, which
# no later attention reads, and moved the second to 0.04 only (measured: the saturation is after 1.1); integrated
# gradients along each cell's own path do (within 5% with 4 steps) but cost 4
# forward and backward passes a cell, more than patching it. So the cells with the largest estimates are patched
# exactly (`exact_top`, one forward pass each, batched): on every pair the tests and docs use, the 3 largest exact
# cells are among the 3 largest estimates.
EXACT_TOP = 3


@dataclass
class EstimatedPatching:
    """Attribution patching's estimates, in exact patching's units (`patching.Patching`): 0 changes nothing, 1
    restores the clean logit difference."""

    position: torch.Tensor  # (L, H, T) each head's output at one position (`patch_heads_by_position`)
    residual: torch.Tensor  # (L, T) the stream entering each layer at one position (`patch_residual`)
    clean_difference: float
    corrupted_difference: float
    clean_token: int
    corrupted_token: int
    first_order: torch.Tensor | None = None  # (L, H, T) every cell's first-order estimate, exact_cells' too
    exact_cells: list | None = None  # [(layer, head, position)]: `position`'s cells patched exactly, largest first

    @property
    def heads(self) -> torch.Tensor:
        """(L, H) each head's output at every position (`patch_heads`): to first order, the sum of its positions'."""
        return (self.position if self.first_order is None else self.first_order).sum(-1)


def inputs_recorded(model, ids: torch.Tensor, zeros: torch.Tensor | None = None):
    """A pass over one text (1, T) keeping each layer's input and merged heads (the block's and out_proj's inputs,
    (2, L, T, C)); with `zeros` ((2, L, T, C), requiring grad) each of them + its zeros goes on, so that their gradient
    is theirs. Gives the last position's logits (V,) (with their graph when `zeros` are given) and the inputs."""
    seen = {}

    def kept(site, layer):
        def hook(module, args):
            seen[site, layer] = args[0][0].detach()
            return None if zeros is None else (args[0] + zeros[site, layer], *args[1:])

        return hook

    layers = model.model.layers
    registrations = [(block, "pre", kept(0, layer)) for layer, block in enumerate(layers)]
    registrations += [(block.attn.out_proj, "pre", kept(1, layer)) for layer, block in enumerate(layers)]
    with hooks(*registrations), torch.set_grad_enabled(zeros is not None):
        logits = model(input_ids=ids.to(model.device), use_cache=False, logits_to_keep=1).logits[0, -1]
    inputs = torch.stack([torch.stack([seen[site, layer] for layer in range(len(layers))]) for site in (0, 1)])
    return logits.float(), inputs


def estimated_patching(model, clean_ids, corrupted_ids, exact_top: int = EXACT_TOP) -> EstimatedPatching:
    """The effect of patching, estimated from one forward pass on each text and one backward pass: (d LD / d part at
    the corrupted run) . (clean part - corrupted part), / (LD_clean - LD_corrupted), LD the logit difference between
    the clean and corrupted texts' top-1 answers at the last position; the parts are each head's output at each
    position and the stream entering each layer at each position. The `exact_top` cells of each head at each position
    with the largest estimates (by size) are then patched exactly (`exact_top` more forward passes, in one batch;
    0: first order alone), their first-order estimates kept in `first_order`. Raises InstrumentError for texts of
    different lengths or with the same answer."""
    exact_top = checked_count(exact_top, "exact_top", "the cells with the largest estimates patched exactly", 0)
    pair = texts_pair(model, clean_ids, corrupted_ids)
    H = model.config.n_head
    clean_logits, clean_inputs = inputs_recorded(model, pair[:1])
    zeros = torch.zeros(clean_inputs.shape, device=model.device, dtype=clean_inputs.dtype, requires_grad=True)
    corrupted_logits, corrupted_inputs = inputs_recorded(model, pair[1:], zeros)
    answers = answers_of(torch.stack([clean_logits.detach().cpu(), corrupted_logits.detach().cpu()]))
    corrupted_ld = corrupted_logits[answers[0]] - corrupted_logits[answers[1]]
    (gradients,) = torch.autograd.grad(corrupted_ld, zeros)  # (2, L, T, C): d LD / d each input
    products = gradients * (clean_inputs - corrupted_inputs)
    clean_ld, corrupted_ld = float(clean_logits[answers[0]] - clean_logits[answers[1]]), float(corrupted_ld.detach())
    # A head's output is its merged slice through its columns of out_proj: the dot product over its output equals
    # the dot product over its slice, gradient . difference.
    position = products[1].unflatten(-1, (H, -1)).sum(-1).transpose(1, 2)  # (L, H, T)
    scale = clean_ld - corrupted_ld
    first_order = (position / scale).float().cpu()
    found = EstimatedPatching(
        first_order.clone(), (products[0].sum(-1) / scale).float().cpu(), clean_ld, corrupted_ld, *answers,
        first_order=first_order, exact_cells=[],
    )  # fmt: skip
    if exact_top:
        patched_top(model, pair, clean_inputs[1], found, exact_top)
    return found


def patched_top(model, pair: torch.Tensor, merged: torch.Tensor, found: EstimatedPatching, top: int) -> None:
    """The `top` cells of `found.position` with the largest first-order estimates (by size) patched exactly, in place:
    each head's clean merged output (`merged`, (L, T, C)) put back at one position of a corrupted run, as
    `patch_heads_by_position` does, in one batch of `top` runs."""
    shape = found.first_order.shape
    indices = found.first_order.flatten().abs().topk(min(top, found.first_order.numel())).indices
    cells = [tuple(int(i) for i in torch.unravel_index(index, shape)) for index in indices]
    masks = unit_masks(shape, cells, model.device)
    answers = (found.clean_token, found.corrupted_token)
    hooks_for = lambda chunk: head_hooks(model, {"merged": merged}, "position", chunk)  # noqa: E731
    patched = patched_differences(model, pair[1:], masks, hooks_for, answers, None, len(cells))
    scale = found.clean_difference - found.corrupted_difference
    for cell, value in zip(cells, ((patched - found.corrupted_difference) / scale).tolist()):
        found.position[cell] = value
    found.exact_cells = cells


def attribution_patching(model, clean_ids, corrupted_ids, exact_top: int = EXACT_TOP) -> torch.Tensor:
    """(L, H, T) the estimated effect of patching each head's output at each position from the clean text into the
    corrupted one, in exact patching's units (`patch_heads_by_position`): `estimated_patching`'s `position`, its
    `exact_top` largest cells patched exactly (0: every cell first order, Syed et al.'s attribution patching)."""
    return estimated_patching(model, clean_ids, corrupted_ids, exact_top).position


__all__ = [
    "METHODS",
    "EXACT_TOP",
    "EstimatedPatching",
    "attribution_patching",
    "edge_scores",
    "estimated_patching",
    "graph_gradients",
    "recorded_outputs",
]
