"""A circuit the visitor states, measured as the found one is (the `test_circuit` endpoint): `heads.measure_circuit` on
the found circuit's own prompt set and held-out sets (the found answer comes from its cache, computed once a model,
task and options), with the found and minimal circuits' numbers beside it, and sentences made from the numbers: on
which prompts each figure was measured, what each of its heads was measured to do there (as the found circuit's heads
are said), and what each part's removal does (a part whose removal raises the faithfulness works against the answer).
No Gradio here."""

from dataclasses import asdict

import torch

from minigpt.demo.circuits.find_circuit import induction_held_out
from minigpt.demo.circuits.head_circuit import named_jobs
from minigpt.demo.circuits.words import ABLATION_WORDS, jobs_sentence, premise_sentence, set_words
from minigpt.demo.core.cores import pass_work
from minigpt.heads import measure_circuit
from minigpt.heads.stated_circuit import parsed_circuit

MAX_PARTS = 40  # parts whose share the answer measures (one exact run of the prompt set each)
NEEDED = 0.01  # a part whose removal changes the faithfulness by less than this adds nothing that shows


def checked_circuit(circuit, model) -> str:
    """The circuit as the visitor typed it, read before any pass runs (a refusal says what to write)."""
    text = "" if circuit is None else str(circuit)
    parsed_circuit(text, model)
    return text


def held_out_of(lm, found: dict, windows, text_held_out) -> dict:
    """The held-out sets the found circuit was measured on: the induction task's from its prompts' shape, the text
    task's (`text_held_out`: a callable) as the text answer made them."""
    if found["task"] != "induction":
        return text_held_out()
    count, half = found["prompts"]["count"], (found["prompts"]["length"] - 1) // 2
    return induction_held_out(lm, count, half, windows() if windows else None)


def own_answer(lm, circuit: str, found: dict, held_out: dict, options: dict, cores) -> dict:
    """The visitor's circuit measured on the found circuit's prompts and held-out sets, as JSON, the found beside."""
    clean, corrupted = (torch.tensor(found["prompt_ids"][k], device="cpu") for k in ("clean", "corrupted"))
    passes = 3 * (1 + len(held_out)) + MAX_PARTS
    with cores.threads_for(pass_work(lm.model.config, clean.numel()) * passes):
        measured = measure_circuit(
            lm.model, circuit, clean, corrupted, task="induction" if found["task"] == "induction" else "pairs",
            ablation=options["ablation"], metric=options["metric"] or None, normalise=options["normalise"],
            held_out=held_out, max_runs=MAX_PARTS,
        )  # fmt: skip
    minimal = found["minimal"]
    answer = {
        "model": lm.name, "task": found["task"], "circuit": circuit, "form": measured.form,
        "edges": [{"sender": s, "receiver": r, "input": i} for s, r, i in measured.edges],
        "heads": measured.heads, "jobs": named_jobs(lm.model, clean, measured.heads),
        "unread": measured.unread, "kept_edges": measured.kept_edges,
        "total_edges": measured.total_edges, "total_heads": found["total_heads"],
        "found_on": asdict(measured.found_on), "held_out": [asdict(h) for h in measured.held_out],
        "parts": sorted((asdict(p) for p in measured.parts), key=lambda p: -p["adds"]),
        "complete": measured.complete, "runs": measured.runs, "metric_name": measured.metric_name,
        "ablation": options["ablation"], "normalise": options["normalise"], "target": options["target"],
        "prompts": found["prompts"], "notes": found.get("notes", []),
        "model_metric": found["model_metric"], "ablated_metric": found["ablated_metric"],
        "found": {
            "heads": found["heads"], "kept_edges": found["kept_edges"], "faithfulness": found["faithfulness"],
            "found_on": found["found_on"], "held_out": found["held_out"],
            "minimal": {k: minimal[k] for k in ("heads", "faithfulness", "held_out")} | {
                "kept_edges": len(minimal["edges"])
            },
        },
    }  # fmt: skip
    answer["findings"] = own_findings(answer)
    return answer


# ---- its sentences --------------------------------------------------------------------------------------------------


