"""Prompt sets for the page's measurements over more than one text: the visitor's text (or clean and corrupted pair)
with variants that keep its repeats and its differences, other tokens in place of its own (minigpt.heads.variants);
and what resample ablation puts in for a text: its heads' outputs on such a variant. Over the model's ordinary tokens
(not the boundary, end or padding tokens, which stay where they are). No Gradio here."""

import torch

from minigpt.demo.core.inputs import number
from minigpt.errors import VisitorError
from minigpt.heads import ablation_values, variants

MAX_PROMPTS = 16  # the text and 15 variants: each measurement runs once per prompt
RESAMPLE_PROMPTS = 8  # the text and the variants whose heads' outputs resample ablation draws from


def prompt_count(value) -> int:
    """How many prompts a measurement runs on (1: the text alone), as a visitor types it."""
    count = number("prompts", value, 1, int)
    if not 1 <= count <= MAX_PROMPTS:
        raise VisitorError(
            f"prompts must be 1 (the text alone) to {MAX_PROMPTS} (the text and {MAX_PROMPTS - 1} variants), got "
            f"{count}."
        )
    return count


def special_tokens(lm) -> set[int]:
    return {lm.boundary_id, lm.eos_id, *lm.never_ids} - {None}


def ordinary_tokens(lm) -> list[int]:
    """The tokens a variant may put in a text's place: all but the boundary, end and padding tokens."""
    kept = special_tokens(lm)
    return [t for t in range(lm.vocab_size) if t not in kept]


def text_variants(lm, texts: list[list[int]], count: int, seed: int = 0) -> torch.Tensor:
    """(count, len(texts), T): the texts, then count - 1 variants of them all (one swap of tokens each)."""
    return variants(texts, count, ordinary_tokens(lm), special_tokens(lm), seed)


def resample_values(lm, ids: list[int], seed: int = 0) -> torch.Tensor:
    """(1, L, T, C) what resample ablation puts in on the text: each head's output on another prompt of its set (the
    text and RESAMPLE_PROMPTS - 1 variants; a seeded shuffle that moves every prompt), the text's row."""
    prompts = text_variants(lm, [ids], RESAMPLE_PROMPTS, seed)[:, 0]
    return ablation_values(lm.model, prompts, "resample", seed)[:1]


def described(count: int, left_out: int = 0) -> str:
    """The prompt set in words: "over the text and 7 variants of it (...)"."""
    if count == 1 and not left_out:
        return "on the text alone"
    kept = f"the text and {count - 1} variants of it" if count > 1 else "the text"
    dropped = f"; {left_out} more left out, their answer unchanged" if left_out else ""
    return f"over {kept} (the same repeats and differences, other tokens{dropped})"
