"""The circuit walk, as plain JSON (the `circuit_walk` endpoint; lesson step 13 and the first screen's "See the
circuit" draw it): the measurements that find how heads work together on the text shown, in the order a researcher
takes them, each with the sentence its numbers support.

0. what the model predicts, the premise of the rest: its top next token, and whether that is the token that followed
   the text's repeated end the first time (it copies) or not (it does not copy here yet: the steps say so); an end
   that repeats fewer than texts.COPY_RUN tokens (one letter seen before) is said to leave no copy to expect;
1. who writes the answer: direct logit attribution of the model's top next token (the head with the largest share,
   named only when it writes at least WRITER_SHARE of the logit's direct parts: else no head dominates);
2. what carries it: patching each head's output from the text into a corrupted one (one token changed, the token
   after the first copy of the text's repeated end) — the head that restores the most, and that head ablated on the
   text (its mean output) to check that it helps the answer: where the answer rises without it, said;
3. through which input: path patching of every sender into that head's query, key and value;
4. how earlier parts reach it: the two-step paths from each earlier head through the part that feeds that input most;
5. which heads are needed: on random tokens written twice (the induction task), each head mean-ablated alone, the
   share of the model's in-context copying it takes away; and with only the needed heads kept, the share kept.

Steps 3 and 4 need a carrying head above layer 0; step 5 a model that copies in context (its loss on the repeated half
lower than on the first). Where a step cannot be taken, its sentence says why. No Gradio here."""

import torch

from minigpt.demo.circuits import measures
from minigpt.demo.circuits.head_circuit import copies_here, jobs_on
from minigpt.demo.circuits.words import INPUT_WORDS, NAMED, direct_words, path_sentences, share
from minigpt.demo.core.prompt_sets import ordinary_tokens
from minigpt.demo.core.texts import COPY_RUN, TextView, first_upper, repeated_end
from minigpt.demo.head_tools.words import job_clause
from minigpt.errors import VISITORS_MISTAKES
from minigpt.heads import ablated_pass, ablation_values, head_mask, heads_ablated, patch_two_step, repeated_tokens

TASK_PROMPTS = 16  # prompts of the induction task
MAX_TASK_HALF = 24  # tokens in each copy (fewer when the context is shorter)
NEEDED = 0.25  # a head whose ablation alone takes away this share of the copying is needed
WRITER_SHARE = 0.1  # a head is named the writer when it writes at least this share of the logit's direct parts


def step(name: str, title: str, finding: str, **data) -> dict:
    return {"name": name, "title": title, "finding": finding, **data}


def probability(logits: torch.Tensor, token: int) -> float:
    return float(torch.softmax(logits.float(), dim=-1)[token])


def prediction(view: TextView) -> dict:
    """The walk's premise: the model's top next token, and whether it is the token that followed the text's repeated
    end the first time (what an induction head copies). The steps after it tell a copying story only where it copies."""
    logits = view.recorded.logits(view.lm.model, -1)
    top, repeated = int(logits.argmax()), repeated_end(list(view.ids))
    top_label = measures.labels_of(view, [top])[0]
    said = f"The model predicts {top_label!r} next ({probability(logits, top):.2f})"
    if repeated is None:
        said += ": the text's end repeats nothing earlier, so there is no token to copy; the steps follow that answer."
        return step("prediction", "What the model predicts", said, token=top, copies=None, repeated=0)
    where, run = repeated
    if run < COPY_RUN:  # a token seen before, the one before it not: no copy to expect (texts.COPY_RUN says why)
        last = measures.labels_of(view, [view.ids[-1]])[0]
        said = (
            f"The text's end repeats only {'its last token' if run == 1 else f'its last {run} tokens'} ({last!r}, "
            f"seen before at token {where - run}): a copy needs the token before it to repeat too (an induction head "
            f"finds what to copy by it), so there is no copy to expect here. {said}; the steps follow that answer."
        )
        return step("prediction", "What the model predicts", said, token=top, copies=None, repeated=run)
    copied, copies = view.ids[where], copies_here(view)  # the one definition of the premise (the default heads')
    if copies:
        said += f", the token that followed the repeated end the first time (token {where}): it copies."
    else:
        said = (
            f"This model does not copy here yet: it predicts {top_label!r} ({probability(logits, top):.2f}), while the "
            f"token that followed the repeated end the first time (token {where}), "
            f"{measures.labels_of(view, [copied])[0]!r}, gets {probability(logits, copied):.2f}. The steps below "
            "follow the answer it gives, not a copy."
        )
    data = dict(token=top, copied=copied, copies=copies, repeated=run)
    return step("prediction", "What the model predicts", said, **data)


