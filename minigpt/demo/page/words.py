"""The page's words: what this is and where to start, above every section. Text only: no Gradio, no model."""

INTRO = """# MiniGPT: watch attention at work
A small GPT written to be read, as a 🤗 `transformers` model. Generate **names** or **text**, then look at how every
attention head of every layer spreads its attention over the tokens: each small map is one head (rows: the token that
looks; columns: the tokens it looks at; grey: future tokens it cannot see). Click a map to see it large.

**Start here:** generate a few names, then follow the *Lesson* below the maps: thirteen steps through the whole model,
from your name's letters to its next-letter probabilities, each with the model's real numbers on your text, in plain
words or with formulas. Click a map to see it large, and a row of it to follow that token through the lesson.

**Or see heads work together:** the button below shows the `specimen` model on a text written twice and finds, step
by step in its own numbers, which heads copy the repeated part and how (the induction circuit; lesson step 13). The
second button asks you to predict first; the *Exercises* section below asks more, on any text.
"""
