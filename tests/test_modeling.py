"""A correct GPT and a proper `transformers` model: equal to references, causal, cache and padding safe."""

import math

import pytest
import torch
from torch.nn import functional as F
from transformers import GPT2Config, GPT2LMHeadModel

from helpers import TINY, tiny_model
from modeling_minigpt import MiniGPTConfig, MiniGPTForCausalLM, MiniGPTModel


def per_head_reference(attn, x: torch.Tensor) -> torch.Tensor:
    """The seeds' formulation: H separate single-head causal attentions, concatenated, then the output projection."""
    B, T, C = x.shape
    H, D = attn.n_head, attn.head_dim
    W_q, W_k, W_v = attn.qkv_proj.weight.split(C, dim=0)  # each (C, C): rows [h*D:(h+1)*D] belong to head h
    b_q, b_k, b_v = attn.qkv_proj.bias.split(C)
    heads = []
    for h in range(H):
        rows = slice(h * D, (h + 1) * D)
        q = x @ W_q[rows].T + b_q[rows]  # (B, T, D)
        k = x @ W_k[rows].T + b_k[rows]
        v = x @ W_v[rows].T + b_v[rows]
        scores = q @ k.transpose(1, 2) / math.sqrt(D)  # (B, T, T)
        future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        weights = F.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
        heads.append(weights @ v)
    return attn.out_proj(torch.cat(heads, dim=-1))  # (B, T, C)


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_attention_equals_per_head_reference(implementation):
    model = tiny_model(implementation)
    attn = model.model.layers[0].attn
    x = torch.randn(3, 11, 32)
    with torch.no_grad():
        fused, _ = attn(x)
        reference = per_head_reference(attn, x)
    torch.testing.assert_close(fused, reference, atol=1e-5, rtol=1e-5)


def test_eager_equals_sdpa_and_weights_are_causal_distributions():
    eager, sdpa = tiny_model("eager"), tiny_model("sdpa")
    ids = torch.randint(0, 50, (2, 20))
    with torch.no_grad():
        out_eager = eager(ids, output_attentions=True)
        out_sdpa = sdpa(ids)
    torch.testing.assert_close(out_eager.logits, out_sdpa.logits, atol=1e-5, rtol=0)
    assert len(out_eager.attentions) == 2
    for weights in out_eager.attentions:
        assert weights.shape == (2, 4, 20, 20)
        assert torch.all(weights.triu(diagonal=1) == 0)
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 20))


def test_sdpa_model_returns_attentions_on_request_with_the_same_logits():
    """The demo loads with sdpa for speed and asks for maps per call: no reload, same numbers."""
    model = tiny_model("sdpa")
    ids = torch.randint(0, 50, (1, 12))
    with torch.no_grad():
        plain = model(ids)
        with_maps = model(ids, output_attentions=True, output_hidden_states=True)
    assert model.config._attn_implementation == "sdpa"
    assert len(with_maps.attentions) == 2 and with_maps.attentions[0].shape == (1, 4, 12, 12)
    assert len(with_maps.hidden_states) == 3  # embeddings + one per block
    torch.testing.assert_close(plain.logits, with_maps.logits, atol=1e-5, rtol=0)


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_changing_a_later_token_never_changes_earlier_logits(implementation):
    model = tiny_model(implementation)
    ids = torch.randint(0, 50, (1, 16))
    changed = ids.clone()
    changed[0, 10:] = (changed[0, 10:] + 1) % 50
    with torch.no_grad():
        a, b = model(ids).logits, model(changed).logits
    torch.testing.assert_close(a[:, :10], b[:, :10], atol=0, rtol=0)
    assert not torch.allclose(a[:, 10:], b[:, 10:])


