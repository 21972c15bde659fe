"""The circuit walk, as plain JSON (the `circuit_walk` endpoint; lesson step 13 and the first screen's "See the
circuit" draw it): the measurements that find how heads work together on the text shown, in the order a researcher
takes them, each with the sentence its numbers support.

1. who writes the answer: direct logit attribution of the model's top next token (the head with the largest share);
2. what carries it: patching each head's output from the text into a corrupted one (one token changed, the token
   after the first copy of the text's repeated end) — the head that restores the most;
3. through which input: path patching of every sender into that head's query, key and value;
4. how earlier parts reach it: the two-step paths from each earlier head through the part that feeds that input most;
5. which heads are needed: on random tokens written twice (the induction task), each head mean-ablated alone, the
   share of the model's in-context copying it takes away; and with only the needed heads kept, the share kept.

Steps 3 and 4 need a carrying head above layer 0; step 5 a model that copies in context (its loss on the repeated half
lower than on the first). Where a step cannot be taken, its sentence says why. No Gradio here."""

import torch

from minigpt.demo.circuits import measures
from minigpt.demo.circuits.words import INPUT_WORDS, NAMED, direct_words, path_sentences, share
from minigpt.demo.core.prompt_sets import ordinary_tokens
from minigpt.demo.core.texts import TextView
from minigpt.errors import VISITORS_MISTAKES
from minigpt.heads import ablation_values, head_mask, heads_ablated, patch_two_step, repeated_tokens

TASK_PROMPTS = 16  # prompts of the induction task
MAX_TASK_HALF = 24  # tokens in each copy (fewer when the context is shorter)
NEEDED = 0.25  # a head whose ablation alone takes away this share of the copying is needed


def step(name: str, title: str, finding: str, **data) -> dict:
    return {"name": name, "title": title, "finding": finding, **data}


def writer(view: TextView) -> tuple[dict, str]:
    found = measures.attribution(view, -1, "", "")
    best = max((v, f"{layer}.{head}") for layer, row in enumerate(found["heads"]) for head, v in enumerate(row))
    said = (
        f"Attribution: the model predicts {found['token']['token']!r} next; of the heads, "
        f"{direct_words(best[0], best[1], 'that logit')} ({best[0]:+.2f} of {found['logit']:.2f})."
    )
    return step(
        "writer", "Who writes the answer", said, heads=found["heads"], head=best[1], token=found["token"]
    ), best[1]


def carrier(view: TextView, corrupted: TextView, cores) -> tuple[dict, dict]:
    found = measures.patching(view, corrupted, {"part": "output"}, cores)
    best = max((v, f"{layer}.{head}") for layer, row in enumerate(found["heads"]) for head, v in enumerate(row))
    said = (
        f"Patching (the corrupted text “{corrupted.text}”: the model then predicts "
        f"{found['corrupted_answer']['token']!r}): putting back head {best[1]}'s output restores {share(best[0])} "
        "of the answer, the most of any head."
    )
    data = dict(heads=found["heads"], head=best[1], corrupted_text=corrupted.text)
    data["differing_positions"] = found["differing_positions"]
    return step("carrier", "What carries it", said, **data), found


def carrying_input(view: TextView, corrupted: TextView, head: str, what: str) -> tuple[dict, dict | None]:
    """Path patching of every sender into the carrying head's q, k and v, on one corruption (`what` it changes)."""
    layer = int(head.split(".")[0])
    title = f"Through which input: {what}"
    if layer == 0:
        said = f"Head {head} is in layer 0: it reads the embeddings alone, so no earlier head can feed it."
        return step("input", title, said), None
    pairs = torch.tensor([[list(view.ids), list(corrupted.ids)]], device="cpu")  # ids: runs move them
    path = measures.path_patching(view, pairs, {"receiver": head})
    said = f"With “{corrupted.text}” as the corrupted text ({what}): " + " ".join(path_sentences(path, {}))
    return step("input", title, said, path=path, corrupted_text=corrupted.text, what=what), path


def best_input_and_feeder(path: dict) -> tuple[str, str]:
    """The input the whole stream restores most through, and the part (not the whole stream) that feeds it most."""
    whole = dict(zip(path["inputs"], path["effects"][-1]))
    into = max(whole, key=whole.get)
    column = path["inputs"].index(into)
    feeders = [(path["effects"][row][column], sender) for row, sender in enumerate(path["senders"][:-1])]
    return into, max(feeders)[1]


