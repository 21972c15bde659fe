"""HTML for the circuit walk (the `circuit_walk` answer): its steps in order, each with the sentence its numbers say
and a small picture of those numbers (a layer x head grid, path patching's grid, the routes as bars). Lesson step 13
and the first screen's walk draw it. The looks in view.css. Nothing here computes or knows of Gradio."""

from minigpt.demo.circuits.view import esc, path_table
from minigpt.demo.core.view import head_table


def step_picture(step: dict) -> str:
    """The numbers behind a step's sentence, drawn small."""
    if step.get("path"):
        receiver = "{}.{}".format(*step["path"]["receiver"])
        caption = f"<figcaption>Each sender into one input of {receiver}</figcaption>"
        return f"<figure>{caption}{path_table(step['path'])}</figure>"
    if step.get("routes"):
        return routes_table(step["routes"][:6], step["feeder"])
    if step.get("lost"):
        return head_table(step["lost"], "Share of the copying each head's ablation takes away", False, 2)
    if step.get("heads"):
        title = "Each head's direct share of the logit" if step["name"] == "writer" else "Each head's output patched"
        return head_table(step["heads"], title, True, 2)
    return ""


def routes_table(routes: list[dict], feeder: str) -> str:
    """Each two-step route through `feeder`: the sender and the share of the answer it restores that way."""
    rows = "".join(f"<tr><th>{esc(r['sender'])}</th><td>{r['effect']:+.2f}</td></tr>" for r in routes)
    return f"<figure><figcaption>Through {esc(feeder)}, from</figcaption><table class='grid'>{rows}</table></figure>"


def why_button(step: dict, query: int) -> str:
    """In the "where to look" step, a button asking why its head looks from the last token at the key (maps/head.js
    answers under the enlarged maps, /attention_why)."""
    path = step.get("path")
    if not path or not str(step.get("what", "")).endswith("where to look"):
        return ""
    (layer, head), key = path["receiver"], path["key_position"]
    return (
        f'<p class="why-keys"><button type="button" data-why-key="{key}" data-query="{query}" data-layer="{layer}" '
        f'data-head="{head}">Why does {layer}.{head} look at {esc(path["key_token"])!r} (key {key})?</button> '
        '<span class="why-status" aria-live="polite"></span></p>'
    )


def walk_html(answer: dict) -> str:
    """The walk's steps, numbered, each: its question, what was measured and found, and the picture of it."""
    query = len(answer["ids"]) - 1
    items = "".join(
        f'<li data-step="{esc(step["name"])}"><h5>{esc(step["title"])}</h5><p class="finding">{esc(step["finding"])}'
        f'</p><div class="maps">{step_picture(step)}</div>{why_button(step, query)}</li>'
        for step in answer["steps"]
    )
    return f'<div class="insight circuits walk"><ol class="walk">{items}</ol></div>'
