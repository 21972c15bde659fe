"""Circuits: direct logit attribution sums to the logit and names the shipped specimen's induction head; patching
that head restores the clean answer and nothing else does; residual patching at layer 0 restores exactly where the
texts differ; path patching into the induction head's key (not its query or value) restores its attention, as the
test's own computation of that attention says; composition scores match an einsum written here, TransformerLens's
bridge and a hand-built circuit; the OV and positional QK circuits match their formulas and show a copying head and
the specimen's previous-token head."""

import re

import pytest
import torch

import modeling_minigpt  # noqa: F401 (registers MiniGPT with the Auto classes)
from helpers import SPECIMEN, tiny_model
from minigpt.heads import circuits
from minigpt.heads.recorded_pass import run_forward_pass
from minigpt.heads.role_scores import previous_token_pattern, role_score
from modeling_minigpt import MiniGPTConfig, MiniGPTForCausalLM

ROMEO, ROMEO_CORRUPTED = "Romeo and Juliet, Romeo and Jul", "Romeo and Julaet, Romeo and Jul"
ZORBAK, ZORBAK_CORRUPTED = "Then Zorbak spoke. Then Zor", "Then Zoxbak spoke. Then Zor"


def logits_of(model, ids) -> torch.Tensor:
    with torch.no_grad():
        return model(torch.tensor([ids]), use_cache=False).logits[0].float()  # (T, V)


# ---- direct logit attribution ---------------------------------------------------------------------------------------

# The parts are float32 vectors (the specimen's residual stream reaches |x| ~ 70) summed in another order than the
# model's own residual adds, then through the norm and a 128-wide dot product: a few 1e-6 of error on logits of ~10.
# 1e-4 leaves room for that and still catches a missing or doubled component (the smallest here is ~1e-3).
SUM_TOLERANCE = 1e-4


@pytest.mark.parametrize("position, token, other", [(-1, None, None), (-1, None, 50), (12, 3, None), (5, 7, 9)])
def test_the_parts_sum_to_the_logit_the_model_computed(specimen, position, token, other):
    model, encode = specimen
    ids = encode(ROMEO)
    found = circuits.logit_attribution(model, ids, position, token, other)
    logits = logits_of(model, ids)[position]
    expected_token = int(logits.argmax()) if token is None else token
    expected = logits[expected_token] - (0 if other is None else logits[other])
    assert found.token == expected_token and found.position == position % len(ids)
    assert found.logit == pytest.approx(float(expected), abs=1e-5)
    assert float(found.values.sum()) == pytest.approx(found.logit - found.bias_term, abs=SUM_TOLERANCE)
    assert len(found.labels) == len(found.values) == 2 + 2 * (4 + 2) and found.heads.shape == (2, 4)


@pytest.mark.parametrize("bias", [True, False])
def test_the_parts_sum_on_a_random_model_with_and_without_biases(bias):
    model = tiny_model(seed=3, bias=bias)
    with torch.no_grad():  # not the unit norms and zero biases of a fresh model: they would hide a missing term
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.uniform_(0.5, 1.5)
                if module.bias is not None:
                    module.bias.normal_(0, 0.3)
            elif isinstance(module, torch.nn.Linear) and module.bias is not None:
                module.bias.normal_(0, 0.3)
    ids = [1, 4, 9, 16, 25, 36, 49, 4, 9]
    found = circuits.logit_attribution(model, ids, other_token=0)
    logits = logits_of(model, ids)[-1]
    assert found.logit == pytest.approx(float(logits[found.token] - logits[0]), abs=1e-5)
    assert float(found.values.sum()) == pytest.approx(found.logit - found.bias_term, abs=SUM_TOLERANCE)
    assert (found.bias_term != 0) == bias


