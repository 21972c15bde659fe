"""The sentences the found circuit's view says, written from the `find_circuit` answer's numbers: what was measured
(the task, the prompts, the scores, the ablation), what the circuit keeps, its faithfulness with the metric's three
values behind it, and the inputs of the heads that write to the logits. The scores are named as estimates, the
faithfulness as what the exact run measured on these prompts; nothing is said that another prompt set or ablation could
contradict without saying on what it was measured. No Gradio, no torch."""

METHOD_WORDS = {"eap-ig": "EAP-IG (attribution with integrated gradients)", "eap": "EAP (attribution patching)"}
ABLATION_WORDS = {
    "mean": "its mean output over the prompts",
    "corrupted": "its output on the corrupted prompt",
}
INPUT_WORDS = {"q": "query", "k": "key", "v": "value"}
TOP_NAMED = 3  # the largest-scored edges named
WRITERS_NAMED = 2  # the heads writing to the logits whose inputs are named


def share(value: float) -> str:
    return f"{value:.0%}"


def edge_words(edge: dict) -> str:
    into = f"'s {INPUT_WORDS[edge['input']]}" if edge["input"] else ""
    return f"{edge['sender']} → {edge['receiver']}{into}"


def measured_sentence(answer: dict) -> str:
    prompts = answer["prompts"]
    if answer["task"] == "induction":
        what = f"On {prompts['described']} ({prompts['length']} tokens each, the start token included)"
        corrupted = "each corrupted by another first half"
    else:
        what = f"On “{answer['text']}” {prompts['described']}"
        corrupted = f"against “{answer['corrupted_text']}” and its variants"
    return (
        f"{what}, {corrupted}: every edge of the model's graph scored by {METHOD_WORDS[answer['method']]}, and the "
        f"fewest top edges kept whose exact run reaches {answer['target']:.2f} of the behaviour, every other edge "
        f"carrying, in place of its sender's output, {ABLATION_WORDS[answer['ablation']]}."
    )


def kept_sentence(answer: dict) -> str:
    heads = answer["heads"]
    named = f" ({', '.join(heads)})" if heads and len(heads) <= 12 else ""
    reached = "" if answer["faithfulness"] >= answer["target"] else f", below the target {answer['target']:.2f}"
    return (
        f"The circuit keeps {answer['kept_edges']} of the model's {answer['total_edges']} edges "
        f"({share(answer['kept_edges'] / answer['total_edges'])}) and {len(heads)} of its {answer['total_heads']} "
        f"heads{named}. Its exact run keeps {share(answer['faithfulness'])} of the behaviour (faithfulness "
        f"{answer['faithfulness']:.3f}{reached}): the {answer['metric']} is {answer['model_metric']:.3f} for the "
        f"model, {answer['ablated_metric']:.3f} with every edge ablated."
    )


def strongest_sentence(answer: dict) -> str | None:
    edges = sorted(answer["edges"], key=lambda e: -abs(e["score"]))[:TOP_NAMED]
    if not edges:
        return None
    named = ", ".join(f"{edge_words(e)} ({e['score']:+.3g})" for e in edges)
    return f"Its largest attribution scores (estimates of each edge's effect, in the metric's units): {named}."


def writers_sentences(answer: dict) -> list[str]:
    """For the heads that write to the logits in the circuit (the largest scores first): which parts feed which of
    their inputs."""
    writers = [e["sender"] for e in sorted(answer["edges"], key=lambda e: -abs(e["score"]))]
    writers = [s for s in dict.fromkeys(writers) if s[0].isdigit() and any(
        e["sender"] == s and e["receiver"] == "logits" for e in answer["edges"]
    )][:WRITERS_NAMED]  # fmt: skip
    said = []
    for head in writers:
        inputs = []
        for into, word in INPUT_WORDS.items():
            senders = [e["sender"] for e in answer["edges"] if e["receiver"] == head and e["input"] == into]
            if senders:
                inputs.append(f"its {word} from {', '.join(senders)}")
        reads = "; ".join(inputs) if inputs else "no kept edge into it (it reads what the ablation puts in)"
        said.append(f"{head} writes to the logits in the circuit; into it: {reads}.")
    return said


def found_findings(answer: dict) -> list[str]:
    """The sentences under the found circuit, in order."""
    said = [measured_sentence(answer), kept_sentence(answer), *writers_sentences(answer)]
    strongest = strongest_sentence(answer)
    return said + ([strongest] if strongest else [])
