"""Prompt sets and the three ablations (minigpt.heads.prompts, insights.ablation_values): a variant keeps every repeat
and every difference between a clean and a corrupted text where it was; mean ablation puts in the heads' outputs
averaged over the prompts and positions, resample ablation another prompt's outputs, each equal to that replacement
made by hand; a measurement over prompts gives the mean and spread torch computes; on the specimen, keeping heads 0.0,
0.2 and 1.1 and mean-ablating the rest keeps most of its in-context copying, keeping 0.2 and 1.1 alone does not."""

import pytest
import torch
from transformers import AutoModelForCausalLM

import modeling_minigpt  # noqa: F401 (registers MiniGPT with the Auto classes)
from helpers import SPECIMEN, tiny_model
from minigpt import heads
from minigpt.heads.errors import InstrumentError


def same_where(a: list[int], b: list[int]) -> list[list[bool]]:
    return [[x == y for y in b] for x in a]


def test_a_variant_keeps_the_repeats_and_the_differences_where_they_were():
    clean = [0, 5, 6, 7, 5, 6, 9, 5, 6]
    corrupted = [0, 5, 6, 8, 5, 6, 9, 5, 6]  # position 3 changed
    allowed = list(range(1, 40))
    found = heads.variants([clean, corrupted], 6, allowed, kept={0}, seed=3)
    assert found.shape == (6, 2, 9) and found[0].tolist() == [clean, corrupted]  # the texts themselves first
    for pair in found[1:].tolist():
        assert pair[0][0] == pair[1][0] == 0  # the start token is kept
        assert same_where(pair[0], pair[0]) == same_where(clean, clean)  # every repeat where it was
        assert same_where(pair[0], pair[1]) == same_where(clean, corrupted)  # and every difference
        assert pair[0] != clean and set(pair[0][1:]) <= set(allowed)
    assert torch.equal(found, heads.variants([clean, corrupted], 6, allowed, kept={0}, seed=3))  # seeded
    with pytest.raises(InstrumentError, match="uses 5 different tokens and the model offers 3"):
        heads.variants([clean, corrupted], 2, [1, 2, 3], kept={0})


def test_mean_and_resample_ablation_put_in_what_they_say():
    model = tiny_model(seed=5)
    prompts = torch.randint(1, 50, (4, 7), generator=torch.Generator().manual_seed(0))
    merged = []  # the prompts' out_proj inputs, with this file's own hooks: (N, L, T, C)
    handles = [
        block.attn.out_proj.register_forward_pre_hook(lambda m, a: merged.append(a[0])) for block in model.model.layers
    ]
    with torch.no_grad():
        plain = model(prompts, use_cache=False).logits
    for handle in handles:
        handle.remove()
    merged = torch.stack(merged, dim=1)
    torch.testing.assert_close(heads.ablation_values(model, prompts, "mean"), merged.mean(dim=(0, 2)))
    resampled = heads.ablation_values(model, prompts, "resample", seed=1)
    sources = [next(j for j in range(4) if torch.equal(resampled[i], merged[j])) for i in range(4)]
    assert sorted(sources) == [0, 1, 2, 3] and all(
        i != j for i, j in enumerate(sources)
    )  # every prompt reads another's
    assert heads.ablation_values(model, prompts, "zero") is None
    # Head 1.2 resampled: prompt i runs with head 1.2's slice of out_proj's input taken from prompt sources[i]
    D = model.config.head_dim
    mask = heads.head_mask([(1, 2)], model.config.n_layer, model.config.n_head)
    with heads.heads_ablated(model, mask, resampled), torch.no_grad():
        found = model(prompts, use_cache=False).logits

    def by_hand(module, args):
        patched = args[0].clone()
        patched[:, :, 2 * D : 3 * D] = merged[sources, 1, :, 2 * D : 3 * D]
        return (patched,)

    handle = model.model.layers[1].attn.out_proj.register_forward_pre_hook(by_hand)
    with torch.no_grad():
        expected = model(prompts, use_cache=False).logits
    handle.remove()
    torch.testing.assert_close(found, expected)
    assert not torch.allclose(found, plain)
    with pytest.raises(InstrumentError, match="at least two prompts"):
        heads.ablation_values(model, prompts[:1], "resample")


def test_a_measurement_over_prompts_gives_its_mean_spread_and_count():
    values = {1: torch.tensor([1.0, 2.0]), 2: torch.tensor([3.0, 6.0]), 3: torch.tensor([5.0, 1.0])}

    def measure(prompt):
        if prompt == 4:
            raise InstrumentError("nothing to measure on this one")
        return values[prompt]

    found = heads.over_prompts(measure, [1, 2, 3, 4])
    stacked = torch.stack(list(values.values()))
    torch.testing.assert_close(found.mean, stacked.mean(0))
    torch.testing.assert_close(found.spread, stacked.std(0))
    assert (found.prompts, found.left_out) == (3, 1)
    with pytest.raises(InstrumentError, match="None of the 1 prompts"):
        heads.over_prompts(measure, [4])


def repeated_half_loss(model, prompts, keep: list[tuple[int, int]], values) -> float:
    """The mean loss of predicting the second copy, with every head but `keep` ablated by `values`."""
    L, H = model.config.n_layer, model.config.n_head
    ablate = ~heads.head_mask(keep, L, H) if values is not False else torch.zeros(L, H, dtype=torch.bool)
    with heads.heads_ablated(model, ablate, None if values is False else values), torch.no_grad():
        logits = model(prompts, use_cache=False).logits.float()
    half = (prompts.shape[1] - 1) // 2
    losses = torch.nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), prompts[:, 1:], reduction="none")
    return float(losses[:, half + 1 :].mean())  # tokens half + 2 .. 2 half: the predictable part of the second copy


def test_the_specimen_needs_head_0_0_beside_0_2_and_1_1_for_in_context_copying():
    """Issue 50: over 24 prompts of random tokens written twice, mean-ablating every head but 0.2 and 1.1 keeps a
    small part of what the heads do for the repeated half; keeping 0.0 too keeps most of it."""
    model = AutoModelForCausalLM.from_pretrained(SPECIMEN).eval()
    start = model.config.bos_token_id
    allowed = [t for t in range(model.config.vocab_size) if t != start]
    prompts = heads.repeated_tokens(allowed, start, 24, 20, seed=0)
    means = heads.ablation_values(model, prompts, "mean")
    full = repeated_half_loss(model, prompts, [], False)
    none = repeated_half_loss(model, prompts, [], means)

    def kept(keep):
        return (none - repeated_half_loss(model, prompts, keep, means)) / (none - full)

    assert kept([(0, 2), (1, 1)]) < 0.35 and kept([(0, 0), (0, 2), (1, 1)]) > 0.8