def writer_share(value: float, parts: list[float], bias_term: float) -> float:
    """A head's direct part of a logit (`value`) as a share of the sizes of every direct part (`parts`, and the final
    norm's `bias_term`): the one measure of a writer (the walk's and the exercises'). The largest head is named the
    writer when its share is at least WRITER_SHARE; else no head dominates."""
    sizes = sum(abs(part) for part in parts) + abs(bias_term)
    return value / sizes if sizes else 0.0


def writer(view: TextView) -> tuple[dict, str]:
    """The head with the largest direct part of the top token's logit, named when its part is a share that means
    something (WRITER_SHARE of the sizes of every direct part); else no head dominates, and the largest part is
    said."""
    found = measures.attribution(view, -1, "", "")
    best = max((v, f"{layer}.{head}") for layer, row in enumerate(found["heads"]) for head, v in enumerate(row))
    part = writer_share(best[0], [part["value"] for part in found["components"]], found["bias_term"])
    token = found["token"]["token"]
    if part >= WRITER_SHARE:
        said = (
            f"Attribution: the model predicts {token!r} next; of the heads, {best[1]} writes the most of that logit "
            f"directly ({best[0]:+.2f} of {found['logit']:.2f}, {share(part)} of the sizes of its direct parts)."
        )
    else:
        largest = found["largest"][0]
        heads = (
            f"the largest head's part is {best[1]}'s {best[0]:+.2f}, {share(part)} of the sizes of its direct parts"
            if best[0] > 0
            else direct_words(best[0], best[1], "it") + f" ({best[0]:+.2f})"
        )
        said = (
            f"Attribution: the model predicts {token!r} next, and no head dominates that logit ({found['logit']:.2f}): "
            f"{heads}; the largest part is {largest['component']}'s ({largest['value']:+.2f})."
        )
    named = part >= WRITER_SHARE
    data = dict(heads=found["heads"], head=best[1] if named else None, token=found["token"], share=part)
    return step("writer", "Who writes the answer", said, **data), best[1]


def ablated_probability(view: TextView, head: str, token: int) -> tuple[float, float]:
    """p(token) next, before and with `head` mean-ablated on the text (its output averaged over the positions)."""
    model, layer_head = view.lm.model, tuple(map(int, head.split(".")))
    before = probability(view.recorded.logits(model, -1), token)
    return before, probability(ablated_pass(model, view.recorded, [layer_head], "mean").logits(model, -1), token)


