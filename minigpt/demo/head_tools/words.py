"""The head tools' words: the section's introduction, each head role's name and sentence with the pattern that shows
it, the note under a generated text's colours. The sentences written from an answer's numbers are the view's. Text
only: no Gradio, no model."""

HEAD_TOOLS_INTRO = "## What does this head do?\nOn the text and model above. Click a token to pick its position."

ROLES = {
    "previous_token": (
        "Previous token",
        "The head looks at the token just before the current one.",
        ".ABCD",
        {1: 0, 2: 1, 3: 2, 4: 3},
    ),
    "first_token": (
        "First token / boundary sink",
        "The head parks its attention on the start token, often when it has nothing better to do.",
        ".ABCD",
        {1: 0, 2: 0, 3: 0, 4: 0},
    ),
    "self": ("Self", "The head looks at the current token itself.", ".ABCD", {1: 1, 2: 2, 3: 3, 4: 4}),
    "induction": (
        "Induction (on the repeated random probe)",
        "When the current token appeared before, the head looks at the token that came after it then: the head that "
        "lets a model copy from its context ('A B C A' -> look at 'B', and predict it).",
        ".ABCA",
        {4: 2},
    ),
}

CLICK_A_CELL = "Click a cell to see that head's map."

SAMPLED_NOTE = (
    "Each generated token coloured by the probability it was sampled with (after temperature, top-k and top-p; "
    "greedy: the model's own); yellow: likely, purple: a surprise. Hover for the number."
)

JOB_WORDS = {  # a head's measured job (`role_scores.measured_jobs`), as a phrase after "head L.H"
    "first_token": "parks its attention on the start token",
    "self": "looks at its own token",
    "same_token": "looks at earlier copies of its own token",
    "induction": "does induction (it looks at what followed its token the last time)",
    "induction_on_text": "does induction (it looks at what followed its token the last time)",
}


def job_phrase(job: dict) -> str:
    """What a head was measured to do most, in words: 'looks 2 tokens back', 'parks its attention on the start
    token'."""
    if job["role"] != "offset":
        return JOB_WORDS[job["role"]]
    return "looks at the previous token" if job["offset"] == 1 else f"looks {job['offset']} tokens back"


def job_sentence(name: str, job: dict, measured_on: str = "this text") -> str:
    """Head `name`'s measured job with its numbers; a head with no clear job is said to have none, with its best."""
    numbers = f"{job['score']:.2f} of its weight, chance {job['chance']:.2f}, on {measured_on}"
    if job["clear"]:
        return f"Head {name} {job_phrase(job)} ({numbers})."
    return f"Head {name} does no one thing clearly: at most, it {job_phrase(job)} ({numbers})."


def job_clause(name: str, job: dict) -> str:
    """'0.0 looks 2 tokens back (0.93 of its weight, chance 0.06)'; a head with no clear job: 'at most, ...'."""
    numbers = f"({job['score']:.2f} of its weight, chance {job['chance']:.2f})"
    return f"{name} {job_phrase(job)} {numbers}" if job["clear"] else f"{name}, at most, {job_phrase(job)} {numbers}"
