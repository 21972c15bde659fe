"""Path patching with every sender at once, and through an intermediate (minigpt.heads.paths): each cell equals the
same path computed here another way (the patched stream run through the receiver's layer in a pass of its own, its
input spliced into a second pass, with this file's own hooks); on the shipped specimen the induction head 1.1 reads
what MLP 0 writes through its key on the Zorbak pair and through its value on the Romeo pair, and 0.2's work reaches
its key through MLP 0."""

import pytest
import torch

import modeling_minigpt  # noqa: F401 (registers MiniGPT with the Auto classes)
from minigpt.heads import paths

ROMEO, ROMEO_CORRUPTED = "Romeo and Juliet, Romeo and Jul", "Romeo and Jullet, Romeo and Jul"
ZORBAK, ZORBAK_CORRUPTED = "Then Zorbak spoke. Then Zor", "Then Zoxbak spoke. Then Zor"

# The grid and this file's computation run the same float32 operations in other batches and orders: LDs of ~10 agree
# to ~1e-5, their normalised differences (effects) and attention weights to ~1e-5; 1e-4 leaves room and still catches
# a wrong sender (the smallest effects that differ between senders here are ~1e-3).
CLOSE = 1e-4


def recorded(model, ids: list[int], module, from_output: bool) -> torch.Tensor:
    """(T, C) or (T, 3C): what `module` takes or gives in a plain pass over ids (a torch hook of this file's own)."""
    seen = {}

    def hook(mod, args, output=None):
        seen["x"] = (output if from_output else args[0])[0].detach()

    handle = module.register_forward_hook(hook) if from_output else module.register_forward_pre_hook(hook)
    try:
        with torch.no_grad():
            logits = model(torch.tensor([ids]), use_cache=False).logits[0, -1]
    finally:
        handle.remove()
    return seen["x"], logits


def written_by(model, ids, sender: str) -> torch.Tensor:
    """(T, C) what a sender adds to the stream: a head's slice of out_proj's input through its columns, an MLP's
    output, or the first block's input for the embeddings."""
    layers, D = model.model.layers, model.config.head_dim
    if sender == "embed":
        return recorded(model, ids, layers[0], False)[0]
    if sender.startswith("mlp"):
        return recorded(model, ids, layers[int(sender.split()[1])].mlp, True)[0]
    layer, head = map(int, sender.split("."))
    merged = recorded(model, ids, layers[layer].attn.out_proj, False)[0]
    return merged[:, head * D : (head + 1) * D] @ layers[layer].attn.out_proj.weight[:, head * D : (head + 1) * D].T


def receiver_run(model, ids, receiver, receiver_input, added: torch.Tensor):
    """The corrupted run with the receiver's input computed from its layer's stream + `added`, in two passes: the
    stream with `added` run through the layer's projection in a pass of its own, then that input spliced in."""
    layer, head = receiver
    block, C, D = model.model.layers[layer], model.config.n_embd, model.config.head_dim
    replace = block.register_forward_pre_hook(lambda mod, args: (args[0] + added, *args[1:]))
    try:
        patched_qkv, _ = recorded(model, ids, block.attn.qkv_proj, True)
    finally:
        replace.remove()
    first = "qkv".index(receiver_input) * C + head * D

    def splice(mod, args, output):
        output = output.clone()
        output[0, :, first : first + D] = patched_qkv[:, first : first + D]
        return output

    handle = block.attn.qkv_proj.register_forward_hook(splice)
    try:
        with torch.no_grad():
            out = model(torch.tensor([ids]), use_cache=False, output_attentions=True)
    finally:
        handle.remove()
    return out.logits[0, -1], out.attentions[layer][0, head, -1]


def effect_of(logits, clean_logits, corrupted_logits) -> float:
    answers = int(clean_logits.argmax()), int(corrupted_logits.argmax())
    ld = lambda x: float(x[answers[0]] - x[answers[1]])  # noqa: E731
    return (ld(logits) - ld(corrupted_logits)) / (ld(clean_logits) - ld(corrupted_logits))


