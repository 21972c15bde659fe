"""The Train tab's words: its introduction with this server's limits, the form's labels and choices, the note under the
loss plot, and a duration as the tab says it. Text, and the limits it states (run_requests, training_runs): no Gradio,
no model."""

from minigpt.demo.training import run_requests, training_runs

SIZE_FIELDS = {
    "n_layer": "Layers",
    "n_head": "Heads",
    "n_embd": "Width (n_embd)",
    "block_size": "Context (tokens)",
    "max_steps": "Steps",
    "seed": "Seed",
    "vocab_size": "BPE vocabulary size",
}


TOKENIZER_LABEL = "Tokenizer (none chosen: names for names, bpe for Shakespeare, char for your text)"


DATA_CHOICES = [
    ("Built-in names", "names"),
    ("Built-in Shakespeare", "shakespeare"),
    ("Induction lab: names written twice", "induction"),
    ("Your names or text", "text"),
]


LOSS_NOTE = (
    "Validation can sit below training loss: each training point is the mean over the steps since the previous one "
    "(the model was worse at their start) and is measured with dropout on; validation is measured at that step, "
    "dropout off. The dotted line is chance: a uniform guess over the vocabulary, ln V nats a token."
)


TRAIN_INTRO = f"""Train a small GPT here, watch its loss fall, then look inside it: when it finishes, it joins the
model picker of every view and can be downloaded as a zip of its folder (ready to push to the Hub). Training runs
train.py (the Trainer, its data pipeline and checkpoints), one run at a time on this server: yours waits in a queue
if another is going. Cancel stops it within a step and keeps a checkpoint; Resume (same name) continues from it. A run
is yours by a token this browser keeps: only you watch, cancel and resume it, also after reloading the page.

**Limits:** your text or file at most {run_requests.MAX_TEXT_BYTES / 1e6:g} MB; names are a-z only, one a line, at
least {run_requests.MIN_NAMES}; a text at least {run_requests.HELD_OUT} contexts long (its last tenth is held out to
validate); at most {run_requests.MAX_PARAMETERS / 1e6:g}M parameters and {run_requests.MAX_STEPS:,} steps, and
parameters x steps x tokens a step at most {run_requests.MAX_WORK:.1e} (about 15 minutes on 2 CPU cores), and
about {run_requests.MAX_TRAINING_BYTES / 2**30:g} GiB of memory (attention grows with batch x heads x context^2); a
run stops, with a checkpoint, after {run_requests.MAX_RUN_SECONDS // 60} minutes; {training_runs.MAX_RUNS_PER_VISITOR}
runs of yours queued or training at a time. Model names: a-z, digits and '-'.
"""


def duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"
