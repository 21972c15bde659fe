"""Exact runs of a circuit (see `discovery`): the setting of a task (each sender's ablated outputs, the metric of each
prompt for the model and for the base the faithfulness is normalised against), one run of a circuit, its faithfulness
over a prompt set and over each prompt, and the prompt sets a circuit is checked on besides its own (`held_out_tasks`).

An exact run of a circuit (a set of kept edges) runs the clean prompts with every receiver reading, instead of the
stream, the stream less, over its dropped edges, (sender's output - its ablated output). Ablated outputs: "mean", each
sender's output averaged over the prompt set (or a separate set of the same length) at each position; "corrupted", its
output on the prompt's corrupted prompt.

faithfulness = (metric(circuit) - metric(base)) / (metric(model) - metric(base)), base: every edge ablated
("ablated") or the plain run on the corrupted prompts ("corrupted", as EAP-IG's code normalises).
"""

from dataclasses import dataclass

import torch

from minigpt.heads.circuit_tasks import NoDifference, Task, as_prompts, induction_task, task_of
from minigpt.heads.edge_attribution import recorded_outputs
from minigpt.heads.errors import InstrumentError, shortened
from minigpt.heads.graph import Graph, graph_hooks, graph_of
from minigpt.heads.hooks import hooks

ABLATIONS = ("mean", "corrupted")

NORMALISATIONS = ("ablated", "corrupted")


@dataclass
class Setting:
    """What exact runs of one task need: the graph, the prompts, the ablated outputs (S, 1 or N, T, C), the metric of
    each prompt (N,) for the model and for the baseline the faithfulness is normalised against (every edge ablated,
    or the plain run on the corrupted prompts), and the passes run so far."""

    graph: Graph
    task: Task
    ablated: torch.Tensor
    model_each: torch.Tensor = None
    ablated_each: torch.Tensor = None
    base_each: torch.Tensor = None
    forward_passes: int = 0

    @property
    def model_metric(self) -> float:
        return float(self.model_each.mean())

    @property
    def ablated_metric(self) -> float:
        return float(self.ablated_each.mean())

    @property
    def base_metric(self) -> float:
        return float(self.base_each.mean())


def circuit_logits(model, setting: Setting, kept: torch.Tensor) -> torch.Tensor:
    """(N, T, V) the logits of one exact run of the circuit `kept` ((S, R) bool) on the clean prompts."""
    graph, written = setting.graph, []
    dropped = (graph.exists & ~kept.cpu()).to(model.device, setting.ablated.dtype)

    def read(stream, receivers, before):
        away = torch.cat(written)[:before] - setting.ablated[:before]  # (s, N, T, C): output - ablated output
        return stream[None] - torch.einsum("sr,sntc->rntc", dropped[:before, receivers], away)

    with hooks(*graph_hooks(model, read=read, write=written.append)), torch.no_grad():
        logits = model(input_ids=setting.task.clean.to(model.device), use_cache=False).logits
    setting.forward_passes += 1
    return logits


def circuit_each(model, setting: Setting, kept: torch.Tensor) -> torch.Tensor:
    """(N,) the metric of each prompt in one exact run of the circuit `kept` ((S, R) bool)."""
    return setting.task.measure_each(circuit_logits(model, setting, kept)).detach().cpu()


def circuit_metric(model, setting: Setting, kept: torch.Tensor) -> float:
    """The metric of one exact run of the circuit `kept` ((S, R) bool)."""
    return float(circuit_each(model, setting, kept).mean())


def normalised(setting: Setting, found: float) -> float:
    """(metric(circuit) - metric(base)) / (metric(model) - metric(base)), base: every edge ablated or the corrupted
    run, as the setting was made."""
    return (found - setting.base_metric) / (setting.model_metric - setting.base_metric)


def faithfulness_of(model, setting: Setting, kept: torch.Tensor) -> float:
    """(metric(circuit) - metric(base)) / (metric(model) - metric(base)), over the prompt set."""
    return normalised(setting, circuit_metric(model, setting, kept))


def checked_ablation(ablation: str) -> None:
    if ablation not in ABLATIONS:
        raise InstrumentError(f"ablation is 'mean' or 'corrupted', not {shortened(ablation)}.")


def checked_normalise(normalise: str) -> None:
    if normalise not in NORMALISATIONS:
        raise InstrumentError(
            "normalise is 'ablated' (against every edge ablated) or 'corrupted' (against the plain run on the "
            f"corrupted prompts, as EAP-IG's code does), not {shortened(normalise)}."
        )


def mean_outputs(model, task: Task, mean_ids) -> tuple[torch.Tensor, int]:
    """(S, 1, T, C) each sender's mean output at each position over `mean_ids` (a separate prompt set of the task's
    length), and the passes it took (None: the task's own prompts, whose outputs the caller has: 0)."""
    ids = as_prompts(mean_ids, model.config.vocab_size, "mean_ids")
    if ids.shape[1] != task.clean.shape[1]:
        raise InstrumentError(
            f"mean_ids are {ids.shape[1]} tokens long and the prompts {task.clean.shape[1]}: mean ablation puts in "
            "each sender's mean output at each position, so the separate set needs the prompts' length."
        )
    return recorded_outputs(model, ids)[0].mean(dim=1, keepdim=True), 1


