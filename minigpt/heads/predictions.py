"""What the model predicts, read from its own modules: the next-token probabilities at a position of a text, the
probabilities the sampler drew each token of a generated text with, and the logit lens (what each point of the
residual stream would predict through the final norm and the LM head).

Shapes: L layers, T tokens, C width, V vocabulary, N rows.
"""

import torch

from minigpt.heads.errors import checked_count, checked_position
from minigpt.heads.recorded_pass import ForwardPass, unembed


def top_tokens(logits: torch.Tensor, k: int) -> tuple[list[int], list[float]]:
    """The k most likely next tokens of (V,) logits and their probabilities (softmax of the logits)."""
    k = checked_count(k, "k", "the most likely tokens listed")
    probabilities = logits.float().softmax(dim=-1)  # (V,)
    values, ids = probabilities.topk(min(k, probabilities.numel()))
    return ids.tolist(), values.tolist()


def next_token_probabilities(model, recorded: ForwardPass, position: int, k: int = 10) -> dict:
    """The top-k next tokens at `position`, the probability the model gave the token that actually follows, and the
    (V,) logits they come from."""
    position = checked_position(position, len(recorded.input_ids))
    logits = recorded.logits(model, position)  # (V,)
    ids, probabilities = top_tokens(logits, k)
    answer = {"position": position, "top_ids": ids, "top_probabilities": probabilities, "logits": logits}
    if position + 1 < len(recorded.input_ids):
        following = recorded.input_ids[position + 1]
        answer |= {"next_id": following, "next_probability": float(logits.softmax(-1)[following])}
    return answer


def warped_probabilities(logits: torch.Tensor, warp=None, never_ids=()) -> torch.Tensor:
    """(N, V) logits -> (N, V) the probabilities the sampler draws from: the softmax after its warpers (`warp(None,
    logits)`: temperature, top-k, top-p, transformers' own) and without `never_ids`. No warpers: the model's own."""
    logits = logits.float().clone()
    logits[:, list(never_ids)] = float("-inf")
    if warp is not None:
        logits = warp(None, logits)
    return logits.softmax(dim=-1)


def sampled_probabilities(logits: torch.Tensor, ids: list[int], warp=None, never_ids=()) -> torch.Tensor:
    """(T - 1,) the probability each token ids[t + 1] had when it was drawn after ids[..t], from (T, V) `logits`
    (position t predicts token t + 1), as the text loop samples (`warped_probabilities`)."""
    probabilities = warped_probabilities(logits[:-1], warp, never_ids)  # (T - 1, V)
    return probabilities.gather(1, torch.tensor(ids[1:], device=probabilities.device)[:, None]).squeeze(1)


def logit_lens(model, recorded: ForwardPass, position: int, k: int = 3) -> list[tuple[list[int], list[float]]]:
    """Per point of the residual stream (after the embeddings, then after each block), the top-k tokens that the
    final layer norm and LM head would predict from it at `position`. The last entry is the model's prediction."""
    position = checked_position(position, len(recorded.input_ids))
    logits = unembed(model, recorded.residual[:, position])  # (L + 1, C) -> (L + 1, V)
    return [top_tokens(row, k) for row in logits]


__all__ = [
    "logit_lens",
    "next_token_probabilities",
    "sampled_probabilities",
    "top_tokens",
    "warped_probabilities",
]
