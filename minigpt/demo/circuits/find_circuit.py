"""The circuit found, not told, as plain JSON (the `find_circuit` endpoint; the Circuits section's "Find the circuit"
draws it): `minigpt.heads.find_circuit` on a prompt set, its edges named as the page names its nodes (`embed`, `L.H`,
`mlp L`, `logits`), its exact faithfulness, and the exact faithfulness of the top k edges at a bounded set of k (the
page's slider redraws from them without a call).

Tasks: "induction", random tokens written twice (the model's ordinary tokens after its start token), each corrupted by
another first half; "text", the visitor's text against a corrupted one (typed, or one token changed for you), with
variants of the pair (the same repeats and differences, other tokens: `prompt_sets`) as the prompt set.

Bounds: the prompt set runs as one batch, and the cost of a run grows with edges x tokens x width (every receiver
reads a stream of its own): the tokens of the set are held to EDGE_WORK / (edges x width). Left to the page ("0"), the
prompt count (and, for the induction task, the prompts' length) shrinks to fit; asked for, a count that does not fit is
refused with what to change. Answers are kept per (model, task, prompts, options): a bounded, thread-safe cache that
computes each once under concurrent asks. No Gradio here."""

import functools
from dataclasses import asdict
from types import SimpleNamespace

import torch

from minigpt.demo.circuits.head_circuit import named_jobs
from minigpt.demo.circuits.words import found_findings
from minigpt.demo.core.cores import pass_work
from minigpt.demo.core.inputs import number
from minigpt.demo.core.kept_answers import KeptAnswers
from minigpt.demo.core.prompt_sets import MAX_PROMPTS, described, ordinary_tokens, text_variants
from minigpt.errors import VisitorError, shortened
from minigpt.heads import circuit_to_eap_json, faithfulness_curve, find_circuit, repeated_tokens
from minigpt.heads.discovery import indices_of, mask_of
from minigpt.heads.exact_runs import read_parts
from minigpt.heads.graph import graph_of

TASKS = ("induction", "text")
ABLATIONS = ("mean", "corrupted")
METHODS = ("eap-ig", "eap")
METRICS = ("log-probability", "logit difference", "kl divergence")
NORMALISATIONS = ("ablated", "corrupted")
OPTIONS = ("method", "ablation", "target", "metric", "normalise")  # what an answer is kept by, besides the prompts
INDUCTION_PROMPTS = 20  # the induction task's prompts when the page leaves the count to the server
MAX_INDUCTION_PROMPTS = 64
INDUCTION_HALF = 20  # tokens in each copy (fewer where the context or the budget is shorter)
FEW_PROMPTS = 4  # below this many, the induction task's prompts get shorter rather than fewer
EDGE_WORK = 2.5e9  # edges x tokens x width of a prompt set: GPT-2 small's shape at 4 prompts of 25 tokens
MAX_KS = 16  # points of the faithfulness curve (one exact run each)
MAX_DRAWN = 200  # the top edges of the ranking the answer lists (the page draws at most these)
KEPT_ANSWERS = 16  # answers kept, all models together
MINIMAL_RUNS = 160  # exact runs of a prompt set the minimal circuit's pruning may take (about 80 on the specimen)
PASSES = 40 + MINIMAL_RUNS  # about the passes of the prompt set one answer takes: the cores' share


def choice(name: str, value, allowed: tuple[str, ...]) -> str:
    """One of `allowed`, as a visitor types it (any case, spaces around); empty: the first."""
    chosen = str(value if value is not None else "").strip().lower() or allowed[0]
    if chosen not in allowed:
        listed = ", ".join(f"'{a}'" for a in allowed[:-1]) + f" or '{allowed[-1]}'"
        raise VisitorError(f"{name} must be {listed}, got {shortened(value)}.")
    return chosen


def checked_target(value) -> float:
    target = number("target", value, 0.9)
    if not 0 < target <= 1:
        raise VisitorError(f"target must be above 0 and at most 1 (the share of the behaviour kept), got {target}.")
    return target