@pytest.mark.parametrize("pair", [(ZORBAK, ZORBAK_CORRUPTED), (ROMEO, ROMEO_CORRUPTED)])
def test_every_cell_of_the_grid_is_that_path_computed_in_two_passes(specimen, pair):
    model, encode = specimen
    clean, corrupted = encode(pair[0]), encode(pair[1])
    grid = paths.patch_paths(model, clean, corrupted, (1, 1), batch_size=7)  # batches that split the rows unevenly
    assert grid.senders == ["embed", "0.0", "0.1", "0.2", "0.3", "mlp 0", "resid 1"]
    assert grid.effects.shape == grid.attention.shape == (7, 3)
    _, clean_logits = recorded(model, clean, model.model.final_norm, False)
    _, corrupted_logits = recorded(model, corrupted, model.model.final_norm, False)
    for row, sender in enumerate(grid.senders):
        if sender == "resid 1":
            added = recorded(model, clean, model.model.layers[1], False)[0]
            added = added - recorded(model, corrupted, model.model.layers[1], False)[0]
        else:
            added = written_by(model, clean, sender) - written_by(model, corrupted, sender)
        for column, receiver_input in enumerate("qkv"):
            logits, weights = receiver_run(model, corrupted, (1, 1), receiver_input, added)
            expected = effect_of(logits, clean_logits, corrupted_logits)
            assert float(grid.effects[row, column]) == pytest.approx(expected, abs=CLOSE), (sender, receiver_input)
            assert float(grid.attention[row, column]) == pytest.approx(float(weights[grid.key_position]), abs=CLOSE)
    one = paths.patch_path(model, clean, corrupted, "0.2", (1, 1), "k", grid.key_position)
    assert one.effect == pytest.approx(float(grid.effects[3, 1]), abs=CLOSE)
    assert one.attention_clean == pytest.approx(grid.attention_clean, abs=CLOSE)


def test_the_specimens_induction_head_reads_mlp_0_by_its_key_on_one_pair_and_its_value_on_the_other(specimen):
    """Issue 50's measured circuit: on the Zorbak pair (the copy's context changed) the clean stream into 1.1's key
    restores the answer, MLP 0's output carries most of it and 0.2's own output very little; on the Romeo pair (the
    copied letter changed) the value carries it, through MLP 0 again."""
    model, encode = specimen
    zorbak = paths.patch_paths(model, encode(ZORBAK), encode(ZORBAK_CORRUPTED), (1, 1))
    effect = {sender: dict(zip("qkv", row.tolist())) for sender, row in zip(zorbak.senders, zorbak.effects)}
    assert effect["resid 1"]["k"] > 0.95 and max(effect["resid 1"]["q"], effect["resid 1"]["v"]) < 0.05
    assert effect["mlp 0"]["k"] > 0.5 and effect["0.2"]["k"] < 0.05 and abs(effect["embed"]["k"]) < 0.05
    romeo = paths.patch_paths(model, encode(ROMEO), encode(ROMEO_CORRUPTED), (1, 1))
    effect = {sender: dict(zip("qkv", row.tolist())) for sender, row in zip(romeo.senders, romeo.effects)}
    assert effect["resid 1"]["v"] > 0.9 and effect["mlp 0"]["v"] > 0.9 and effect["resid 1"]["k"] < 0


def test_a_two_step_path_is_the_intermediates_change_fed_to_the_receiver(specimen):
    """0.2 -> mlp 0 -> 1.1's key: MLP 0 run on its stream plus 0.2's clean - corrupted difference, the change in its
    output fed to the key (here: two passes of this file's own); on the Zorbak pair 0.2's work reaches 1.1 this way."""
    model, encode = specimen
    clean, corrupted = encode(ZORBAK), encode(ZORBAK_CORRUPTED)
    found = paths.patch_two_step(model, clean, corrupted, "0.2", "mlp 0", (1, 1), "k")
    block = model.model.layers[0]
    sent = written_by(model, clean, "0.2") - written_by(model, corrupted, "0.2")
    middle = recorded(model, corrupted, block.mlp_norm, False)[0]  # the stream MLP 0 reads
    with torch.no_grad():
        change = block.mlp(block.mlp_norm(middle + sent)) - block.mlp(block.mlp_norm(middle))
    logits, _ = receiver_run(model, corrupted, (1, 1), "k", change)
    _, clean_logits = recorded(model, clean, model.model.final_norm, False)
    _, corrupted_logits = recorded(model, corrupted, model.model.final_norm, False)
    assert found.effect == pytest.approx(effect_of(logits, clean_logits, corrupted_logits), abs=CLOSE)
    assert found.effect > 0.4  # most of MLP 0's share of the key (0.64) comes from 0.2
    through_head = paths.patch_two_step(model, clean, corrupted, "embed", "0.2", (1, 1), "k")
    assert -1 < through_head.effect < 1


@pytest.mark.parametrize(
    "sender, intermediate, message",
    [
        ("mlp 0", "0.2", "The sender mlp 0 writes nothing that 0.2 reads"),
        ("0.2", "1.0", "The sender 1.0 writes nothing that 1.1 reads"),
        ("resid 0", "mlp 0", "starts at a part that writes"),
        ("0.2", "embed", "The intermediate must be a head 'L.H' or an MLP 'mlp L', not embed"),
    ],
)
def test_a_two_step_path_that_cannot_run_is_refused_by_name(specimen, sender, intermediate, message):
    model, encode = specimen
    with pytest.raises(ValueError, match=message):
        paths.patch_two_step(model, encode(ZORBAK), encode(ZORBAK_CORRUPTED), sender, intermediate, (1, 1), "k")
