"""A head's circuits over tokens: what attending to a token makes it write (OV), and which tokens its queries pick
(QK), read through the tokens as the head sees them.

A head above layer 0 never reads a bare token embedding: it reads what the layers before it made of the token. So the
tokens are read through the **effective embedding** (the method used here): each token t run as [start, t], and the
residual stream entering the head's layer at t's position kept: (V, C), what layers 0..L-1 write for a token seen
right after the start token, by the model's own forward pass. The bare embedding (W_E) leaves that out: a head of a
later layer that copies can look like one that does not (the specimen's 1.1 copies 0.61 of its eigenvalue mass bare,
0.99 through layer 0). For a layer-0 head the two differ only by the position embedding.

An induction head's query matches a key's *previous* token, which a key seen right after the start token cannot show:
`qk_circuit(..., keys="previous")` reads each key token t as the stream at x in [start, t, x], x drawn from the
vocabulary and averaged: entry (s, t) is how much a query on token s wants a key that follows t.

The layer norms on the way are linear but for their divisors: each one's centring and weight are applied exactly
(weights folded into W_Q, W_K, W_V and W_U), their divisors and biases left out (TransformerLens's folded weights make
the same approximation).

Shapes: V vocabulary, C width, D = C // H.
"""

import torch

from minigpt.heads.errors import InstrumentError, checked_count, checked_head, checked_ids
from minigpt.heads.hooks import hooks
from minigpt.heads.runs import run
from minigpt.heads.weights import head_weights

MAX_ENTRIES = 1 << 26  # the largest V x V matrix built whole (256 MB of float32: V up to 8,192)
SOURCES = ("auto", "effective", "bare")
PREVIOUS_SAMPLES = 8  # tokens x averaged over for a key that follows t
ROWS_PER_PASS = 4096  # short sequences a forward pass of the effective embedding takes at once


def centred(x: torch.Tensor) -> torch.Tensor:
    """x minus its mean over the width: what a layer norm does first, exactly (it is linear)."""
    return x - x.mean(-1, keepdim=True)


def source_of(layer: int, source: str) -> str:
    if source not in SOURCES:
        raise InstrumentError(f"The tokens are read 'effective', 'bare' or 'auto', not {source!r}.")
    return ("effective" if layer > 0 else "bare") if source == "auto" else source


def stream_at(model, layer: int, sequences: torch.Tensor, position: int) -> torch.Tensor:
    """(N, C) the stream entering `layer` at `position` of each of N sequences, from the model's forward passes."""
    kept = []

    def keep(module, args):
        kept.append(args[0][:, position].detach().float().cpu())

    block = model.model.layers[layer] if layer < model.config.n_layer else model.model.final_norm
    with hooks((block, "pre", keep)):
        for chunk in sequences.split(ROWS_PER_PASS):
            run(model, chunk)
    return torch.cat(kept)


def start_id(model) -> int:
    start = model.config.bos_token_id
    if start is None:
        raise InstrumentError("The effective embedding runs each token after the start token: the model has none.")
    return start


def effective_embedding(model, layer: int, tokens: list[int] | None = None) -> torch.Tensor:
    """(V, C) the effective embedding of every token for a head of `layer` (`tokens`: of those alone, (n, C)): the
    stream entering `layer` at position 1 of [start, t] (embeddings, position 1, and everything layers 0..layer-1
    write there)."""
    vocabulary = torch.arange(model.config.vocab_size, device="cpu")  # ids: each run moves them to the model
    chosen = vocabulary if tokens is None else chosen_tokens(model, tokens)
    sequences = torch.stack([torch.full_like(chosen, start_id(model)), chosen], dim=1)  # (n, 2)
    return stream_at(model, layer, sequences, 1)


def following_embedding(model, layer: int, samples: int = PREVIOUS_SAMPLES, seed: int = 0) -> torch.Tensor:
    """(V, C) each token t as the previous token of a key: the stream entering `layer` at x in [start, t, x],
    averaged over `samples` tokens x drawn (seeded) from the vocabulary."""
    V = model.config.vocab_size
    xs = torch.randint(V, (samples,), generator=torch.Generator().manual_seed(seed), device="cpu")
    streams = []
    for x in xs:
        column = lambda value: torch.full((V,), value, device="cpu")  # noqa: E731
        sequences = torch.stack([column(start_id(model)), torch.arange(V, device="cpu"), column(int(x))], dim=1)
        streams.append(stream_at(model, layer, sequences, 2))
    return torch.stack(streams).mean(0)


