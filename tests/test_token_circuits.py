"""A head's circuits over tokens read through what earlier layers write (minigpt.heads.token_circuits): the effective
embedding is the model's own hidden state of [start, t]; the OV and QK circuits are the formulas written here on it;
the copying scores are their definitions, against random circuits of the same shape; on the shipped specimen, 1.1
copies (0.61 bare, 0.99 through layer 0) and its queries pick keys that follow their own token."""

import pytest
import torch
from transformers import AutoModelForCausalLM

import modeling_minigpt  # noqa: F401 (registers MiniGPT with the Auto classes)
from helpers import SPECIMEN, tiny_model
from minigpt import heads


@pytest.fixture(scope="module")
def specimen():
    return AutoModelForCausalLM.from_pretrained(SPECIMEN).eval()


def hidden_state(model, sequences: list[list[int]], layer: int, position: int) -> torch.Tensor:
    """(N, C) the stream entering `layer` at `position`, from output_hidden_states (no hook)."""
    with torch.no_grad():
        out = model(torch.tensor(sequences), use_cache=False, output_hidden_states=True)
    return out.hidden_states[layer][:, position].float()


def centred(x):
    return x - x.mean(-1, keepdim=True)


def per_head(model, layer: int, head: int) -> dict[str, torch.Tensor]:
    """Head `head`'s W_Q, W_K, W_V (C, D) and W_O (D, C) read from the fused projections, the norm's weight folded."""
    block, C, D = model.model.layers[layer], model.config.n_embd, model.config.head_dim
    fused, gain = block.attn.qkv_proj.weight.detach(), block.attn_norm.weight.detach()[:, None]
    read = {name: gain * fused[part * C + head * D : part * C + (head + 1) * D].T for part, name in enumerate("QKV")}
    return read | {"O": block.attn.out_proj.weight.detach()[:, head * D : (head + 1) * D].T}


def test_the_effective_embedding_is_the_hidden_state_after_the_start_token():
    model = tiny_model(seed=3, bos_token_id=0)
    V = model.config.vocab_size
    expected = hidden_state(model, [[0, t] for t in range(V)], 1, 1)
    torch.testing.assert_close(heads.effective_embedding(model, 1), expected, rtol=1e-5, atol=1e-6)
    # Layer 0 reads the token and position embeddings themselves
    embeddings = model.model.token_embedding.weight.detach() + model.model.position_embedding.weight.detach()[1]
    torch.testing.assert_close(heads.effective_embedding(model, 0), embeddings, rtol=0, atol=1e-6)


def test_the_ov_and_qk_circuits_through_earlier_layers_are_their_formulas():
    """E W_V W_O (final norm centred, weighted) W_U and E W_Q (F W_K)ᵀ / sqrt(D), E the effective embedding and F
    the keys that follow each token (averaged over x of [start, t, x]). Float32 products of 32-wide vectors: 1e-4."""
    model = tiny_model(seed=4, bos_token_id=0)
    V = model.config.vocab_size
    W = per_head(model, 1, 2)
    E = centred(hidden_state(model, [[0, t] for t in range(V)], 1, 1))
    unembedding = model.model.final_norm.weight.detach()[:, None] * model.lm_head.weight.detach().T
    expected_ov = E @ W["V"] @ centred(W["O"]) @ unembedding
    torch.testing.assert_close(heads.ov_circuit(model, 1, 2), expected_ov, rtol=1e-4, atol=1e-4)
    xs = torch.randint(V, (8,), generator=torch.Generator().manual_seed(0)).tolist()  # the library's draw
    F = centred(torch.stack([hidden_state(model, [[0, t, x] for t in range(V)], 1, 2) for x in xs]).mean(0))
    expected_qk = (E @ W["Q"]) @ (F @ W["K"]).T / model.config.head_dim**0.5
    torch.testing.assert_close(heads.qk_circuit(model, 1, 2), expected_qk, rtol=1e-4, atol=1e-4)
    keys = (E @ W["Q"]) @ (E @ W["K"]).T / model.config.head_dim**0.5
    torch.testing.assert_close(heads.qk_circuit(model, 1, 2, keys="token"), keys, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="reaches a head only through earlier layers"):
        heads.qk_circuit(model, 0, 0, source="bare")


def test_copying_scores_follow_their_definitions_against_random_circuits():
    diagonal = torch.diag(torch.tensor([3.0, -1.0]))
    assert heads.copying_score(diagonal) == pytest.approx(0.75)  # positive share: 3 / 4
    assert heads.elhage_copying_score(diagonal) == pytest.approx(0.5)  # Elhage: (3 - 1) / 4
    generator = torch.Generator().manual_seed(1)  # not the library's seed: another draw of the same kind
    shares = []
    for _ in range(16):
        matrix = torch.randn(79, 32, generator=generator) @ torch.randn(32, 79, generator=generator)
        values = torch.linalg.eigvals(matrix.double())
        shares.append(float(values.real.clamp(min=0).sum() / values.abs().sum()))
    baseline = heads.copying_baseline(79, 32)
    # Two means of 16 draws whose spread is ~0.03: within 0.05 of each other
    assert baseline["positive_share"] == pytest.approx(sum(shares) / len(shares), abs=0.05)
    assert abs(baseline["elhage"]) < 0.1  # random circuits neither copy nor suppress


def test_the_specimens_induction_head_copies_through_layer_0_and_matches_previous_tokens(specimen):
    """Read from the bare embedding 1.1 looks like it barely copies; read through what layer 0 writes it copies
    almost every token (issue 50), far above random circuits of its shape; its queries pick the key after their own
    token, which no other head does."""
    tokens = [t for t in range(specimen.config.vocab_size) if t != specimen.config.bos_token_id]
    bare, through = (heads.ov_circuit(specimen, 1, 1, source=source) for source in ("bare", "effective"))
    baseline = heads.copying_baseline(specimen.config.vocab_size, specimen.config.head_dim)["positive_share"]
    assert heads.copying_score(through) >= 0.9 > heads.copying_score(bare) and baseline < 0.5
    assert heads.diagonal_share(through, tokens) > 0.8 > 0.2 > heads.diagonal_share(bare, tokens)
    torch.testing.assert_close(heads.ov_circuit(specimen, 1, 1), through)  # above layer 0 the default reads through
    matching = [heads.diagonal_share(heads.qk_circuit(specimen, 1, head), tokens) for head in range(4)]
    assert matching[1] > 0.9 and max(matching[:1] + matching[2:]) < 0.2