def checked_prompts(value, task: str) -> int:
    """0: as many as fit, up to the task's default; else the count asked for, within the task's bounds."""
    count = number("prompts", value, 0, int)
    most = MAX_INDUCTION_PROMPTS if task == "induction" else MAX_PROMPTS
    if not 0 <= count <= most:
        what = "random prompts" if task == "induction" else f"prompts (the text and up to {most - 1} variants)"
        raise VisitorError(f"prompts must be 0 (as many as fit) or 1 to {most} {what}, got {count}.")
    return count


@functools.cache
def total_edges(n_layer: int, n_head: int) -> int:
    """The edges of a model of this shape (graph_of builds its whole graph: once a shape)."""
    return graph_of(SimpleNamespace(n_layer=n_layer, n_head=n_head)).total_edges


def token_budget(config) -> int:
    """The tokens a prompt set may hold on this model: EDGE_WORK / (edges x width)."""
    return int(EDGE_WORK // (total_edges(config.n_layer, config.n_head) * config.n_embd))


def fewest_prompts(ablation: str) -> int:
    return 2 if ablation == "mean" else 1  # a mean over one prompt is that prompt: it ablates nothing


def induction_shape(lm, asked: int, ablation: str) -> tuple[int, int]:
    """(prompts, tokens a copy) of the induction task on this model: the count asked for (0: up to
    INDUCTION_PROMPTS, as many as fit) of INDUCTION_HALF tokens a copy, shorter where the context or the budget is."""
    budget, half = token_budget(lm.model.config), min(INDUCTION_HALF, (lm.block_size - 1) // 2)
    if asked:
        count = asked
        if asked * (2 * half + 1) > budget:
            half = (budget // asked - 1) // 2
    else:
        count = min(INDUCTION_PROMPTS, budget // (2 * half + 1))
        if count < FEW_PROMPTS:  # shorter prompts rather than fewer
            count = min(INDUCTION_PROMPTS, FEW_PROMPTS)
            half = min(half, (budget // count - 1) // 2)
    if half < 2 or count < fewest_prompts(ablation):
        fits = budget // 5
        what = (
            f"Ask for {fits} prompts or fewer (0: as many as fit)."
            if fits >= fewest_prompts(ablation)
            else "Ask for it on a smaller model."
        )
        raise VisitorError(
            f"The {lm.name} model is too large for {count} induction prompts on this server: a prompt set may hold "
            f"{budget} tokens here (at least 5 a prompt). {what}"
        )
    return count, half


def text_count(lm, length: int, asked: int, ablation: str) -> int:
    """How many prompts (the pair and its variants) of `length` tokens the text task runs on this model."""
    budget = token_budget(lm.model.config)
    fits = min(MAX_PROMPTS, budget // length)
    count = min(asked or MAX_PROMPTS, fits)
    if count < max(asked, fewest_prompts(ablation)):
        shorter = budget // max(asked, fewest_prompts(ablation))
        raise VisitorError(
            f"The text is {length} tokens: on the {lm.name} model a prompt set may hold {budget} tokens on this "
            f"server, so {fits} prompt{'s' if fits != 1 else ''} of it fit. Ask for fewer prompts (0: as many as fit), "
            f"or shorten the text to {shorter} tokens or fewer"
            + (", or ablate to the corrupted text (ablation 'corrupted': one prompt is enough)." if fits == 1 else ".")
        )
    return count


def induction_prompts(lm, count: int, half: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Random ordinary tokens written twice after the start token (seeded), and each corrupted by another first half."""
    tokens = ordinary_tokens(lm)
    clean = repeated_tokens(tokens, lm.boundary_id, count, half, seed=seed)
    other = repeated_tokens(tokens, lm.boundary_id, count, half, seed=seed + 1)[:, 1 : half + 1]
    return clean, torch.cat([clean[:, :1], other, clean[:, half + 1 :]], dim=1)


def natural_prompts(lm, windows: list[list[int]], count: int, half: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Natural text written twice: the model's own corpus (`windows`, its start tokens left out) cut into pieces of
    `half` tokens, each after the start token and written twice, corrupted by the next piece in its first half; None
    where the corpus holds fewer than three pieces."""
    stream = [t for window in windows for t in window if t != lm.boundary_id]
    pieces = [stream[i * half : (i + 1) * half] for i in range(min(count + 1, len(stream) // half))]
    if len(pieces) < 3:
        return None
    start = [lm.boundary_id]
    clean = [start + piece + piece for piece in pieces[:-1]]
    corrupted = [start + other + piece for piece, other in zip(pieces[:-1], pieces[1:])]
    return torch.tensor(clean, device="cpu"), torch.tensor(corrupted, device="cpu")  # the ids, wherever the model is


def induction_held_out(lm, count: int, half: int, windows) -> dict:
    """The induction task's held-out sets: the model's own text written twice (where its corpus is given), another
    seed, half and twice the tokens a copy (where they fit the context and the budget)."""
    budget, longest = token_budget(lm.model.config), (lm.block_size - 1) // 2
    natural = natural_prompts(lm, windows, count, half) if windows else None
    # The first set is the one the minimal circuit is pruned on besides its own (`prune_on=1`): the model's own text
    # where there is one, the farthest from the random tokens it was found on; the others are measured once.
    sets = {} if natural is None else {"natural text": natural}
    for name, size, seed in (("another seed", half, 1000), ("shorter", half // 2, 1002), ("longer", 2 * half, 1004)):
        if 2 <= size <= longest and count * (2 * size + 1) <= budget:
            clean, corrupted = induction_prompts(lm, count, size, seed)
            sets[name] = (clean, corrupted)
    return sets


# ---- the answer -----------------------------------------------------------------------------------------------------


def edge_json(edge, rank: int) -> dict:
    return {"sender": edge.sender, "receiver": edge.receiver, "input": edge.input, "score": edge.score, "rank": rank}


def curve_ks(found_k: int, total: int) -> list[int]:
    """At most MAX_KS values of k: none, the found circuit's k and its neighbours, every edge, and a log-spaced spread
    between (the densest that fits)."""
    near = {0, total} | {k for k in (found_k - 1, found_k, found_k + 1) if 0 <= k <= total}
    ks = near
    for step in range(1, 4 * MAX_KS):
        candidates = near | {round(total ** (i / step)) for i in range(step + 1)}
        if len(candidates) > MAX_KS:
            break
        ks = candidates
    return sorted(ks)


def curve_points(model, found, ks: list[int]) -> list[dict]:
    """Each k's exact faithfulness (heads.faithfulness_curve: the top k edges of the ranking), and what of those k
    edges reads nothing that is read (edges into parts whose output no kept edge reads: dropped, they change
    nothing), the edges and heads left."""
    graph = graph_of(model.config)
    order = [indices_of(graph, model, edge) for edge in found.ranking]
    points = []
    for k, faithfulness in faithfulness_curve(model, found, ks):
        kept = read_parts(graph, mask_of(graph, order[:k]))
        unread = [rank for rank, (s, r) in enumerate(order[: min(k, MAX_DRAWN)]) if not kept[s, r]]
        heads = sorted({found.ranking[rank].sender for rank, (s, r) in enumerate(order[:k]) if kept[s, r]})
        heads = [name for name in heads if name[0].isdigit()]
        points.append(
            {"k": k, "faithfulness": faithfulness, "unread": unread, "kept_edges": int(kept.sum()), "heads": heads}
        )
    return points


def eap_graph(found, model) -> dict | None:
    """The circuit in EAP-IG's graph JSON layout (`heads.circuit_to_eap_json`, every edge with its score) where the
    graph is small enough to send whole (no more edges than the ranking lists: the shipped models), else None."""
    return circuit_to_eap_json(found, model) if found.total_edges <= MAX_DRAWN else None


def minimal_json(minimal, rank: dict) -> dict:
    """The minimal circuit: its edges (with their rank in the ranking), heads, faithfulness on each set, and what each
    part adds, the largest first."""
    edges = [edge_json(e, rank[(e.sender, e.receiver, e.input)]) for e in minimal.edges]
    parts = sorted((asdict(p) for p in minimal.parts), key=lambda p: (p["kind"] != "head", -p["adds"]))
    return {
        "edges": edges, "heads": minimal.heads, "faithfulness": minimal.faithfulness,
        "held_out": [asdict(h) for h in minimal.held_out], "parts": parts, "floors": minimal.floors,
        "complete": minimal.complete, "runs": minimal.runs,
    }  # fmt: skip


def answer_of(lm, found, prompts: dict) -> dict:
    """The found circuit as JSON: its edges, the ranking's top MAX_DRAWN, the curve (the findings are the caller's,
    once the prompt set is described); `passes` are the finding's, the curve's runs (one a k) besides."""
    rank = {(e.sender, e.receiver, e.input): i for i, e in enumerate(found.ranking)}
    edges = [edge_json(e, rank[(e.sender, e.receiver, e.input)]) for e in found.edges]
    found_k = 1 + max((e["rank"] for e in edges), default=-1)
    config = lm.model.config
    return {
        "model": lm.name,
        "n_layer": config.n_layer,
        "n_head": config.n_head,
        "metric": found.metric,
        "method": found.method,
        "ablation": found.ablation,
        "target": found.target,
        "prompts": {**prompts, "count": found.prompts, "left_out": found.left_out, "length": found.clean.shape[1]},
        "edges": edges,
        "faithfulness": found.faithfulness,
        "kept_edges": found.kept_edges,
        "total_edges": found.total_edges,
        "heads": found.heads,
        "total_heads": config.n_layer * config.n_head,
        "model_metric": found.model_metric,
        "ablated_metric": found.ablated_metric,
        "found_k": found_k,
        "ranking": [edge_json(e, i) for i, e in enumerate(found.ranking[:MAX_DRAWN])],
        "curve": curve_points(lm.model, found, curve_ks(found_k, found.total_edges)),
        "metric_name": found.metric_name,
        "normalise": found.normalise,
        "base_metric": found.base_metric,
        "found_on": asdict(found.found_on),
        "held_out": [asdict(h) for h in found.held_out],
        "minimal": minimal_json(found.minimal, rank),
        "passes": {
            "forward": found.forward_passes,
            "backward": found.backward_passes,
            "held_out": found.held_out_passes,
            "minimal": found.minimal.runs,
        },
        "prompt_ids": {"clean": found.clean.tolist(), "corrupted": found.corrupted.tolist()},
        "eap_graph": eap_graph(found, lm.model),
    }


def found_answer(lm, clean, corrupted, task: str, options: dict, prompts: dict, cores, held_out: dict) -> dict:
    """heads.find_circuit on the prompt set (the library's "induction" or "pairs" task), checked on the `held_out`
    sets and pruned to its minimal circuit, answered as JSON."""
    model = lm.model
    with cores.threads_for(pass_work(model.config, clean.numel()) * PASSES):
        found = find_circuit(
            model, clean, corrupted, task="induction" if task == "induction" else "pairs",
            method=options["method"], ablation=options["ablation"], target=options["target"], held_out=held_out,
            max_runs=MINIMAL_RUNS, metric=options["metric"] or None, normalise=options["normalise"], prune_on=1,
        )  # fmt: skip
        answer = answer_of(lm, found, prompts)
    named = dict.fromkeys([*found.heads, *(found.minimal.heads if found.minimal else [])])
    return {**answer, "jobs": named_jobs(model, clean, named)}  # what each head named does, on the prompts found on


class FoundCache(KeptAnswers):
    """Answers per key (model, task, prompts, options), the last KEPT_ANSWERS; concurrent asks of one key compute it
    once, asks of other keys go on meanwhile (kept_answers). Each ask gets a copy of the answer's top level."""

    def __init__(self, kept: int = KEPT_ANSWERS):
        super().__init__(kept)

    def get(self, key, compute) -> dict:
        return dict(super().get(key, compute))


def induction_answer(lm, options: dict, cache: FoundCache, cores, windows=None) -> dict:
    """The induction task, checked on held-out sets (`windows`: a callable giving the model's own corpus for the
    natural text set, or None)."""
    count, half = induction_shape(lm, options["prompts"], options["ablation"])
    key = (lm.name, id(lm.model), "induction", count, half, *(options[o] for o in OPTIONS))

    def compute():
        clean, corrupted = induction_prompts(lm, count, half)
        what = f"{count} prompts of {half} random tokens written twice"
        held_out = induction_held_out(lm, count, half, windows() if windows else None)
        found = found_answer(lm, clean, corrupted, "induction", options, {"described": what}, cores, held_out)
        found.update(task="induction", ids=None, notes=[])
        found["findings"] = found_findings(found)
        return found

    return cache.get(key, compute)


def text_held_out(lm, texts: list[list[int]], count: int) -> dict:
    """The text task's held-out set: other variants of the pair (seed 1), the text itself left out."""
    other = text_variants(lm, texts, count + 1, seed=1)[1:]
    return {"other variants": (other[:, 0], other[:, 1])}


def text_answer(view, corrupted, note: str | None, options: dict, cache: FoundCache, cores) -> dict:
    """The text task: the text and its corrupted text (a TextView; `note`: how it was made, where it was made for
    the visitor), with variants of the pair as the prompt set."""
    lm, corrupted_ids, corrupted_text = view.lm, list(corrupted.ids), corrupted.text
    if len(corrupted_ids) != len(view.ids):
        raise VisitorError(
            f"The text is {len(view.ids)} tokens and the corrupted text {len(corrupted_ids)}: give a corrupted text of "
            "the same token count (empty: one token changed for you)."
        )
    if list(corrupted_ids) == list(view.ids):
        raise VisitorError("The corrupted text is the text itself: change a token the answer depends on.")
    count = text_count(lm, len(view.ids), options["prompts"], options["ablation"])
    options_key = tuple(options[o] for o in OPTIONS)
    key = (lm.name, id(lm.model), "text", tuple(view.ids), tuple(corrupted_ids), count, *options_key)

    def compute():
        texts = [list(view.ids), list(corrupted_ids)]
        pairs = text_variants(lm, texts, count)
        held_out = text_held_out(lm, texts, count)
        found = found_answer(lm, pairs[:, 0], pairs[:, 1], "text", options, {}, cores, held_out)
        found["prompts"]["described"] = described(found["prompts"]["count"], found["prompts"]["left_out"])
        found.update(view.about, task="text", text=view.text, corrupted_text=corrupted_text)
        found["findings"] = found_findings(found)
        return found

    return {**cache.get(key, compute), "notes": [note] if note else []}


def checked_options(task, prompts, ablation, method, target, metric="", normalise="ablated") -> tuple[str, dict]:
    """The task and the options of a `find_circuit` call, as a visitor typed them, checked before any pass runs."""
    task = choice("task", task, TASKS)
    options = dict(
        prompts=checked_prompts(prompts, task), ablation=choice("ablation", ablation, ABLATIONS),
        method=choice("method", method, METHODS), target=checked_target(target),
        metric=choice("metric", metric, METRICS) if str(metric or "").strip() else "",  # empty: the task's own
        normalise=choice("normalise", normalise, NORMALISATIONS),
    )  # fmt: skip
    if options["prompts"] == 1 and options["ablation"] == "mean":
        raise VisitorError(
            "With one prompt, mean ablation ablates nothing (the mean over one prompt is that prompt): ask for more "
            "prompts (0: as many as fit), or ablate to the corrupted text (ablation 'corrupted')."
        )
    return task, options