def chosen_tokens(model, tokens) -> torch.Tensor:
    """(n,) the token ids a call chose (`tokens`), each of the model's vocabulary, on the CPU."""
    chosen = checked_ids(tokens, model.config.vocab_size, "tokens").cpu()
    if chosen.dim() != 1:
        raise InstrumentError(f"tokens must be a list of token ids, not a tensor of {tuple(chosen.shape)}.")
    return chosen


def token_embedding(model, layer: int, source: str, tokens: list[int] | None = None) -> torch.Tensor:
    """(V, C) the tokens as a head of `layer` reads them, centred: effective, or the bare W_E (`tokens`: those
    alone, (n, C))."""
    if source_of(layer, source) == "effective":
        return centred(effective_embedding(model, layer, tokens))
    embedding = model.model.token_embedding.weight.detach()
    return centred((embedding if tokens is None else embedding[chosen_tokens(model, tokens)]).float().cpu())


def folded_unembedding(model) -> torch.Tensor:
    """(C, V) the unembedding with the final norm's weight folded in: where a head's output lands in the logits. At
    GPT-2's size 154 MB, the same for every head: a server keeps it per model (`ov_circuit(..., unembedding=)`)."""
    final = model.model.final_norm.weight.detach().float().cpu()
    return final[:, None] * model.lm_head.weight.detach().float().cpu().T


def checked_size(V: int) -> None:
    if V * V > MAX_ENTRIES:
        raise InstrumentError(
            f"A circuit over a {V:,}-token vocabulary is {V:,} x {V:,} numbers: pass top=k for each row's k largest "
            "entries instead."
        )


def ov_circuit(
    model, layer, head, top=None, source="auto", rows_per_block=None, *, tokens=None, unembedding=None
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """The head's OV circuit over tokens: entry (s, t) is how much attending to token s raises the logit of t,
    E W_V[h] W_O[h] W_U, with E the tokens as the head reads them (`source`: "auto" is the effective embedding above
    layer 0 and the bare one in layer 0; "effective"; "bare": W_E) and the final norm's centring and weight on the
    way out. top None: the (V, V) matrix (refused above MAX_ENTRIES). top k: (values, indices), (V, k) each: every
    row's k largest entries, in blocks of rows, so that no V x V matrix is built (GPT-2: 50,257 x 50,257).
    `tokens` [s, ...]: the rows of those source tokens alone (n, V or k), the same numbers as those rows of the whole
    circuit (float32 rounding aside); `unembedding`: `folded_unembedding(model)`, kept from an earlier call."""
    layer, head = checked_head(model.config, layer, head)
    top = None if top is None else checked_count(top, "top", "each row's largest entries kept")
    rows_per_block = None if rows_per_block is None else checked_count(rows_per_block, "rows_per_block", "rows a block")
    W = head_weights(model, layer)
    unembedding = folded_unembedding(model) if unembedding is None else unembedding  # (C, V)
    left = token_embedding(model, layer, source, tokens) @ W["W_V"][head]  # (V or n, D)
    right = centred(W["W_O"][head]) @ unembedding  # (D, V): the final norm centres the head's output
    V = right.shape[1]
    if top is None:
        checked_size(V)
        return left @ right
    rows = rows_per_block or max(1, (1 << 24) // V)  # 64 MB of float32 a block
    blocks = [(block @ right).topk(min(top, V), dim=-1) for block in left.split(rows)]
    return torch.cat([b.values for b in blocks]), torch.cat([b.indices for b in blocks])


def qk_circuit(model, layer: int, head: int, keys: str = "previous", source: str = "auto") -> torch.Tensor:
    """(V, V) the head's attention scores over tokens (before the softmax, its scaling applied): a query on token s
    (row) against a key (column) on token t (`keys` "token") or following token t (`keys` "previous": what an
    induction head matches), the tokens read as `ov_circuit` reads them."""
    layer, head = checked_head(model.config, layer, head)
    if keys not in ("token", "previous"):
        raise InstrumentError(f"keys must be 'token' or 'previous', not {keys!r}.")
    checked_size(model.config.vocab_size)
    W = head_weights(model, layer)
    queries = token_embedding(model, layer, source) @ W["W_Q"][head]  # (V, D)
    if keys == "token":
        key_side = token_embedding(model, layer, source)
    elif source_of(layer, source) == "effective":
        key_side = centred(following_embedding(model, layer))
    else:
        raise InstrumentError("A key's previous token reaches a head only through earlier layers: use the effective "
                              "embedding (source 'effective' or 'auto' above layer 0).")  # fmt: skip
    return queries @ (key_side @ W["W_K"][head]).T * model.model.layers[layer].attn.scaling


def positional_qk_circuit(model, layer: int, head: int) -> torch.Tensor:
    """(P, P) the head's attention scores from the position embeddings alone, P = block_size: entry (i, j) =
    (W_pos[i] W_Q[h]) · (W_pos[j] W_K[h]) times the head's scaling, with the norm's centring and weight applied
    (divisor, biases and token embeddings left out) and -inf above the diagonal (keys after the query, which the
    causal mask hides). A previous-token head shows its maximum of each row just below the diagonal. The bare
    position embedding: for a head above layer 0 this leaves out what earlier layers write."""
    layer, head = checked_head(model.config, layer, head)
    W = head_weights(model, layer)
    positions = centred(model.model.position_embedding.weight.detach().float().cpu())  # (P, C)
    scores = (positions @ W["W_Q"][head]) @ (positions @ W["W_K"][head]).T * model.model.layers[layer].attn.scaling
    return scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), float("-inf"))