def stated_words(answer: dict) -> str:
    heads = ", ".join(answer["heads"]) or "no head"
    edges = f"{answer['kept_edges']} of the model's {answer['total_edges']}"
    if answer["form"] == "heads":
        return f"heads {heads} with the embeddings, every MLP and the logits: {edges} edges"
    return f"{edges} edges, through {'heads ' if answer['heads'] else ''}{heads}"


def measured_sentence(answer: dict) -> str:
    base = "every edge ablated" if answer["normalise"] == "ablated" else "the corrupted run"
    on = answer["found_on"]
    return (
        f"Your circuit ({stated_words(answer)}), run exactly as the found one is, every other edge carrying, in place "
        f"of its sender's output, {ABLATION_WORDS[answer['ablation']]}; faithfulness normalised against {base}. On "
        f"the prompts the circuit was found on ({answer['prompts']['described']}) it keeps {on['faithfulness']:.3f} "
        f"({on['count']} prompts of {on['length']} tokens, each prompt {on['low']:.2f} to {on['high']:.2f})."
    )


def held_out_sentence(answer: dict) -> str | None:
    held = answer["held_out"]
    if not held:
        return None
    below = [h["prompts"] for h in held if h["faithfulness"] < answer["target"]]
    below = (["the found-on prompts"] if answer["found_on"]["faithfulness"] < answer["target"] else []) + below
    verdict = (
        f"below the target {answer['target']:.2f} on {', '.join(below)}"
        if below
        else f"at least the target {answer['target']:.2f} on every set"
    )
    return f"On prompts it was not found on: {'; '.join(set_words(h) for h in held)}. It keeps {verdict}."


def beside_sentence(answer: dict) -> str:
    found, minimal, yours = answer["found"], answer["found"]["minimal"], answer["found_on"]["faithfulness"]
    gap = yours - minimal["faithfulness"]
    return (
        f"Beside it, on the same prompts: the circuit found keeps {found['faithfulness']:.3f} with "
        f"{found['kept_edges']} edges and heads {', '.join(found['heads']) or 'none'}; its minimal circuit "
        f"{minimal['faithfulness']:.3f} with {minimal['kept_edges']} edges and heads "
        f"{', '.join(minimal['heads']) or 'none'}. Yours keeps {abs(gap):.3f} {'more' if gap >= 0 else 'less'} than "
        f"the minimal circuit, with {answer['kept_edges']} edges."
    )


def parts_sentences(answer: dict) -> list[str]:
    """What each part adds on the found-on prompts, read by its sign."""
    parts = answer["parts"]
    helps = [p for p in parts if p["adds"] >= NEEDED]
    against = [p for p in parts if p["adds"] <= -NEEDED]
    idle = [p for p in parts if abs(p["adds"]) < NEEDED]
    said = []
    if helps:
        said.append(
            "Without each part, on the found-on prompts, the faithfulness falls by: "
            + "; ".join(f"{p['name']} {p['adds']:.3f} (to {p['without']:.3f})" for p in helps)
            + "."
        )
    said += [
        f"Without {p['name']} the faithfulness rises by {-p['adds']:.3f} (to {p['without']:.3f}): in this circuit it "
        "works against the answer." for p in against
    ]  # fmt: skip
    if idle:
        names = ", ".join(p["name"] for p in idle)
        said.append(f"Removing {names} changes the faithfulness by less than {NEEDED}: it keeps as much without.")
    if not answer["complete"]:
        said.append(f"What each part adds was measured for the first {len(parts)} parts (at most {MAX_PARTS} a call).")
    return said


def unread_sentence(answer: dict) -> str | None:
    unread = answer["unread"]
    if not unread:
        return None
    return (
        f"Nothing in your circuit reads what {', '.join(unread)} compute{'s' if len(unread) == 1 else ''}: the edges "
        "into it change nothing. Add an edge out of it (to the logits, an MLP or a later head's q, k or v)."
    )


def own_findings(answer: dict) -> list[str]:
    premise = premise_sentence(answer["metric_name"], answer["model_metric"], answer["ablated_metric"])
    jobs = jobs_sentence(answer, answer["heads"], "each of your heads").strip()
    said = [premise, measured_sentence(answer), jobs, held_out_sentence(answer), beside_sentence(answer)]
    said += parts_sentences(answer) + [unread_sentence(answer)]
    return [s for s in said if s]
