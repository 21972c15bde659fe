"""The Train tab's progress as HTML: a bar, the step, the time left and the latest losses. No Gradio here."""

import html

from minigpt.demo.training.run_folder import Progress


def duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def progress_html(progress: Progress) -> str:
    """A progress bar, the step, the time left and the latest losses."""
    fraction = progress.step / progress.max_steps if progress.max_steps else 0.0
    facts = [progress.state]
    if progress.max_steps:
        facts.append(f"step {progress.step} / {progress.max_steps}")
    if progress.seconds_left is not None:
        facts.append(f"about {duration(progress.seconds_left)} left")
    if progress.train:
        facts.append(f"training loss {progress.train[-1][1]:.3f}")
    if progress.validation:
        facts.append(f"validation loss {progress.validation[-1][1]:.3f}")
    return (
        f'<div class="train-progress" data-state="{progress.state}" data-step="{progress.step}">'
        f'<div style="background:#e5e7eb;border-radius:4px;height:12px"><div style="background:#6366f1;height:12px;'
        f'border-radius:4px;width:{100 * fraction:.1f}%"></div></div>'
        f"<p>{' · '.join(facts)}</p><p>{html.escape(progress.message)}</p></div>"
    )