# ---- copying and matching, against chance ---------------------------------------------------------------------------


def eigenvalues(matrix: torch.Tensor) -> torch.Tensor:
    return torch.linalg.eigvals(matrix.detach().double().cpu())


def copying_score(matrix: torch.Tensor) -> float:
    """The positive share of a square circuit's eigenvalue mass: sum(max(Re λ, 0)) / sum(|λ|), in [0, 1]. 1: every
    eigenvalue positive, a head that raises the tokens it attends to; 0: none positive (it suppresses them, or rotates
    them: λ = ±i counts 0). Not Elhage et al.'s summary (`elhage_copying_score`); for real eigenvalues this one is
    (1 + theirs) / 2."""
    values = eigenvalues(matrix)
    return float(values.real.clamp(min=0).sum() / values.abs().sum())


def elhage_copying_score(matrix: torch.Tensor) -> float:
    """Elhage et al. 2021's summary of a circuit's eigenvalues: sum(λ) / sum(|λ|) (its real part), in [-1, 1]."""
    values = eigenvalues(matrix)
    return float(values.sum().real / values.abs().sum())


def copying_baseline(vocab_size: int, head_dim: int, samples: int = 16, seed: int = 0) -> dict[str, float]:
    """What both copying scores give for random circuits of a head's shape: A B with A (V, D) and B (D, V) i.i.d.
    Gaussian, averaged over `samples` draws (seeded): the level that says nothing."""
    vocab_size, head_dim = checked_count(vocab_size, "vocab_size", "rows"), checked_count(head_dim, "head_dim", "width")
    samples = checked_count(samples, "samples", "random circuits averaged over")
    generator = torch.Generator().manual_seed(seed)
    found = {"positive_share": 0.0, "elhage": 0.0}
    for _ in range(samples):
        matrix = torch.randn(vocab_size, head_dim, generator=generator, device="cpu") @ torch.randn(
            head_dim, vocab_size, generator=generator, device="cpu"
        )
        found["positive_share"] += copying_score(matrix) / samples
        found["elhage"] += elhage_copying_score(matrix) / samples
    return found


def diagonal_share(matrix: torch.Tensor, tokens: list[int] | None = None) -> float:
    """The share of rows (over `tokens`, default all) whose largest entry is on the diagonal: tokens that raise
    themselves most (OV) or queries that pick a key of their own token most (QK). Chance: 1 / len(tokens)."""
    tokens = list(range(matrix.shape[0])) if tokens is None else tokens
    square = matrix[tokens][:, tokens]
    return float((square.argmax(-1) == torch.arange(len(tokens), device=square.device)).float().mean())


__all__ = [
    "copying_baseline",
    "copying_score",
    "diagonal_share",
    "effective_embedding",
    "elhage_copying_score",
    "following_embedding",
    "ov_circuit",
    "positional_qk_circuit",
    "qk_circuit",
]
