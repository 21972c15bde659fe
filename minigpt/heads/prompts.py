"""Prompt sets: one text says little about what a head is for; many texts of the same shape say more. Two kinds:

- `repeated_tokens`: random tokens written twice (the induction task: the second copy is predictable only by copying
  from the first);
- `variants`: a text with its tokens swapped for others, token for token, so that every repeat, and every place where
  a corrupted text differs, stays where it was: "Romeo and Juliet, Romeo and Jul" -> "Kqfxo vbd Kqzwfs, Kqfxo vbd
  Kqz" (the same structure, other tokens);

and `over_prompts`, which runs one measurement on each prompt (or pair) and gives its mean, its spread and how many.

Ids are lists of ints or (T,) tensors; a prompt set is an (N, T) long tensor, its first prompt the text itself.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from minigpt.heads.errors import InstrumentError, checked_count


def repeated_tokens(allowed: list[int], start_id: int, count: int, half: int, seed: int = 0) -> torch.Tensor:
    """(count, 1 + 2 * half): the start token, then `half` random tokens of `allowed`, then the same again; within a
    copy no token repeats while `allowed` has enough tokens (so each token's earlier occurrence is unique)."""
    count, half = checked_count(count, "count", "prompts"), checked_count(half, "half", "the tokens of each copy")
    if not len(allowed):
        raise InstrumentError("allowed is empty: give the tokens a random prompt may hold.")
    generator, choices = torch.Generator().manual_seed(seed), torch.tensor(allowed, device="cpu")
    rows = []
    for _ in range(count):
        if len(allowed) >= half:
            first = choices[torch.randperm(len(allowed), generator=generator, device="cpu")[:half]]
        else:
            first = choices[torch.randint(len(allowed), (half,), generator=generator, device="cpu")]
        rows.append(torch.cat([torch.tensor([start_id], device="cpu"), first, first]))
    return torch.stack(rows)


def swapped(texts: list[list[int]], allowed: list[int], kept: set[int], generator) -> list[list[int]]:
    """`texts` with every token not in `kept` swapped for another token of `allowed`, one-to-one (the same token
    always becomes the same new one, two tokens never the same), drawn with `generator`."""
    tokens = sorted({t for text in texts for t in text} - kept)
    pool = [t for t in allowed if t not in kept]
    if len(pool) < len(tokens):
        raise InstrumentError(
            f"The text uses {len(tokens)} different tokens and the model offers {len(pool)} to swap them for: a "
            "variant needs as many. Use a shorter text."
        )
    chosen = torch.tensor(pool, device="cpu")[
        torch.randperm(len(pool), generator=generator, device="cpu")[: len(tokens)]
    ].tolist()
    mapping = dict(zip(tokens, chosen))
    return [[mapping.get(t, t) for t in text] for text in texts]


def variants(texts, count: int, allowed: list[int], kept: set[int], seed: int = 0) -> torch.Tensor:
    """(count, len(texts), T): the texts themselves first (a text, or a clean and a corrupted text together), then
    count - 1 variants, each with the tokens of all the texts swapped by one mapping (see `swapped`): the repeats
    within a text and the differences between the texts stay where they are. `kept`: tokens never swapped (the start
    token)."""
    count = checked_count(count, "count", "the prompts of the set, the texts themselves first")
    texts = [list(map(int, text)) for text in texts]
    if len({len(text) for text in texts}) != 1:
        raise InstrumentError("The texts of a prompt set must have the same number of tokens.")
    generator = torch.Generator().manual_seed(seed)
    found = [texts] + [swapped(texts, allowed, kept, generator) for _ in range(count - 1)]
    return torch.tensor(found, device="cpu")


@dataclass
class OverPrompts:
    """One measurement over a prompt set: its mean, its standard deviation over the prompts (0 for one) and how many
    prompts it was measured on (those that could be: a pair whose answers do not differ is left out)."""

    mean: torch.Tensor
    spread: torch.Tensor
    prompts: int
    left_out: int


def over_prompts(
    measure: Callable, prompts, can_fail: type[Exception] = InstrumentError, first_required: bool = False
) -> OverPrompts:
    """measure(prompt) -> a tensor (or float) for each prompt of `prompts` (an iterable); the prompts on which it
    raises `can_fail` (an InstrumentError: nothing to measure there) are counted as left out, but for the first with
    `first_required` (the text a set was made from: its refusal says what to change)."""
    found, left_out = [], 0
    for index, prompt in enumerate(prompts):
        try:
            found.append(torch.as_tensor(measure(prompt), dtype=torch.float32, device="cpu"))
        except can_fail:
            if first_required and index == 0:
                raise
            left_out += 1
    if not found:
        raise InstrumentError(f"None of the {left_out} prompts could be measured.")
    stacked = torch.stack(found)
    spread = stacked.std(dim=0, correction=1) if len(found) > 1 else torch.zeros_like(stacked[0])
    return OverPrompts(stacked.mean(dim=0), spread, len(found), left_out)


def standard_error(result: OverPrompts) -> torch.Tensor:
    """The mean's standard error: spread / sqrt(prompts)."""
    return result.spread / math.sqrt(result.prompts)


__all__ = ["OverPrompts", "over_prompts", "repeated_tokens", "standard_error", "variants"]
