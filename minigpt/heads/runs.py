"""Plain runs of a model, the ones the circuits hook (`hooks`): a text's ids as a batch of one, a forward pass without
gradients or cache, and the logits at its last position.

Ids: a list of ints, or a (T,) or (1, T) tensor. The model runs as it is: put it in eval mode (dropout off) first.
"""

import torch

from minigpt.heads.errors import InstrumentError, checked_ids


def as_batch(ids, vocab_size: int, name: str = "ids") -> torch.Tensor:
    """(1, T) long tensor of a list of ids (on the CPU: each run moves them to the model's device) or a (T,) / (1, T)
    tensor (where it is), each id one of the vocabulary's `vocab_size` (`name`: the argument, for the message)."""
    ids = checked_ids(ids, vocab_size, name)
    ids = ids if ids.dim() == 2 else ids[None]
    if ids.dim() != 2 or ids.shape[0] != 1 or ids.shape[1] == 0:
        raise InstrumentError(
            f"{name}: give one non-empty text (a list of token ids), not a batch of shape {tuple(ids.shape)}."
        )
    return ids


def run(model, ids: torch.Tensor, **kwargs):
    """The model's output on (B, T) ids: no gradients, no KV cache."""
    with torch.no_grad():
        return model(input_ids=ids.to(model.device), use_cache=False, **kwargs)


def last_logits(model, ids: torch.Tensor, **kwargs) -> tuple[torch.Tensor, object]:
    """(B, V) float logits at the last position, and the model's output."""
    out = run(model, ids, logits_to_keep=1, **kwargs)
    return out.logits[:, -1].float().cpu(), out