def carrier(view: TextView, corrupted: TextView, cores) -> tuple[dict, dict]:
    """The head whose output, patched back, restores the most; then its premise checked: ablated on the text, the
    answer's probability falls (it helps the answer) or rises (it works against it, said)."""
    found = measures.patching(view, corrupted, {"part": "output"}, cores)
    best = max((v, f"{layer}.{head}") for layer, row in enumerate(found["heads"]) for head, v in enumerate(row))
    answer = found["clean_answer"]
    before, after = ablated_probability(view, best[1], answer["id"])
    said = (
        f"Patching (the corrupted text “{corrupted.text}”: the model then predicts "
        f"{found['corrupted_answer']['token']!r}): putting back head {best[1]}'s output restores {share(best[0])} "
        f"of the answer, the most of any head. "
    )
    if after < before:
        said += f"Mean-ablated on your text, {best[1]} lowers p({answer['token']!r}) from {before:.2f} to {after:.2f}."
    else:
        said += (
            f"But mean-ablated on your text, {best[1]} raises p({answer['token']!r}) from {before:.2f} to "
            f"{after:.2f}: on this text it works against the answer, and what it restores is a difference between "
            "the two texts, not the answer's cause."
        )
    data = dict(heads=found["heads"], head=best[1], corrupted_text=corrupted.text, ablated=[before, after])
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
    jobs = jobs_on(model, prompts)
    said = (
        f"On {len(prompts)} prompts of random tokens written twice, mean-ablating one head at a time: {names} each "
        f"take away at least {share(NEEDED)} of the model's copying of the second half; keeping only them (every other "
        f"head mean-ablated) keeps {share(kept)} of it."
    )
    if needed:  # every head called needed is said with what it was measured to do, on the same prompts
        said += " What each does there: " + "; ".join(job_clause(f"{a}.{b}", jobs[a][b]) for a, b in needed) + "."
    data = dict(lost=lost, needed=[f"{a}.{b}" for a, b in needed], kept=kept)
    return step("needed", title, said, **data, jobs={f"{a}.{b}": jobs[a][b] for a, b in needed})


CORRUPTIONS = (
    (0, "the copied token changed: what to copy"),
    (1, "the token before the copied one changed: where to look"),
)


def corrupted_views(view: TextView, corrupt) -> tuple[list[tuple[TextView, str]], list[tuple[str, str]]]:
    """The text with one token changed, for each kind of CORRUPTIONS that changes the model's answer; and for each
    kind that found none, (what it is, what was tried: the error's words)."""
    found, tried = [], []
    for before, what in CORRUPTIONS:
        try:
            found.append((corrupt(view, before), what))
        except measures.NoChangeFound as error:  # no change of that token alters the answer: what was tried, said
            tried.append((what, error.tried))
        except VISITORS_MISTAKES as error:
            tried.append((what, str(error).rstrip(".")))
    return found, tried


def circuit_walk(view: TextView, corrupt, cores, needed=needed_heads) -> dict:
    """Every step of the walk on the text (see the module's docstring). corrupt(view, before) -> the text with one
    token changed (measures.one_token_changed's `before`), a TextView; needed(lm) -> the last step (`needed_heads`,
    which does not depend on the text: a cache of it). "head": the head the walk follows (the one that carries the
    answer; without a corrupted text, the writer where one is named; else None)."""
    first, head = writer(view)
    steps, followed = [prediction(view), first], first["head"]
    corrupted, tried = corrupted_views(view, corrupt)
    if not corrupted:
        tried = "; ".join(dict.fromkeys(words for _, words in tried))
        said = (
            f"{first_upper(tried)}. Patching needs a corrupted text with another answer: type one in the "
            "Patching part (the same number of tokens), or a text that repeats a phrase, its second copy cut short "
            "(“Romeo and Juliet, Romeo and Jul”)."
        )
        steps.append(step("carrier", "What carries it", said))
    else:
        found, _ = carrier(view, corrupted[0][0], cores)
        steps.append(found)
        head = followed = found["head"]
        for text, what in corrupted:
            try:
                found, path = carrying_input(view, text, head, what)
                steps += [found, route(view, text, head, path)]
            except VISITORS_MISTAKES as error:  # the text is too long for path patching on this server, say
                steps.append(step("input", f"Through which input: {what}", str(error)))
        for what, words in tried:  # a kind with no corrupted text: its step says what was tried, not silence
            said = f"{first_upper(words)}, so this input cannot be traced on this text: type a corrupted text in the "
            said += "Patching part (the same number of tokens) to trace it."
            steps.append(step("input", f"Through which input: {what}", said))
    steps.append(needed(view.lm))
    return {**view.about, "steps": steps, "head": followed, "notes": view.notes}
