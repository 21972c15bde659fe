"""The recorded forward pass every view shares: its tensors are the model's own, and the cache computes each pass once,
stays within its byte budget, and never serves one model's pass for another."""

import threading

import pytest
import torch

from helpers import THREE_LAYERS, tiny_model
from minigpt.demo.core.pass_cache import ForwardPassCache
from minigpt.heads.recorded_pass import run_forward_pass

IDS = [0, 5, 9, 3, 3, 7, 1, 0, 12]


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_recorded_tensors_are_the_models_own(implementation):
    model = tiny_model(implementation, shape=THREE_LAYERS)
    recorded = run_forward_pass(model, IDS)
    L, T, C = 3, len(IDS), 16
    assert recorded.attentions.shape == (L, 2, T, T) and recorded.residual.shape == (L + 1, T, C)
    with torch.no_grad():
        out = model(torch.tensor([IDS]), output_attentions=True, output_hidden_states=True)
        assert torch.equal(recorded.attentions, torch.stack(out.attentions, 1)[0])  # the same eager path, bit for bit
        torch.testing.assert_close(recorded.logits(model), out.logits[0])
        torch.testing.assert_close(recorded.logits(model, position=4), out.logits[0, 4])
        for layer, block in enumerate(model.model.layers):
            x = recorded.residual[layer]
            torch.testing.assert_close(recorded.attn_inputs[layer], block.attn_norm(x))
            torch.testing.assert_close(recorded.attn_outputs[layer], block.attn.out_proj(recorded.merged_heads[layer]))
            after_attn = x + recorded.attn_outputs[layer]
            torch.testing.assert_close(recorded.residual[layer + 1], after_attn + block.mlp(block.mlp_norm(after_attn)))
        loss = model(torch.tensor([IDS]), labels=torch.tensor([IDS])).loss
    torch.testing.assert_close(recorded.token_losses(model).mean(), loss)


def test_the_recorded_weights_are_the_models_own_in_one_buffer():
    """The pass keeps every layer's weights in one (L, H, T, T) buffer, filled as each layer returns them: the same
    numbers as the model's `output_attentions`, one storage for all layers (no stacked copy), and the model itself
    untouched by the pass (its next call gives what it gave before)."""
    model = tiny_model("sdpa", shape=THREE_LAYERS)
    with torch.no_grad():
        plain = model(torch.tensor([IDS]), output_attentions=True)
    recorded = run_forward_pass(model, IDS)
    assert torch.equal(recorded.attentions, torch.stack(plain.attentions)[:, 0])
    assert recorded.attentions.data_ptr() == recorded.attentions.untyped_storage().data_ptr()  # one buffer, a view
    assert recorded.attentions.untyped_storage().nbytes() == recorded.attentions.numel() * 4  # nothing more in it
    with torch.no_grad():
        again = model(torch.tensor([IDS]), output_attentions=True)
    assert all(torch.equal(a, b) for a, b in zip(again.attentions, plain.attentions))


def test_the_cache_computes_a_pass_once_and_keeps_models_apart():
    first, second = tiny_model(seed=0, shape=THREE_LAYERS), tiny_model(seed=1, shape=THREE_LAYERS)
    cache = ForwardPassCache()
    a = cache.get(first, IDS)
    assert cache.get(first, list(IDS)) is a and cache.computed == 1
    b = cache.get(second, IDS)
    assert cache.computed == 2 and not torch.equal(a.attentions, b.attentions)
    assert cache.get(first, IDS[:-1]) is not a and cache.computed == 3
    assert cache.cached(first, IDS) is a and cache.cached(second, IDS) is b and cache.cached(first, IDS[:2]) is None


def test_a_model_gone_is_never_served_to_the_one_that_takes_its_place():
    cache = ForwardPassCache()
    model = tiny_model(seed=0, shape=THREE_LAYERS)
    cache.get(model, IDS)
    old_id = id(model)
    del model
    for seed in range(1, 50):  # a new object may well be given the freed address
        other = tiny_model(seed=seed, shape=THREE_LAYERS)
        recorded = cache.get(other, IDS)
        torch.testing.assert_close(recorded.attentions, run_forward_pass(other, IDS).attentions)
        if id(other) == old_id:
            break
        del other


def test_the_cache_stays_within_its_byte_budget():
    model = tiny_model(shape=THREE_LAYERS)
    one = run_forward_pass(model, IDS).nbytes
    cache = ForwardPassCache(max_bytes=int(2.5 * one))
    for last in range(4):  # four texts of the same length, so the same size
        cache.get(model, IDS[:-1] + [last])
    kept = cache.kept.found.values()
    assert len(kept) == 2 and sum(p.nbytes for p in kept) == cache.kept.used <= cache.kept.budget
    cache.get(model, IDS[:-1] + [0])  # evicted first (least recently used): computed again
    assert cache.computed == 5
    assert ForwardPassCache(max_bytes=one // 2).get(model, IDS).attentions.shape[-1] == len(IDS)  # too big: not kept


def test_concurrent_requests_for_one_text_compute_it_once():
    model = tiny_model(shape=THREE_LAYERS)
    cache = ForwardPassCache()
    start = threading.Barrier(8)
    results = []

    def request():
        start.wait()
        results.append(cache.get(model, IDS))

    threads = [threading.Thread(target=request) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert cache.computed == 1 and all(r is results[0] for r in results)
