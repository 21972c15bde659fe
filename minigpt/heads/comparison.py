"""Two texts compared: the difference of their attention maps, head by head, and the second text made for it (the
text with one token replaced by the model's most likely other token there).

Shapes: L layers, H heads, N tokens both texts have.
"""

import torch

from minigpt.heads.errors import InstrumentError, checked_count, checked_position
from minigpt.heads.recorded_pass import ForwardPass


def compare_attention(first: ForwardPass, second: ForwardPass) -> tuple[torch.Tensor, torch.Tensor]:
    """(L, H, N, N) first's attention weights minus second's over their first N = min(T1, T2) tokens, and (L, H) the
    mean absolute difference per head over the visible (query, key) pairs. Causal attention makes the first N rows of a
    longer text's maps those of its first N tokens alone, so texts of different lengths compare over their common
    positions."""
    length = min(len(first.input_ids), len(second.input_ids))
    difference = first.attentions[..., :length, :length] - second.attentions[..., :length, :length]  # (L, H, N, N)
    visible = length * (length + 1) / 2  # causal: the lower triangle
    return difference, difference.abs().sum(dim=(-2, -1)) / visible


def likely_replacements(model, recorded: ForwardPass, position: int, never_ids: set[int], k: int = 1) -> list[int]:
    """The k tokens the model finds most likely at `position` (what it predicts from position - 1) other than the one
    there and `never_ids`, most likely first."""
    ids = list(recorded.input_ids)
    position, k = checked_position(position, len(ids)), checked_count(k, "k", "the replacements listed")
    if position == 0:
        raise InstrumentError("position 0 is the start token, which nothing predicts: give a later position.")
    logits = recorded.logits(model)[position - 1].float().clone()
    logits[[ids[position], *never_ids]] = float("-inf")
    # At most the vocabulary: a 28-token model has fewer than the k a caller may ask for
    return [int(i) for i in logits.topk(min(k, logits.numel())).indices if logits[i] > float("-inf")]


def one_token_changed(model, recorded: ForwardPass, never_ids: set[int]) -> list[int]:
    """The text's ids with its last token replaced by the model's most likely other token there (none of
    `never_ids`): a second text of the same length that differs in one place, for comparing two texts' maps."""
    ids = list(recorded.input_ids)
    if len(ids) < 2:
        raise InstrumentError("The text is empty: type at least one character to compare.")
    return ids[:-1] + likely_replacements(model, recorded, len(ids) - 1, never_ids)


__all__ = ["compare_attention", "likely_replacements", "one_token_changed"]