def test_loss_is_next_token_cross_entropy():
    model = tiny_model()
    ids = torch.randint(0, 50, (2, 9))
    with torch.no_grad():
        out = model(ids, labels=ids)
    expected = F.cross_entropy(out.logits[:, :-1].reshape(-1, 50), ids[:, 1:].reshape(-1))
    torch.testing.assert_close(out.loss, expected)


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_greedy_generation_with_and_without_cache_agree(implementation):
    model = tiny_model(implementation)
    prompt = torch.randint(0, 50, (2, 5))
    kwargs = dict(max_new_tokens=60, min_new_tokens=60, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        cached = model.generate(prompt, use_cache=True, **kwargs)
        uncached = model.generate(prompt, use_cache=False, **kwargs)
    assert cached.shape == (2, 65)
    assert torch.equal(cached, uncached)


def test_sampling_is_reproducible_with_a_seed():
    model = tiny_model()
    prompt = torch.randint(0, 50, (1, 4))

    def sample(seed):
        torch.manual_seed(seed)
        return model.generate(
            prompt,
            do_sample=True,
            temperature=0.8,
            top_k=20,
            top_p=0.9,
            max_new_tokens=30,
            min_new_tokens=30,
            pad_token_id=0,
        )

    assert torch.equal(sample(1), sample(1))
    assert not torch.equal(sample(1), sample(2))


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_left_padded_batch_rows_equal_prompts_run_alone(implementation):
    model = tiny_model(implementation)
    pad = 0
    prompts = [torch.randint(1, 50, (n,)) for n in (7, 3, 5)]
    width = max(len(p) for p in prompts)
    ids = torch.stack([F.pad(p, (width - len(p), 0), value=pad) for p in prompts])
    mask = torch.stack([F.pad(torch.ones(len(p), dtype=torch.long), (width - len(p), 0)) for p in prompts])
    kwargs = dict(max_new_tokens=20, min_new_tokens=20, do_sample=False, pad_token_id=pad)
    with torch.no_grad():
        batch_logits = model(ids, attention_mask=mask).logits
        batch_tokens = model.generate(ids, attention_mask=mask, **kwargs)
        for row, prompt in enumerate(prompts):
            alone = prompt[None]
            n = len(prompt)
            torch.testing.assert_close(batch_logits[row, -n:], model(alone).logits[0], atol=1e-5, rtol=0)
            assert torch.equal(batch_tokens[row, width:], model.generate(alone, **kwargs)[0, n:])


def test_generating_past_the_context_length_is_a_clear_error():
    model = tiny_model(block_size=16)
    with pytest.raises(ValueError, match="context length is 16"):
        model.generate(torch.randint(0, 50, (1, 10)), max_new_tokens=10, min_new_tokens=10, do_sample=False)
    with pytest.raises(ValueError, match="context length is 16"):
        model(torch.randint(0, 50, (1, 17)))


def test_from_gpt2_matches_transformers_gpt2():
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=64, n_positions=32, n_embd=48, n_layer=3, n_head=4)
    gpt2 = GPT2LMHeadModel(config).eval()
    for p in gpt2.parameters():  # random biases and norms too, so that a mapping mistake cannot hide
        p.data.normal_(0, 0.1)
    minigpt = MiniGPTForCausalLM.from_gpt2(gpt2).eval()
    ids = torch.randint(0, 64, (2, 12))
    with torch.no_grad():
        torch.testing.assert_close(minigpt(ids).logits, gpt2(ids).logits, atol=1e-4, rtol=0)
        kwargs = dict(max_new_tokens=15, do_sample=False, pad_token_id=0)
        assert torch.equal(minigpt.generate(ids, **kwargs), gpt2.generate(ids, **kwargs))
    assert minigpt.lm_head.weight.data_ptr() == minigpt.model.token_embedding.weight.data_ptr()


def test_weights_are_tied_and_stay_tied_after_resizing():
    model = tiny_model()
    assert model.lm_head.weight is model.model.token_embedding.weight
    model.resize_token_embeddings(60)
    assert model.config.vocab_size == 60
    assert model.lm_head.weight is model.model.token_embedding.weight
    assert model(torch.randint(0, 60, (1, 5))).logits.shape == (1, 5, 60)


def test_init_scales_residual_projections():
    torch.manual_seed(0)
    model = MiniGPTForCausalLM(MiniGPTConfig(vocab_size=100, block_size=32, n_layer=8, n_head=4, n_embd=128))
    block = model.model.layers[0]
    expected = 0.02 / math.sqrt(2 * 8)
    for weight in (block.attn.out_proj.weight, block.mlp.out_proj.weight):
        assert abs(weight.std().item() - expected) < 0.15 * expected
    assert abs(block.attn.qkv_proj.weight.std().item() - 0.02) < 0.1 * 0.02


