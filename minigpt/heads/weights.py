"""Circuits read from the weights alone, no forward pass: each head's W_Q, W_K, W_V and W_O, and the composition
scores between heads (Elhage et al. 2021) and their random baseline. A head's circuits over tokens and positions are
in `token_circuits`.

The weights of `qkv_proj` / `out_proj` are read per head, in the convention x @ W (TransformerLens's W_Q, W_K, W_V
(C, D) and W_O (D, C) per head).

Shapes: L layers, H heads, C width, D = C // H, V vocabulary, P positions (block_size).
"""

import torch

from minigpt.heads.errors import InstrumentError, checked_count, checked_layer

# ---- per-head weights -----------------------------------------------------------------------------------------------


def head_weights(model, layer: int, fold_ln: bool = True) -> dict[str, torch.Tensor]:
    """One layer's W_Q, W_K, W_V (H, C, D) and W_O (H, D, C), float32 on the CPU: x @ W_Q[h] is head h's query
    (bias aside). `qkv_proj` is an nn.Linear C -> 3C whose output rows h*D..(h+1)*D of each third are head h's;
    `out_proj`'s input columns h*D.. read head h. fold_ln: the layer norm's weight multiplies the rows of W_Q, W_K,
    W_V (what its elementwise scale does to the input they read)."""
    block = model.model.layers[checked_layer(model.config, layer)]
    C, H = model.config.n_embd, model.config.n_head
    weights = block.attn.qkv_proj.weight.detach().float().cpu()  # (3C, C): (out, in)
    per_head = [w.T.unflatten(1, (H, C // H)).permute(1, 0, 2) for w in weights.split(C)]  # 3 x (H, C, D)
    if fold_ln:
        scale = block.attn_norm.weight.detach().float().cpu()[:, None]  # (C, 1): one factor per input row
        per_head = [scale * w for w in per_head]
    W_O = block.attn.out_proj.weight.detach().float().cpu().T.unflatten(0, (H, C // H))  # (H, D, C)
    return dict(zip(("W_Q", "W_K", "W_V"), per_head)) | {"W_O": W_O}


# ---- composition scores ---------------------------------------------------------------------------------------------


def check_kind(kind: str) -> str:
    if str(kind).lower() not in ("q", "k", "v"):
        raise InstrumentError(f"The composition kind must be 'q', 'k' or 'v', not {kind!r}.")
    return str(kind).lower()


def composition(P, R, X, Y) -> torch.Tensor:
    """(n, m) ||A B||_F / (||A||_F ||B||_F) for writers A = P R (P (n, C, D), R (n, D, C)) and readers B = X Yᵀ (X,
    Y (m, C, D)), from D x D products alone (GPT-2's 144 x 144 pairs of 768 x 768 products would take minutes): with
    M = R X, ||P M Yᵀ||² = tr(Mᵀ PᵀP M YᵀY) = sum(M * (PᵀP M YᵀY)), ||P R||² = sum(R * PᵀP R), ||X Yᵀ||² =
    sum(XᵀX * YᵀY). In float64: these are sums of squares' worth of products."""
    P, R, X, Y = (t.double() for t in (P, R, X, Y))
    gram_P, gram_X, gram_Y = P.mT @ P, X.mT @ X, Y.mT @ Y  # (n or m, D, D)
    M = torch.einsum("ndc,mce->nmde", R, X)  # (n, m, D, D)
    product = (M * (gram_P[:, None] @ M @ gram_Y[None])).sum((-2, -1)).clamp(min=0).sqrt()  # (n, m)
    writer = (R * (gram_P @ R)).sum((-2, -1)).clamp(min=0).sqrt()  # (n,)
    reader = (gram_X * gram_Y).sum((-2, -1)).clamp(min=0).sqrt()  # (m,)
    return (product / writer[:, None] / reader[None]).float()


def composition_scores(model, kind: str, fold_ln: bool = True) -> torch.Tensor:
    """(L, H, L, H) composition scores (Elhage et al. 2021) of each earlier head (writer, first two indices) into
    each later head (reader), 0 where the reader's layer is not later; NaN for a head whose weights are all zero.

    score = ||A B||_F / (||A||_F ||B||_F), with TransformerLens's conventions (all_composition_scores): A = the
    writer's OV = W_V W_O (C x C, x @ W); B = the reader's W_Q W_Kᵀ for "q", its transpose W_K W_Qᵀ for "k" (the
    writer's output read as keys), its OV for "v". fold_ln: each reader's and writer's attn_norm weight folded into
    the W_Q, W_K, W_V it feeds (TransformerLens's bridge compares without folding: fold_ln=False)."""
    kind = check_kind(kind)
    weights = [head_weights(model, layer, fold_ln) for layer in range(model.config.n_layer)]
    W = {name: torch.stack([w[name] for w in weights]) for name in ("W_Q", "W_K", "W_V", "W_O")}  # (L, H, ...)
    W["W_O^T"] = W["W_O"].mT  # (L, H, C, D): the reader's OV is W_V (W_Oᵀ)ᵀ
    X, Y = (W[name] for name in {"q": ("W_Q", "W_K"), "k": ("W_K", "W_Q"), "v": ("W_V", "W_O^T")}[kind])  # B = X Yᵀ
    L, H = model.config.n_layer, model.config.n_head
    scores = torch.zeros(L, H, L, H, device=X.device)
    for layer in range(L - 1):  # one writing layer at a time: (H, later heads, D, D) at most in memory
        later = X[layer + 1 :].flatten(0, 1), Y[layer + 1 :].flatten(0, 1)
        scores[layer, :, layer + 1 :] = composition(W["W_V"][layer], W["W_O"][layer], *later).view(H, -1, H)
    return scores


def composition_baseline(model, kind: str, samples: int = 32, seed: int = 0) -> float:
    """The mean composition score of i.i.d. Gaussian W_V, W_O, W_Q, W_K of this model's shapes (C, D), over
    samples x samples writer-reader pairs, seeded: what "no composition" looks like at this width (it shrinks as C
    grows). The score is scale-free and every kind reads two (C, D) factors, so q, k and v share one baseline."""
    check_kind(kind)
    samples = checked_count(samples, "samples", "random weights of each kind drawn")
    C, D = model.config.n_embd, model.config.n_embd // model.config.n_head
    generator = torch.Generator().manual_seed(seed)
    P, R, X, Y = (
        torch.randn(samples, *shape, generator=generator, device="cpu") for shape in ((C, D), (D, C), (C, D), (C, D))
    )
    return float(composition(P, R, X, Y).mean())


__all__ = ["composition_baseline", "composition_scores", "head_weights"]