def setting_of(
    model, task: Task, ablation: str, normalise: str = "ablated", mean_ids=None
) -> tuple[Setting, torch.Tensor]:
    """The setting of a task (one or two recorded passes, three with a separate mean set, and one exact run with
    every edge ablated), and every sender's clean outputs (S, N, T, C)."""
    checked_ablation(ablation)
    checked_normalise(normalise)
    clean_out, clean_logits = recorded_outputs(model, task.clean)
    task.referenced(clean_logits)
    passes = 1
    if ablation == "corrupted" or normalise == "corrupted":
        corrupted_out, corrupted_logits = recorded_outputs(model, task.corrupted)
        passes += 1
    if ablation == "corrupted":
        ablated = corrupted_out
    elif mean_ids is not None:
        ablated, more = mean_outputs(model, task, mean_ids)
        passes += more
    else:
        ablated = clean_out.mean(dim=1, keepdim=True)
    graph = graph_of(model.config)
    model_each = task.measure_each(clean_logits).detach().cpu()
    setting = Setting(graph, task, ablated, model_each, forward_passes=passes)
    setting.ablated_each = circuit_each(model, setting, torch.zeros_like(graph.exists))
    setting.base_each = setting.ablated_each
    if normalise == "corrupted":
        setting.base_each = task.measure_each(corrupted_logits).detach().cpu()
    gap = setting.model_metric - setting.base_metric
    if abs(gap) <= 1e-6 * max(1.0, abs(setting.model_metric)):
        base = f"every edge ablated ({ablation})" if normalise == "ablated" else "the corrupted prompts"
        raise InstrumentError(
            f"With {base} the metric is what the model's is ({setting.model_metric:.4g}): there is no behaviour for a "
            "circuit to keep. Give more prompts (a mean over one prompt is that prompt), or ablate to the corrupted "
            "prompts."
        )
    return setting, clean_out


def read_parts(graph: Graph, kept: torch.Tensor) -> torch.Tensor:
    """`kept` without the edges into heads and MLPs whose output no kept edge reads: the latest first, so that a
    part read only by such parts goes too."""
    kept = kept.clone()
    for sender in reversed(range(len(graph.senders))):
        node = graph.senders[sender]
        if node[0] != "embed" and not kept[sender].any():
            kept[:, [r for r, (reader, _) in enumerate(graph.receivers) if reader == node]] = False
    return kept


# ---- faithfulness off the prompts it was found on ------------------------------------------------------------------


@dataclass
class Faithfulness:
    """A circuit's faithfulness on one prompt set, and its spread: each prompt's own faithfulness (its metric against
    its own model and base metrics), lowest, highest and standard deviation."""

    prompts: str  # "found on", "another seed", "shorter", "longer", or a name the caller gave
    faithfulness: float  # over the set: the normalised mean metric
    count: int
    length: int  # tokens a prompt
    low: float
    high: float
    std: float


def faithfulness_on(model, name: str, setting: Setting, kept: torch.Tensor) -> Faithfulness:
    """One exact run of `kept` on `setting`'s prompts: its faithfulness over the set and over each prompt."""
    each = circuit_each(model, setting, kept)
    gap = setting.model_each - setting.base_each
    per_prompt = ((each - setting.base_each) / gap)[gap.abs() > 1e-6]  # a prompt the model does not change: none
    spread = per_prompt if len(per_prompt) else torch.full((1,), float("nan"), device=each.device)
    std = float(spread.std()) if len(spread) > 1 else 0.0
    clean = setting.task.clean
    return Faithfulness(
        name, normalised(setting, float(each.mean())), len(clean), clean.shape[1], float(spread.min()),
        float(spread.max()), std,
    )  # fmt: skip


def held_out_tasks(model, task: Task, held_out, prompts: int, half: int, seed: int) -> list[tuple[str, Task]]:
    """The prompt sets a circuit is checked on besides its own. None: on the induction task, the same shape of another
    seed, half and twice the tokens a copy (within the context); on the pairs task, none. Else a dict of name ->
    clean prompts (induction: corrupted by another random first half) or (clean, corrupted) prompts, of the task; a
    pairs set where no pair's answer changes is left out (nothing to check there)."""
    if held_out is None:
        if task.name != "induction":
            return []
        count, half = len(task.clean), (task.clean.shape[1] - 1) // 2
        longest = (getattr(model.config, "max_position_embeddings", 2 * half + 1) - 1) // 2
        other = seed + 1000  # far from the found prompts' seeds (seed and seed + 1)
        sets = {"another seed": half, "shorter": max(2, half // 2), "longer": min(2 * half, longest)}
        return [(name, induction_task(model, None, None, count, size, other)) for name, size in sets.items()]
    if not isinstance(held_out, dict):
        raise InstrumentError(
            f"held_out is a dict of name -> prompts (or (clean, corrupted) prompts), not {shortened(held_out)}."
        )
    tasks = []
    for name, ids in held_out.items():
        clean, corrupted = ids if isinstance(ids, tuple) and len(ids) == 2 else (ids, None)
        try:
            tasks.append((str(name), task_of(model, clean, corrupted, task.name, 0, 0, seed + 1000, task.metric_name)))
        except NoDifference:
            continue  # a pairs set whose every answer stays the same has nothing to check: left out of the answer
    return tasks


__all__ = [
    "ABLATIONS",
    "NORMALISATIONS",
    "Faithfulness",
    "Setting",
    "circuit_each",
    "circuit_logits",
    "circuit_metric",
    "faithfulness_of",
    "faithfulness_on",
    "held_out_tasks",
    "read_parts",
    "setting_of",
]