def test_gradient_checkpointing_gives_the_same_gradients():
    def grads(checkpointing):
        model = tiny_model(seed=3).train()
        if checkpointing:
            model.activation_checkpointing_enable()
        ids = torch.randint(0, 50, (2, 10), generator=torch.Generator().manual_seed(0))
        model(ids, labels=ids).loss.backward()
        return model.model.layers[0].attn.qkv_proj.weight.grad

    torch.testing.assert_close(grads(True), grads(False))


def test_base_model_outputs_hidden_states():
    torch.manual_seed(0)
    base = MiniGPTModel(MiniGPTConfig(**TINY)).eval()
    out = base(torch.randint(0, 50, (1, 6)))
    assert out.last_hidden_state.shape == (1, 6, 32)


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(n_embd=100, n_head=3), "n_embd \\(100\\) must be divisible by n_head \\(3\\)"),
        (dict(n_layer=0), "n_layer must be a positive integer"),
        (dict(vocab_size=-5), "vocab_size must be a positive integer"),
        (dict(block_size=0), "block_size must be a positive integer"),
        (dict(attention_dropout=1.0), "attention_dropout must be in \\[0, 1\\)"),
        (dict(resid_dropout=-0.1), "resid_dropout must be in \\[0, 1\\)"),
    ],
)
def test_bad_configs_raise_clear_errors(fields, message):
    with pytest.raises(ValueError, match=message):
        MiniGPTConfig(**fields)


def test_presets_and_aliases():
    names = MiniGPTConfig.from_preset("names")
    assert (names.n_layer, names.n_head, names.n_embd, names.block_size) == (4, 4, 64, 16)
    gpt2 = MiniGPTConfig.from_preset("gpt2", n_layer=2)
    assert (gpt2.num_hidden_layers, gpt2.num_attention_heads, gpt2.hidden_size) == (2, 12, 768)
    assert (gpt2.max_position_embeddings, gpt2.vocab_size) == (1024, 50257)
    shakespeare = MiniGPTForCausalLM(MiniGPTConfig.from_preset("shakespeare"))
    assert 1e6 < shakespeare.num_parameters() < 1e7
    with pytest.raises(ValueError, match="Unknown MiniGPT preset 'huge'"):
        MiniGPTConfig.from_preset("huge")


def test_beam_search_and_cache_cropping_match_gpt2():
    """Beam search reorders the cache and assisted decoding crops it: the appendable cache must follow both."""
    torch.manual_seed(0)
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=64, n_embd=32, n_layer=2, n_head=4)).eval()
    minigpt = MiniGPTForCausalLM.from_gpt2(gpt2).eval()
    ids = torch.randint(0, 64, (2, 6))
    kwargs = dict(max_new_tokens=20, num_beams=3, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        assert torch.equal(minigpt.generate(ids, **kwargs), gpt2.generate(ids, **kwargs))
        cache = minigpt(ids, use_cache=True).past_key_values
        cache.crop(-2)  # drop the last 2 of 6 cached positions
        continued = minigpt(ids[:, 4:], past_key_values=cache).logits
        torch.testing.assert_close(continued, minigpt(ids).logits[:, 4:], atol=1e-5, rtol=0)


def test_loss_gradient_equals_torch_cross_entropy_and_ignores_minus_100():
    model = tiny_model().train()
    ids = torch.randint(0, 50, (3, 9))
    labels = ids.clone()
    labels[0, :4] = -100  # e.g. padding or a prompt that is not trained on
    logits = model(ids).logits.detach().requires_grad_()
    reference = F.cross_entropy(logits[:, :-1].reshape(-1, 50), labels[:, 1:].reshape(-1), ignore_index=-100)
    reference.backward()
    expected_grad = logits.grad.clone()
    logits.grad = None
    from modeling_minigpt import next_token_loss

    loss = next_token_loss(logits, labels)
    loss.backward()
    torch.testing.assert_close(loss, reference)
    torch.testing.assert_close(logits.grad, expected_grad)
    counted = int((labels[:, 1:] != -100).sum())  # 24 targets, 3 of them ignored
    summed = next_token_loss(logits, labels, num_items_in_batch=1).item()  # Trainer's gradient accumulation divisor
    assert summed == pytest.approx(loss.item() * counted, rel=1e-5)
