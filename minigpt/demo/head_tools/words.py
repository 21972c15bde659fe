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