def test_the_head_grid_is_each_heads_slice_through_out_proj_and_the_frozen_norm(specimen):
    """The test's own per-head attribution from the recorded pass: head h's slice of the merged heads through
    out_proj's columns, centred, divided by the final residual's scale, times the norm's weight, dotted with W_U."""
    model, encode = specimen
    ids = encode(ROMEO)
    found = circuits.logit_attribution(model, ids)
    recorded = run_forward_pass(model, ids)
    final = recorded.residual[-1, -1]
    scale = (final.var(unbiased=False) + model.model.final_norm.eps).sqrt()
    D = model.config.n_embd // model.config.n_head
    expected = torch.zeros(2, 4)
    for layer in range(2):
        for head in range(4):
            columns = slice(head * D, (head + 1) * D)
            out_proj = model.model.layers[layer].attn.out_proj
            out = recorded.merged_heads[layer, -1, columns] @ out_proj.weight[:, columns].T
            normed = (out - out.mean()) / scale * model.model.final_norm.weight
            expected[layer, head] = normed @ model.lm_head.weight[found.token]
    torch.testing.assert_close(found.heads, expected.detach(), rtol=0, atol=1e-5)


def test_the_induction_head_writes_the_specimens_answer(specimen):
    """On "Romeo and Juliet, Romeo and Jul" the answer 'i' comes from head 1.1 (measured 2.62), far above any other
    head (0.19)."""
    model, encode = specimen
    found = circuits.logit_attribution(model, encode(ROMEO))
    ranked = found.heads.flatten().sort(descending=True)
    assert ranked.indices[0] == 1 * 4 + 1, found.heads
    assert ranked.values[0] > 2.0 and ranked.values[1] < 0.5, found.heads


# ---- activation patching --------------------------------------------------------------------------------------------


def test_patching_the_induction_head_restores_the_answer_and_no_other_head_does(specimen):
    model, encode = specimen
    found = circuits.patch_heads(model, encode(ROMEO), encode(ROMEO_CORRUPTED))
    assert found.effects[1, 1] == pytest.approx(1.0, abs=0.03), found.effects  # measured 1.002
    others = found.effects.flatten()[torch.arange(8) != 5]
    assert others.abs().max() < 0.06, found.effects  # measured <= 0.055 (head 0.3)
    assert found.clean_difference > 0 > found.corrupted_difference


