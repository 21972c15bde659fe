"""HTML for the circuit walk (the `circuit_walk` answer): its steps in order, each with the sentence its numbers say
and a small picture of those numbers (a layer x head grid, path patching's grid, the routes as bars). Lesson step 13
and the first screen's walk draw it. The looks in circuits.css. Nothing here computes or knows of Gradio."""

from minigpt.demo.views.circuits import bar_rows, esc, path_html
from minigpt.demo.views.insights import head_table


def step_picture(step: dict) -> str:
    """The numbers behind a step's sentence, drawn small."""
    if step.get("path"):
        return path_html(step["path"])
    if step.get("routes"):
        return bar_rows([(f"{r['sender']} → {step['feeder']}", r["effect"]) for r in step["routes"][:6]], width=120)
    if step.get("lost"):
        return head_table(step["lost"], "Share of the copying each head's ablation takes away", False, 2)
    if step.get("heads"):
        title = "Each head's direct share of the logit" if step["name"] == "writer" else "Each head's output patched"
        return head_table(step["heads"], title, True, 2)
    return ""


def walk_html(answer: dict) -> str:
    """The walk's steps, numbered, each: its question, what was measured and found, and the picture of it."""
    items = "".join(
        f'<li data-step="{esc(step["name"])}"><h5>{esc(step["title"])}</h5><p class="finding">{esc(step["finding"])}'
        f'</p><div class="maps">{step_picture(step)}</div></li>'
        for step in answer["steps"]
    )
    return f'<div class="insight circuits walk"><ol class="walk">{items}</ol></div>'
