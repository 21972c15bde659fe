"""The Train tab's progress as HTML, from the numbers the /train and /resume streams answer: a bar, the step, the time
left and the latest losses. No Gradio here."""

import html

from minigpt.demo.training.words import duration


def progress_html(progress: dict) -> str:
    """A progress bar, the step, the time left and the latest losses."""
    step, max_steps, state = progress["step"], progress["max_steps"], progress["state"]
    fraction = step / max_steps if max_steps else 0.0
    facts = [state]
    if max_steps:
        facts.append(f"step {step} / {max_steps}")
    if progress["seconds_left"] is not None:
        facts.append(f"about {duration(progress['seconds_left'])} left")
    if progress["train"]:
        facts.append(f"training loss {progress['train'][-1][1]:.3f}")
    if progress["validation"]:
        facts.append(f"validation loss {progress['validation'][-1][1]:.3f}")
    return (
        f'<div class="train-progress" data-state="{state}" data-step="{step}">'
        f'<div style="background:#e5e7eb;border-radius:4px;height:12px"><div style="background:#6366f1;height:12px;'
        f'border-radius:4px;width:{100 * fraction:.1f}%"></div></div>'
        f"<p>{' · '.join(facts)}</p><p>{html.escape(progress['message'])}</p></div>"
    )
