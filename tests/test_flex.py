"""flex_attention on a CPU as a user runs it: `import minigpt.flex_cpu`, `model.set_attn_implementation(
"flex_attention_cpu")`, then plain calls and generate(), through the library's compiled flex kernel
(`compile_friendly_flex_attention`, inductor's C++ template on a CPU), nothing replaced. Equal to eager at head_dim 8
(8 tokens) and 64 (a 128-token context), without and with padding, in plain calls and in generation; packed sequences,
which torch's kernel may fail to build a mask for, and 4D tensor masks, on which it crashes, refused with a message
(see `minigpt.flex_cpu`). On a GPU, the library's own flex (`"flex_attention"`) against eager, where there is one.

The C++ kernel's bug for narrow heads (see `minigpt.flex_cpu.flex_attention_forward`) needs vectors of fewer than 16
floats: on an AVX-512 CPU such as this project's, inductor's vectors hold 16 and the bug does not show. So the narrow
heads are checked with inductor building for AVX2 (`cpp.simdlen = 256`: 8 floats a vector, what it picks on a CPU
without AVX-512), where the kernel given 8-dim heads as they are gives NaN logits; GPT-2's 64-dim heads at the CPU's
own vectors. Inductor's FX graph cache keys on its config, simdlen included, so no graph built for one width is
reused for the other.

Compiles take 2-20 s each on a CPU, so the cases are few shapes, each batched, and dynamo's state is reset around each
test: a process may compile `flex_attention` 8 times before dynamo falls back to running it uncompiled, which would
silently test the wrong path; `fail_on_recompile_limit_hit` makes that an error here instead."""

import pytest
import torch
from transformers.masking_utils import create_causal_mask

from helpers import tiny_model
from minigpt.flex_cpu import FLEX_CPU_MIN_HEAD_DIM, NAME

# head_dim -> context: the tests' tiny heads (8) in the 64-token context, and GPT-2's heads (64) at 128 tokens.
# 8 is widened for the CPU kernel, 64 only when padded (the padding column). The names preset's 16 takes the same path
# as 8 (widened), the shakespeare preset's 32 the same as 64, and GPT-2's full 1,024 tokens the same kernel, larger:
# each shape compiles for 10-25 s on a fresh machine (no inductor cache), so they are left out.
CONTEXTS = {8: 64, 64: 128}
SHORT = 8  # tokens: a block of 8 keys is what the narrow-head bug needs


@pytest.fixture(autouse=True)
def compiled_flex_only(monkeypatch):
    """A fresh dynamo per test (as a fresh process has), and an error rather than a silent uncompiled fallback."""
    torch._dynamo.reset()
    monkeypatch.setattr(torch._dynamo.config, "fail_on_recompile_limit_hit", True)
    yield
    torch._dynamo.reset()


def models(head_dim: int, context: int, seed: int = 0, flex: str = NAME):
    """flex (the CPU opt-in, or `flex`) and eager MiniGPTs with the same weights: 2 layers, 2 heads of head_dim."""
    sizes = dict(n_layer=2, n_head=2, n_embd=2 * head_dim, block_size=context)
    return tiny_model(flex, seed, **sizes), tiny_model("eager", seed, **sizes)


def flex_differences(head_dim: int, context: int, lengths: tuple[int, ...] | None = None) -> dict[str, float]:
    """Largest |flex - eager| over the logits of real tokens, per case: 2 rows of 8 tokens and of the full context
    (or of `lengths`), without a mask, with the all-ones mask a tokenizer gives, and left-padded (the first row 3
    tokens shorter)."""
    flex, eager = models(head_dim, context)
    differences = {}
    for length in lengths or (SHORT, context):
        ids = torch.randint(1, 50, (2, length), generator=torch.Generator().manual_seed(length))
        padded = torch.ones_like(ids)
        padded[0, :3] = 0
        for name, mask in (("no mask", None), ("all-ones mask", torch.ones_like(ids)), ("left-padded", padded)):
            with torch.no_grad():
                difference = flex(ids, attention_mask=mask).logits - eager(ids, attention_mask=mask).logits
            real = padded.bool() if name == "left-padded" else torch.ones_like(ids, dtype=torch.bool)
            differences[f"head_dim {head_dim}, {length} tokens, {name}"] = difference[real].abs().max().item()
    return differences


def assert_equal_to_eager(differences: dict[str, float]):
    wrong = {case: difference for case, difference in differences.items() if not difference <= 1e-5}  # NaN is wrong
    assert not wrong, f"compiled flex differs from eager: {wrong}"


def test_compiled_flex_equals_eager_for_gpt2s_heads_at_the_full_context_with_and_without_padding():
    """GPT-2's heads at 128 tokens. (Short prompts end in a partial block of keys: the narrow heads' check below runs
    8 tokens, widened to 32 dims.)"""
    assert_equal_to_eager(flex_differences(64, CONTEXTS[64], (CONTEXTS[64],)))


def avx2_capable() -> bool:
    return torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512")


