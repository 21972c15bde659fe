"""The Head Finder's words: the section's introduction and each metric's definition (the answer's `definitions`). Text
only: no Gradio, no model."""

FINDER_INTRO = (
    "Every head of the model above, measured over many windows of text instead of one: where it looks, how "
    "spread and how far, and how much the model needs it. Empty corpus: the model's own validation text."
)

DEFINITIONS = {
    "previous_token": "weight on the token just before (i − 1)",
    "self": "weight on the token itself (i)",
    "sink": "weight on the window's first token (the start token: where a head rests when it has nothing to do)",
    "induction": "weight on the token after an earlier copy of the current token (j + 1 where t[j] = t[i])",
    "entropy": "how spread the weights are, −Σ a·log a in nats (log(i + 1) when even; 0 on one key)",
    "distance_mean": "mean distance i − j the weight falls at",
    "distance_spread": "standard deviation of that distance",
    "ablation": "mean loss increase per token when this head alone outputs zeros",
}
