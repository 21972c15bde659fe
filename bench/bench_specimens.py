"""The head roles of models, as the demo's Head roles view measures them: the README's roles table and the sweep that
chose the specimen preset.

    python bench/bench_specimens.py                          # every shipped model (models/*)
    python bench/bench_specimens.py runs/specimen runs/lab   # or model folders

For each model, the best head of each role with its score and the role's chance level (attention spread evenly), the
heads at least halfway from chance to 1, and the induction probe's loss on its first and its repeated half. Previous
token, first token (the sink) and self are scored on PASSAGE (for a model of letters a-z, its letters alone);
induction on the view's probes, random tokens written twice. The numbers come from the app's own endpoint function
(`Insights.head_roles`), so they are what the page shows for that text.
"""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from minigpt.demo.core.models import SHIPPED  # noqa: E402
from minigpt.demo.core.state import DemoState  # noqa: E402
from minigpt.demo.head_tools.endpoints import Insights  # noqa: E402
from minigpt.errors import VisitorError  # noqa: E402

# Two lines of Hamlet: they fit every shipped context, so the start token stays first.
PASSAGE = "To be, or not to be, that is the question:\nWhether 'tis nobler in the mind to suffer\n"

ROLES = ("previous_token", "first_token", "self", "induction")


def letters_only(text: str) -> str:
    return "".join(c for c in text.lower() if "a" <= c <= "z")


def roles_of(insights: Insights, model: str) -> dict:
    """The /head_roles answer for the passage, or for its letters when the model reads only a-z."""
    try:
        return insights.head_roles(PASSAGE, model)
    except VisitorError:
        return insights.head_roles(letters_only(PASSAGE)[:60], model)


def best(answer: dict, role: str) -> str:
    top = answer["top_heads"][role][0]
    return f"{top['layer']}.{top['head']}: {top['score']:.2f} (chance {answer['chance'][role]:.2f})"


def main(folders: list[str]) -> None:
    state = DemoState.configure(extra=folders, training=False)
    names = [n for n in state.picker.names if not folders or n not in SHIPPED]
    insights = Insights(state)
    print("| model | " + " | ".join(ROLES) + " | clearly above chance | probe loss: first half -> repeated |")
    print("|---" * (len(ROLES) + 3) + "|")
    for name in names:
        answer = roles_of(insights, name)
        above = ", ".join(f"{a['layer']}.{a['head']} {a['role']}" for a in answer["above_chance"]) or "none"
        probe = answer["probe"]
        ratio = probe["repeated_half_loss"] / probe["first_half_loss"]
        losses = f"{probe['first_half_loss']:.2f} -> {probe['repeated_half_loss']:.2f} ({ratio:.2f}x)"
        print(f"| {name} | " + " | ".join(best(answer, r) for r in ROLES) + f" | {above} | {losses} |")


if __name__ == "__main__":
    main(sys.argv[1:])