def route(view: TextView, corrupted: TextView, head: str, path: dict | None) -> dict:
    """Two-step paths from the embeddings and each earlier head through the part that feeds the carrying input
    most (when that part is an MLP or a head: a direct feed needs no route)."""
    title = "How earlier parts reach it"
    if path is None:
        return step("route", title, "No earlier part can reach a head of layer 0.")
    into, feeder = best_input_and_feeder(path)
    word, receiver = INPUT_WORDS[into], tuple(map(int, head.split(".")))
    if feeder == "embed":
        said = f"The embeddings feed {head}'s {word} the most, directly (the path patching above)."
        return step("route", title, said, feeder=feeder, input=into, routes=[])
    feeder_layer = int(feeder.split()[1]) if feeder.startswith("mlp") else int(feeder.split(".")[0]) - 1
    n_head, model = view.lm.model.config.n_head, view.lm.model
    senders = ["embed"] + [f"{layer}.{h}" for layer in range(feeder_layer + 1) for h in range(n_head)]
    routes = []
    for sender in (s for s in senders if s != feeder):
        found = patch_two_step(model, view.ids, corrupted.ids, sender, feeder, receiver, into)
        routes.append({"sender": sender, "effect": found.effect})
    routes.sort(key=lambda r: -r["effect"])
    top = routes[0]
    said = f"{feeder} feeds {head}'s {word} the most. Of what {feeder} reads, "
    if top["effect"] >= NAMED:
        said += (
            f"{top['sender']} reaches {head} through it the most: {top['sender']} → {feeder} → {head}'s {word} "
            f"restores {top['effect']:+.2f} of the answer"
        )
    else:
        said += f"no single part reaches {head} through it by itself (at most {top['effect']:+.2f}, {top['sender']})"
    heads = [r for r in routes if r["sender"] != "embed"]
    if heads and heads[0] is not top:
        said += f"; the most through a head: {heads[0]['sender']} ({heads[0]['effect']:+.2f})"
    return step("route", title, said + ".", feeder=feeder, input=into, routes=routes)


def task_prompts(lm) -> torch.Tensor:
    half = min(MAX_TASK_HALF, (lm.block_size - 1) // 2)
    return repeated_tokens(ordinary_tokens(lm), lm.boundary_id, TASK_PROMPTS, half, seed=0)


def repeated_loss(model, prompts: torch.Tensor, ablate: torch.Tensor, values) -> float:
    """The mean loss of predicting the second copy's tokens (all but its first), with `ablate` heads mean-ablated."""
    with heads_ablated(model, ablate, values), torch.no_grad():
        logits = model(input_ids=prompts.to(model.device), use_cache=False).logits.float().cpu()
    half = (prompts.shape[1] - 1) // 2
    losses = torch.nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), prompts[:, 1:], reduction="none")
    return float(losses[:, half + 1 :].mean())


def needed_heads(lm) -> dict:
    """On the induction task: each head mean-ablated alone, the share of the copying it takes away; then every head
    but the needed ones ablated, the share kept. Copying = loss with every head ablated minus the model's."""
    model, config = lm.model, lm.model.config
    prompts = task_prompts(lm)
    values = ablation_values(model, prompts, "mean")
    L, H = config.n_layer, config.n_head
    full = repeated_loss(model, prompts, torch.zeros(L, H, dtype=torch.bool, device="cpu"), values)
    none = repeated_loss(model, prompts, torch.ones(L, H, dtype=torch.bool, device="cpu"), values)
    title = "Which heads are needed"
    if none - full < 0.1:
        said = "On random tokens written twice this model does not copy: ablating its heads changes little."
        return step("needed", title, said, lost=None)
    lost = [
        [
            (repeated_loss(model, prompts, head_mask([(layer, h)], L, H), values) - full) / (none - full)
            for h in range(H)
        ]
        for layer in range(L)
    ]
    needed = [(layer, h) for layer in range(L) for h in range(H) if lost[layer][h] >= NEEDED]
    kept = (none - repeated_loss(model, prompts, ~head_mask(needed, L, H), values)) / (none - full)
    names = ", ".join(f"{layer}.{h}" for layer, h in needed) or "none"
    said = (
        f"On {len(prompts)} prompts of random tokens written twice, mean-ablating one head at a time: {names} each "
        f"take away at least {share(NEEDED)} of the model's copying of the second half; keeping only them (every other "
        f"head mean-ablated) keeps {share(kept)} of it."
    )
    return step("needed", title, said, lost=lost, needed=[f"{a}.{b}" for a, b in needed], kept=kept)


CORRUPTIONS = (
    (0, "the copied token changed: what to copy"),
    (1, "the token before the copied one changed: where to look"),
)


def corrupted_views(view: TextView, corrupt) -> list[tuple[TextView, str]]:
    """The text with one token changed, for each kind of CORRUPTIONS that changes the model's answer."""
    found = []
    for before, what in CORRUPTIONS:
        try:
            found.append((corrupt(view, before), what))
        except VISITORS_MISTAKES:  # no change of that token alters the answer
            continue
    return found


def circuit_walk(view: TextView, corrupt, cores, needed=needed_heads) -> dict:
    """Every step of the walk on the text (see the module's docstring). corrupt(view, before) -> the text with one
    token changed (measures.one_token_changed's `before`), a TextView; needed(lm) -> the last step (`needed_heads`,
    which does not depend on the text: a cache of it)."""
    first, head = writer(view)
    steps, corrupted = [first], corrupted_views(view, corrupt)
    if not corrupted:
        said = (
            "No change of one token alters the answer here: patching needs a text that repeats a phrase, its second "
            "copy cut short (“Romeo and Juliet, Romeo and Jul”)."
        )
        steps.append(step("carrier", "What carries it", said))
    else:
        found, _ = carrier(view, corrupted[0][0], cores)
        steps.append(found)
        head = found["head"]
        for text, what in corrupted:
            try:
                found, path = carrying_input(view, text, head, what)
                steps += [found, route(view, text, head, path)]
            except VISITORS_MISTAKES as error:  # the text is too long for path patching on this server, say
                steps.append(step("input", f"Through which input: {what}", str(error)))
    steps.append(needed(view.lm))
    return {**view.about, "steps": steps, "notes": view.notes}