def test_patching_layer_0s_residual_restores_exactly_where_the_texts_differ(specimen):
    """The stream entering layer 0 is the embeddings: at the one position where the texts differ it carries the
    whole difference (effect 1), elsewhere it is the same in both runs (effect 0). Batches of 5 rows (with progress)
    give the same effects as one batch."""
    model, encode = specimen
    clean, corrupted = encode(ROMEO), encode(ROMEO_CORRUPTED)
    differing = [i for i, (a, b) in enumerate(zip(clean, corrupted)) if a != b]
    assert len(differing) == 1
    fractions = []
    found = circuits.patch_residual(model, clean, corrupted, progress=fractions.append, batch_size=5)
    expected = torch.zeros(len(clean))
    expected[differing[0]] = 1.0
    torch.testing.assert_close(found.effects[0], expected, rtol=0, atol=1e-4)
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and len(fractions) == -(-2 * len(clean) // 5)
    whole = circuits.patch_residual(model, clean, corrupted, batch_size=64)
    torch.testing.assert_close(found.effects, whole.effects, rtol=0, atol=1e-4)


@pytest.mark.parametrize("patch", [circuits.patch_heads, circuits.patch_residual])
def test_texts_patching_cannot_compare_are_refused_with_what_to_change(specimen, patch):
    model, encode = specimen
    with pytest.raises(ValueError, match="same number of tokens"):
        patch(model, encode(ROMEO), encode("Romeo and Juliette, Romeo and Jul"))
    with pytest.raises(ValueError, match="same after both texts.*Change the corrupted text"):
        patch(model, encode(ROMEO), encode(ROMEO))


# ---- path patching --------------------------------------------------------------------------------------------------


def test_the_clean_stream_into_the_induction_heads_key_alone_restores_its_attention(specimen):
    """Last query 'r' of "Then Zor": the induction head 1.1 attends to the 'b' after the first "Zor" (0.692); with
    "Zox" there is no such key (0.004). Fed into the head's key input only, the clean stream entering layer 1 brings
    it back (0.693); into its query or value input, it does not (0.004), and the value leaves the pattern as it was."""
    model, encode = specimen
    clean, corrupted = encode(ZORBAK), encode(ZORBAK_CORRUPTED)
    b = clean.index(encode("b")[1])
    found = {part: circuits.patch_path(model, clean, corrupted, ("resid", 1), (1, 1), part, b) for part in "qkv"}
    k = found["k"]
    assert k.attention_clean > 0.4 and k.attention_corrupted < 0.05, k
    assert k.attention_patched == pytest.approx(k.attention_clean, abs=0.05), k
    assert found["q"].attention_patched < 0.05 and found["v"].attention_patched < 0.05, found
    assert found["v"].attention_patched == pytest.approx(k.attention_corrupted, abs=1e-6)
    assert k.effect > 0.8 and abs(found["q"].effect) < 0.05, found

    # The test's own computation: the head's query from the corrupted stream, its keys from the clean one (the
    # patched stream is the clean stream entering layer 1), through layer 1's own norm input and projection.
    runs = [run_forward_pass(model, ids) for ids in (clean, corrupted)]
    attn, D = model.model.layers[1].attn, model.config.n_embd // model.config.n_head
    with torch.no_grad():
        query = attn.qkv_proj(runs[1].attn_inputs[1, -1])[D : 2 * D]  # head 1's query, (D,)
        keys = attn.qkv_proj(runs[0].attn_inputs[1])[:, 128 + D : 128 + 2 * D]  # head 1's keys, (T, D)
    weights = ((keys @ query) * attn.scaling).softmax(-1)
    assert k.attention_patched == pytest.approx(float(weights[b]), abs=1e-5)


def test_path_patching_refuses_senders_that_cannot_reach_the_receiver(specimen):
    model, encode = specimen
    clean, corrupted = encode(ZORBAK), encode(ZORBAK_CORRUPTED)
    for sender in [("head", 1, 0), ("mlp", 1), ("resid", 2), "1.2"]:
        with pytest.raises(ValueError, match="writes nothing that 1.1 reads"):
            circuits.patch_path(model, clean, corrupted, sender, (1, 1), "k")
    with pytest.raises(ValueError, match=re.escape("sender ('neuron', 0): cannot read it as a node")):
        circuits.patch_path(model, clean, corrupted, ("neuron", 0), (1, 1), "k")
    with pytest.raises(ValueError, match="'q', 'k' or 'v'"):
        circuits.patch_path(model, clean, corrupted, ("embed",), (1, 1), "o")


def refusals(model, ids):
    """Calls of the library with a layer, head, position or token the model or the text does not have, and the
    message each must give (issue 48: Python's -1 read as the last head, bare IndexErrors)."""
    from minigpt.heads import ablation, comparison, predictions
    from minigpt.heads.steps import attention_steps

    recorded = run_forward_pass(model, ids)
    T = len(ids)
    return [
        (lambda: circuits.ov_circuit(model, 1, -1), "head must be 0 to 3 (each layer has 4 heads), got -1"),
        (lambda: circuits.ov_circuit(model, 5, 0), "layer must be 0 to 1 (the model has 2 layers), got 5"),
        (lambda: circuits.ov_circuit(model, 0, 1.0), "head must be a whole number, got float 1.0"),
        (lambda: circuits.positional_qk_circuit(model, 0, 4), "head must be 0 to 3"),
        (lambda: circuits.head_weights(model, -1), "layer must be 0 to 1"),
        (lambda: circuits.logit_attribution(model, ids, token=10**6), "token must be a token id 0 to 78, got 1000000"),
        (lambda: circuits.logit_attribution(model, ids, other_token=-1), "other_token must be a token id 0 to 78"),
        (lambda: circuits.logit_attribution(model, ids, position=T), f"position {T} is outside the text's {T} tokens"),
        (lambda: circuits.patch_path(model, ids, ids, ("embed",), (1, 4), "k"), "head must be 0 to 3"),
        (lambda: circuits.patch_path(model, ids, ids, ("embed",), (1, 1), "k", T), f"key_position {T} is outside"),
        (lambda: ablation.head_mask([(0, 9)], 2, 4), "head must be 0 to 3"),
        (lambda: predictions.logit_lens(model, recorded, -T - 1), f"position {-T - 1} is outside"),
        (lambda: predictions.next_token_probabilities(model, recorded, T), f"position {T} is outside"),
        (lambda: comparison.likely_replacements(model, recorded, 0, set()), "position 0 is the start token"),
        (lambda: attention_steps(model, recorded, 0, 7), "head must be 0 to 3"),
    ]


def test_the_library_refuses_a_layer_head_position_or_token_the_model_or_text_lacks_by_its_own_error(specimen):
    from minigpt.heads.errors import InstrumentError

    model, encode = specimen
    for call, message in refusals(model, encode(ZORBAK)):
        with pytest.raises(InstrumentError, match=re.escape(message)):
            call()
    assert issubclass(InstrumentError, ValueError)  # code that catches bad values keeps doing so


def test_likely_replacements_take_the_whole_vocabulary_when_asked_for_more(specimen):
    """A 79-token vocabulary asked for 1,000 replacements (the "change one token" helper asks 64 of a 28-token one):
    every token but the one there and those left out, most likely first, as the model's logits order them."""
    from minigpt.heads.comparison import likely_replacements

    model, encode = specimen
    ids = encode(ZORBAK)
    found = likely_replacements(model, run_forward_pass(model, ids), 5, {0, 1}, k=1000)
    logits = logits_of(model, ids)[4]  # position 5 is predicted from position 4
    left_out = {ids[5], 0, 1}
    expected = [int(i) for i in logits.argsort(descending=True) if int(i) not in left_out]
    assert found == expected and len(found) == 79 - len(left_out)


# ---- composition scores ---------------------------------------------------------------------------------------------


def full_circuits(model, layer: int, fold: bool) -> tuple[list, list]:
    """Each head's OV (C, C) and QK (C, C) of one layer, in x @ W, written out from the fused projections."""
    attn, C = model.model.layers[layer].attn, model.config.n_embd
    D = C // model.config.n_head
    weight = attn.qkv_proj.weight.detach()
    ln = model.model.layers[layer].attn_norm.weight.detach() if fold else torch.ones(C)

    def reads(part, head):  # (C, D): rows part * C + head * D.. of the fused weight, as x @ W
        return weight[part * C + head * D : part * C + (head + 1) * D].T * ln[:, None]

    heads = range(model.config.n_head)
    out = [attn.out_proj.weight.detach()[:, h * D : (h + 1) * D].T for h in heads]
    return [reads(2, h) @ out[h] for h in heads], [reads(0, h) @ reads(1, h).T for h in heads]


@pytest.mark.parametrize("fold", [True, False])
def test_composition_scores_follow_the_definition(fold):
    model = tiny_model(seed=1, shape=dict(vocab_size=20, block_size=16, n_layer=3, n_head=2, n_embd=16))
    with torch.no_grad():
        for block in model.model.layers:
            block.attn_norm.weight.uniform_(0.2, 2.0)  # folding has something to do
    per_layer = [full_circuits(model, layer, fold) for layer in range(3)]
    for kind in "qkv":
        found = circuits.composition_scores(model, kind, fold_ln=fold)
        expected = torch.zeros(3, 2, 3, 2)
        for l1, l2 in [(0, 1), (0, 2), (1, 2)]:
            for h1 in range(2):
                for h2 in range(2):
                    A = per_layer[l1][0][h1]
                    B = {"q": per_layer[l2][1][h2], "k": per_layer[l2][1][h2].T, "v": per_layer[l2][0][h2]}[kind]
                    expected[l1, h1, l2, h2] = (A @ B).norm() / (A.norm() * B.norm())
        torch.testing.assert_close(found, expected, rtol=1e-4, atol=1e-6)


def test_unfolded_composition_scores_are_transformer_lens_ones(specimen):
    pytest.importorskip("transformer_lens")
    from transformer_lens.model_bridge import TransformerBridge

    from minigpt import lens

    lens.register()
    bridge = TransformerBridge.boot_transformers(str(SPECIMEN), trust_remote_code=True, device="cpu")  # raw weights
    model, _ = specimen
    for kind in "qkv":
        expected = bridge.all_composition_scores(kind.upper()).scores.detach()
        torch.testing.assert_close(circuits.composition_scores(model, kind, fold_ln=False), expected, atol=1e-5, rtol=0)


def hand_built(n_layer: int = 2) -> MiniGPTForCausalLM:
    """C = 8, two heads of D = 4, every attention weight zero: the tests set the few they need. Unit norms."""
    torch.manual_seed(0)
    config = MiniGPTConfig(vocab_size=12, block_size=8, n_layer=n_layer, n_head=2, n_embd=8, bias=False)
    model = MiniGPTForCausalLM(config).eval()
    with torch.no_grad():
        for block in model.model.layers:
            block.attn.qkv_proj.weight.zero_()
            block.attn.out_proj.weight.zero_()
    return model


def test_a_head_whose_key_reads_what_an_earlier_head_writes_composes_by_k():
    """Head 0.0 copies direction e0 into e4 (W_V: e0 -> d0, W_O: d0 -> e4). Head 1.0's key reads e4 (its query e1):
    K-composition 1, Q-composition 0. Head 1.1's key reads e5, orthogonal to what 0.0 writes: 0."""
    model = hand_built()
    C, D = 8, 4
    with torch.no_grad():
        layer0, layer1 = (block.attn for block in model.model.layers)
        layer0.qkv_proj.weight[2 * C + 0, 0] = 1.0  # v of head 0, dim 0, reads e0
        layer0.out_proj.weight[4, 0] = 1.0  # head 0's dim 0 writes e4
        layer1.qkv_proj.weight[0, 1] = layer1.qkv_proj.weight[C + 0, 4] = 1.0  # head 1.0: q reads e1, k reads e4
        layer1.qkv_proj.weight[D, 1] = layer1.qkv_proj.weight[C + D, 5] = 1.0  # head 1.1: q reads e1, k reads e5
    k_scores, q_scores = (circuits.composition_scores(model, kind) for kind in "kq")
    assert k_scores[0, 0, 1, 0] == pytest.approx(1.0, abs=1e-6)
    assert k_scores[0, 0, 1, 1] == pytest.approx(0.0, abs=1e-6)
    assert q_scores[0, 0, 1, 0] == pytest.approx(0.0, abs=1e-6)
    assert (k_scores[1] == 0).all() and (k_scores[:, :, 0] == 0).all()  # no reader in the same or an earlier layer


def test_the_baseline_is_what_random_matrices_score():
    """Seeded; close to the test's own Monte Carlo of Gaussian W_V W_O against W_Q W_Kᵀ (other draws); well below
    the hand-built circuit's 1."""
    model = tiny_model()  # C = 32, D = 8
    baseline = circuits.composition_baseline(model, "k", samples=32, seed=0)
    assert baseline == circuits.composition_baseline(model, "k", samples=32, seed=0)
    generator = torch.Generator().manual_seed(123)
    scores = []
    for _ in range(300):
        W_V, W_O, W_Q, W_K = (torch.randn(s, generator=generator) for s in [(32, 8), (8, 32), (32, 8), (32, 8)])
        A, B = W_V @ W_O, W_Q @ W_K.T
        scores.append((A @ B).norm() / (A.norm() * B.norm()))
    assert baseline == pytest.approx(float(torch.stack(scores).mean()), rel=0.1)
    assert 0.05 < baseline < 0.5
    with pytest.raises(ValueError, match="'q', 'k' or 'v'"):
        circuits.composition_baseline(model, "o")


# ---- QK and OV circuits ---------------------------------------------------------------------------------------------


def test_the_ov_circuit_is_embedding_ov_unembedding_with_norms_centring_and_weights():
    model = tiny_model(seed=2)
    with torch.no_grad():
        model.model.layers[1].attn_norm.weight.uniform_(0.5, 1.5)
        model.model.final_norm.weight.uniform_(0.5, 1.5)
    C = 32
    OV = full_circuits(model, 1, fold=True)[0][3]  # (C, C)
    centring = torch.eye(C) - torch.full((C, C), 1 / C)
    embedding = model.model.token_embedding.weight.detach()
    unembedding = model.model.final_norm.weight.detach()[:, None] * model.lm_head.weight.detach().T
    expected = embedding @ centring @ OV @ centring @ unembedding
    found = circuits.ov_circuit(model, 1, 3, source="bare")
    torch.testing.assert_close(found, expected, rtol=1e-4, atol=1e-6)
    values, indices = circuits.ov_circuit(model, 1, 3, top=5, source="bare", rows_per_block=7)  # 50 rows: 8 blocks
    best = expected.topk(5, dim=-1)
    torch.testing.assert_close(values, best.values, rtol=1e-4, atol=1e-6)
    assert torch.equal(indices, best.indices)


def test_a_large_vocabulary_gets_the_top_of_each_row_never_the_whole_matrix():
    torch.manual_seed(0)
    model = MiniGPTForCausalLM(MiniGPTConfig(vocab_size=9000, block_size=8, n_layer=1, n_head=2, n_embd=8)).eval()
    with pytest.raises(ValueError, match="top=k"):
        circuits.ov_circuit(model, 0, 0)
    values, indices = circuits.ov_circuit(model, 0, 0, top=3)
    assert values.shape == indices.shape == (9000, 3) and (values[:, 0] >= values[:, 2]).all()


def test_copying_scores_of_a_copying_head_and_its_negation():
    """A head whose OV is the identity on its 4 dims copies: with tied embeddings its circuit is W_E P Π P W_Eᵀ
    (P centring, Π the projection), every eigenvalue >= 0: score 1. Negated, every eigenvalue <= 0: score 0."""
    model = hand_built(n_layer=1)
    C = 8
    with torch.no_grad():
        for d in range(4):
            model.model.layers[0].attn.qkv_proj.weight[2 * C + d, d] = 1.0  # head 0's value dim d reads e_d
            model.model.layers[0].attn.out_proj.weight[d, d] = 1.0  # and writes it back to e_d
    assert circuits.copying_score(circuits.ov_circuit(model, 0, 0)) == pytest.approx(1.0, abs=1e-4)
    with torch.no_grad():
        model.model.layers[0].attn.out_proj.weight.neg_()
    assert circuits.copying_score(circuits.ov_circuit(model, 0, 0)) == pytest.approx(0.0, abs=1e-4)
    rotation = torch.tensor([[0.0, -1.0], [1.0, 0.0]])  # eigenvalues +-i: it moves tokens, copies none
    assert circuits.copying_score(rotation) == pytest.approx(0.0, abs=1e-9)
    assert circuits.copying_score(torch.diag(torch.tensor([3.0, -1.0]))) == pytest.approx(0.75)


def test_the_positional_qk_circuit_shows_the_specimens_previous_token_head(specimen):
    """The layer-0 head with the highest previous-token score on a text: in its positional QK circuit, each query's
    largest score is on the key just before it (measured: every row of the first 64)."""
    model, encode = specimen
    ids = encode("To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer")
    scores = role_score(run_forward_pass(model, ids).attentions[0], previous_token_pattern(len(ids)))  # (H,)
    head = int(scores.argmax())
    circuit = circuits.positional_qk_circuit(model, 0, head)
    P = model.config.block_size
    assert circuit.shape == (P, P) and torch.isneginf(circuit[torch.ones(P, P, dtype=torch.bool).triu(1)]).all()
    on_previous = (circuit[1:64].argmax(-1) == torch.arange(63)).float().mean()
    assert on_previous > 0.9, (head, on_previous)