def check_narrow_heads():
    """head_dim 8, widened for the kernel, at 8 tokens: the blocks of 8 keys the bug needs. (A widened head at a long
    context is checked above: 64-dim heads, left-padded, are widened to 80 at 128 tokens.)"""
    assert 8 < FLEX_CPU_MIN_HEAD_DIM
    assert_equal_to_eager(flex_differences(8, CONTEXTS[8], (SHORT,)))


def test_compiled_flex_equals_eager_for_narrow_heads_where_inductor_builds_for_avx2():
    """head_dim 8 with inductor building for AVX2, where the bug would show; on a CPU without AVX2 (an ARM one), at
    the CPU's own vectors."""
    from torch._inductor import config
    from torch._inductor.cpu_vec_isa import pick_vec_isa

    simdlen = {"cpp.simdlen": 256} if avx2_capable() else {}
    with config.patch(simdlen):
        assert not simdlen or pick_vec_isa().nelements() == 8  # 8 floats a vector: the kernel's short-vector path
        check_narrow_heads()


def test_compiled_flex_generates_as_eager_without_and_with_padding():
    """Greedy generation (a prompt, then one-token steps on the cache) of a batch with the all-ones mask a tokenizer
    gives, and of a left-padded batch: the same tokens and scores as eager. head_dim 8, widened to 32 for the kernel
    (the padding column inside the widening); a head that is only widened for the padding column (64 to 80) takes
    that path in the plain calls above. (A single prompt is the same kernel at batch 1: another 11 s compile.)"""
    flex, eager = models(8, context=64)
    kwargs = dict(max_new_tokens=6, do_sample=False, pad_token_id=0, output_scores=True, return_dict_in_generate=True)
    prompts = torch.randint(1, 50, (2, 9), generator=torch.Generator().manual_seed(0))
    padded = torch.ones_like(prompts)
    padded[0, :4] = 0
    batches = ((prompts, torch.ones_like(prompts)), (prompts, padded))
    for ids, mask in batches:
        with torch.no_grad():
            expected = eager.generate(ids, attention_mask=mask, **kwargs)
            got = flex.generate(ids, attention_mask=mask, **kwargs)
        assert torch.equal(got.sequences, expected.sequences)
        torch.testing.assert_close(torch.stack(got.scores), torch.stack(expected.scores), atol=1e-5, rtol=0)


def test_compiled_flex_refuses_packed_sequences_on_a_cpu_and_says_what_to_use():
    """Packed sequences need a mask that reads their ids, which torch's compiled CPU kernel may fail to build."""
    flex, _ = models(head_dim=8, context=64)
    ids = torch.randint(1, 50, (1, 29), generator=torch.Generator().manual_seed(1))
    positions = torch.cat([torch.arange(n) for n in (9, 16, 4)])[None]
    with torch.no_grad(), pytest.raises(ValueError, match="does not take packed sequences.*use sdpa or eager"):
        flex(ids, position_ids=positions)
    # Given positions of one sequence are not packed: the causal BlockMask, nothing refused (checked without running
    # the compiled kernel, which the tests above run), the mask made as the model makes it.
    embeds = flex.model.token_embedding(ids[:, :9])
    mask = create_causal_mask(flex.config, embeds, None, None, positions[:, :9])
    assert type(mask).__name__ == "BlockMask" and mask.shape[-2:] == (9, 9)


def test_compiled_flex_refuses_a_tensor_mask_on_cpu_instead_of_crashing():
    """The library's flex path reads a tensor mask in a score_mod by chained indexing (mask[b][0][q][kv]), and torch
    2.13's compiled CPU flex kernel aborts the process on that (double free): this used to happen with left padding.
    The opt-in hands flex a BlockMask for every 2D mask (above); a 4D tensor given by the caller is refused."""
    model = tiny_model(NAME)
    ids = torch.randint(0, 50, (1, 6))
    with pytest.raises(ValueError, match="flex_attention on a CPU takes a 2D attention_mask"):
        model(ids, attention_mask=torch.ones(1, 1, 6, 6, dtype=torch.bool).tril())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the library's own flex runs on GPUs; a CPU refuses it")
def test_the_librarys_flex_equals_eager_on_a_gpu_without_and_with_padding():
    """What `_supports_flex_attn` promises where a CPU refuses flex: `"flex_attention"` as it is, on a GPU, = eager in
    plain calls (no mask, the all-ones mask, left-padded) and in greedy generation of a left-padded batch of two."""
    flex, eager = (model.cuda() for model in models(64, context=128, flex="flex_attention"))
    ids = torch.randint(1, 50, (2, 40), generator=torch.Generator().manual_seed(0)).cuda()
    padded = torch.ones_like(ids)
    padded[0, :5] = 0
    with torch.no_grad():
        for mask in (None, torch.ones_like(ids), padded):
            real = (padded if mask is padded else torch.ones_like(ids)).bool()
            difference = flex(ids, attention_mask=mask).logits - eager(ids, attention_mask=mask).logits
            assert difference[real].abs().max().item() <= 1e-4
        kwargs = dict(max_new_tokens=6, do_sample=False, pad_token_id=0, attention_mask=padded)
        assert torch.equal(flex.generate(ids, **kwargs), eager.generate(ids, **kwargs))
