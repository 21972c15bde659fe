"""The head tools, "What does this head do?": next-token probabilities and the logit lens, ablation, importance, head
roles, two texts compared."""
