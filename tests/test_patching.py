"""Activation patching of each head's parts (q, k, v, its attention pattern, its output) and of each head at each
position (minigpt.heads.patching): every cell equals the patch made here with this file's own torch hooks; cells where
the two texts' activations are the same are 0; on the specimen, 1.1's output at the last position carries the answer
and its value (Romeo pair) or key (Zorbak pair) does."""

import pytest
import torch

import modeling_minigpt  # noqa: F401 (registers MiniGPT with the Auto classes)
from minigpt import heads

ROMEO, ROMEO_CORRUPTED = "Romeo and Juliet, Romeo and Jul", "Romeo and Jullet, Romeo and Jul"
ZORBAK, ZORBAK_CORRUPTED = "Then Zorbak spoke. Then Zor", "Then Zoxbak spoke. Then Zor"
CLOSE = 1e-4  # the same float32 operations in other batches: effects agree to ~1e-5


def run(model, ids, hooks=(), attentions=False):
    """A pass over ids with (module, "pre" | "post", fn) torch hooks of this file's own."""
    handles = [
        module.register_forward_pre_hook(fn) if kind == "pre" else module.register_forward_hook(fn)
        for module, kind, fn in hooks
    ]
    try:
        with torch.no_grad():
            return model(torch.tensor([ids]), use_cache=False, output_attentions=attentions)
    finally:
        for handle in handles:
            handle.remove()


def captured(model, ids):
    """The clean run's qkv_proj outputs, out_proj inputs and attention weights, per layer."""
    seen = {"qkv": {}, "merged": {}}
    hooks = []
    for layer, block in enumerate(model.model.layers):
        hooks.append((block.attn.qkv_proj, "post", lambda m, a, o, layer=layer: seen["qkv"].__setitem__(layer, o)))
        hooks.append((block.attn.out_proj, "pre", lambda m, a, layer=layer: seen["merged"].__setitem__(layer, a[0])))
    out = run(model, ids, hooks, attentions=True)
    return seen | {"pattern": out.attentions, "logits": out.logits[0, -1]}


def patched_effect(model, clean_ids, corrupted_ids, layer, head, part, position=None) -> float:
    """One head's part put back from the clean run into the corrupted one, with this file's hooks."""
    clean, corrupted = captured(model, clean_ids), captured(model, corrupted_ids)
    C, D = model.config.n_embd, model.config.head_dim
    block, where = model.model.layers[layer], slice(head * D, (head + 1) * D)
    if part in ("q", "k", "v"):
        columns = slice("qkv".index(part) * C + head * D, "qkv".index(part) * C + (head + 1) * D)

        def fn(module, args, output):
            output = output.clone()
            output[0, :, columns] = clean["qkv"][layer][0, :, columns]
            return output

        hook = (block.attn.qkv_proj, "post", fn)
    else:
        values = {}

        def fn(module, args):
            merged = args[0].clone()
            if part == "pattern":  # clean weights, this run's values
                v = values["qkv"][0, :, 2 * C + head * D : 2 * C + (head + 1) * D]  # (T, D)
                merged[0, :, where] = clean["pattern"][layer][0, head] @ v
            else:
                rows = slice(None) if position is None else slice(position, position + 1)
                merged[0, rows, where] = clean["merged"][layer][0, rows, where]
            return (merged,)

        keep_values = (block.attn.qkv_proj, "post", lambda m, a, o: values.__setitem__("qkv", o))
        hook = [keep_values, (block.attn.out_proj, "pre", fn)]
    logits = run(model, corrupted_ids, hook if isinstance(hook, list) else [hook]).logits[0, -1]
    answers = int(clean["logits"].argmax()), int(corrupted["logits"].argmax())
    ld = lambda x: float(x[answers[0]] - x[answers[1]])  # noqa: E731
    return (ld(logits) - ld(corrupted["logits"])) / (ld(clean["logits"]) - ld(corrupted["logits"]))


@pytest.mark.parametrize("part", ["q", "k", "v", "pattern", "output"])
def test_each_part_of_each_head_is_the_patch_made_by_hand(specimen, part):
    model, encode = specimen
    clean, corrupted = encode(ROMEO), encode(ROMEO_CORRUPTED)
    found = heads.patch_heads(model, clean, corrupted, part=part, batch_size=3).effects
    assert found.shape == (2, 4)
    for layer, head in [(0, 2), (1, 1), (1, 3)]:
        expected = patched_effect(model, clean, corrupted, layer, head, part)
        assert float(found[layer, head]) == pytest.approx(expected, abs=CLOSE), (layer, head)


def test_each_head_at_each_position_is_the_patch_made_by_hand_and_nothing_before_the_change_moves(specimen):
    model, encode = specimen
    clean, corrupted = encode(ZORBAK), encode(ZORBAK_CORRUPTED)
    found = heads.patch_heads_by_position(model, clean, corrupted, batch_size=50).effects
    T = len(clean)
    assert found.shape == (2, 4, T)
    changed = next(i for i, (a, b) in enumerate(zip(clean, corrupted)) if a != b)
    # Before the change both texts' heads write the same: nothing moves, but for the rounding of a batch of 50 rows
    # against the batch of 2 the corrupted LD was measured in (~1e-7 of the effect's unit)
    assert found[:, :, :changed].abs().max() < 1e-5
    for layer, head, position in [(1, 1, T - 1), (0, 2, changed + 1), (1, 0, T - 2)]:
        expected = patched_effect(model, clean, corrupted, layer, head, "output", position)
        assert float(found[layer, head, position]) == pytest.approx(expected, abs=CLOSE)
    # 1.1 at the last position carries the answer; its output over all positions is the sum's upper bound
    assert float(found[1, 1, -1]) > 0.9
    whole = heads.patch_heads(model, clean, corrupted).effects
    assert float(whole[1, 1]) == pytest.approx(float(found[1, 1, -1]), abs=0.05)  # the other positions add little


def test_the_specimens_answer_is_carried_by_1_1s_value_on_romeo_and_its_key_on_zorbak(specimen):
    model, encode = specimen
    romeo = {part: heads.patch_heads(model, encode(ROMEO), encode(ROMEO_CORRUPTED), part=part).effects[1, 1]
             for part in ("k", "v")}  # fmt: skip
    zorbak = {part: heads.patch_heads(model, encode(ZORBAK), encode(ZORBAK_CORRUPTED), part=part).effects[1, 1]
              for part in ("k", "v")}  # fmt: skip
    assert romeo["v"] > 0.9 > romeo["k"] and zorbak["k"] > 0.9 > zorbak["v"]


def test_a_part_that_does_not_exist_is_refused(specimen):
    model, encode = specimen
    with pytest.raises(ValueError, match="'output', 'q', 'k', 'v' or 'pattern', not 'z'"):
        heads.patch_heads(model, encode(ROMEO), encode(ROMEO_CORRUPTED), part="z")
