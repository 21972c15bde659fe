"""The server's work budgets: how much work an instrument of `minigpt.heads` may do for one request (the library
itself keeps numbers only, and measures what it is given), and how that work is counted.

Work is counted in multiply-adds' worth of time on one CPU core (float32), measured on this project's 2-core machine
(bench/bench_head_metrics.py compares the estimate with the measured time): every token through every weight, each
head's two T x T products, each attention weight's own cost, a call's fixed cost. `WORK_PER_SECOND` turns it into
seconds. The bounds: head importance (`importance_tokens`: the start of a text it reads) and the Head Finder's
measure (`first_tokens` and `within_work` cut its corpus before it is recorded, `ablation_windows` is the part the
ablation reads).
"""

WORK_PER_SECOND = 3e10
CELL_WORK = 64  # an attention weight's mask, softmax and reads cost about this many multiply-adds' time
CALL_WORK = 1e8  # a forward call's fixed cost (Python and dispatch, about 3 ms): it dominates for short windows


def forward_work(config, tokens: int, rows: int = 1) -> float:
    """Work of one forward call over `rows` rows of `tokens` tokens: each token through every weight (the blocks' and
    the unembedding's), each head's two T x T products, and every attention weight's own cost."""
    weights = config.n_layer * 12 * config.n_embd**2 + config.vocab_size * config.n_embd
    attention = config.n_layer * config.n_head * tokens**2 * (2 * config.n_embd // config.n_head + CELL_WORK)
    return rows * (tokens * weights + attention) + CALL_WORK


# Importance runs the model once per head and once plain: it measures at most this much work (importance_work), about
# 30 s on one CPU core. A shipped model's whole context fits; GPT-2 its first tokens (docs/hosting.md says how many).
IMPORTANCE_WORK = 30 * WORK_PER_SECOND


def importance_work(config, tokens: int) -> float:
    """Work of importance over `tokens` tokens: one batch of (1 + heads) rows."""
    return forward_work(config, tokens, rows=1 + config.n_layer * config.n_head)


def importance_tokens(config, length: int) -> int:
    """The longest start of a `length`-token text whose importance fits IMPORTANCE_WORK (at least 2 tokens)."""
    tokens = length
    while tokens > 2 and importance_work(config, tokens) > IMPORTANCE_WORK:
        tokens = max(2, int(tokens * 0.9))
    return tokens


# The Head Finder's measure (heads.measure): recording the maps reads at most RECORD_SECONDS' worth, the ablation's
# (heads + 1) passes at most ABLATION_SECONDS': every shipped model's whole corpus fits, a big model reads fewer tokens.
RECORD_SECONDS = 40  # on one core
ABLATION_SECONDS = 60


def first_tokens(windows: list[list[int]], budget: int) -> list[list[int]]:
    """The first windows holding `budget` tokens, the last one cut (a piece of one token, which predicts nothing, is
    left out)."""
    kept, total = [], 0
    for window in windows:
        piece = window[: budget - total]
        if len(piece) < 2:
            break
        kept.append(piece)
        total += len(piece)
    return kept


def within_work(windows: list[list[int]], work, bound: float) -> list[list[int]]:
    """The first windows whose `work(length)` sums to at most `bound`, the last one cut to fit (a piece of one token,
    which predicts nothing, is left out)."""
    kept, total = [], 0.0
    for window in windows:
        length = len(window)
        if total + work(length) > bound:  # the longest start of the window that still fits (work grows with length)
            low, high = 1, length
            while low < high:
                middle = (low + high + 1) // 2
                low, high = (middle, high) if total + work(middle) <= bound else (low, middle - 1)
            length = low
        if length < 2:
            break
        kept.append(window[:length])
        total += work(length)
        if length < len(window):
            break
    return kept


def recording_work(config, length: int) -> float:
    """Work of recording one window's maps and reading the metrics off them: about two eager passes (windows are read
    in batches: no call's fixed cost a window)."""
    return 2 * (forward_work(config, length) - CALL_WORK)


def ablation_work(config, length: int) -> float:
    """Work of one window's ablation: a batch of (heads + 1) rows, one plain and one per head switched off."""
    return forward_work(config, length, rows=1 + config.n_layer * config.n_head)


def ablation_windows(model, windows: list[list[int]]) -> list[list[int]]:
    """The first windows the ablation reads: all of a shipped model's corpus; a big model's first tokens only, so
    that its (heads + 1) passes stay within ABLATION_SECONDS."""
    config = model.config
    return within_work(windows, lambda length: ablation_work(config, length), ABLATION_SECONDS * WORK_PER_SECOND)


def measure_seconds(config, windows: list[list[int]], ablated: list[list[int]]) -> float:
    """The estimated time of `measure` on one core: the recording of `windows` and the ablation of `ablated`."""
    work = sum(recording_work(config, len(w)) for w in windows) + sum(ablation_work(config, len(w)) for w in ablated)
    return work / WORK_PER_SECOND


# Why a head attends (heads.qk_attribution): what each part puts into the key at every key the query sees, K x P x D
# numbers (GPT-2's last layer at 1,024 tokens: 10.3 M, 41 MB). A bigger model's split is asked at an earlier query.
WHY_NUMBERS = 16_000_000


def why_parts(config, layer: int) -> int:
    """The stream's parts entering `layer` (qk_attribution's P): two embeddings, each earlier layer's heads, attention
    bias and MLP, and the constant."""
    return 3 + layer * (config.n_head + 2)


def why_keys(config, layer: int) -> int:
    """The most keys (the query's position + 1) whose split fits WHY_NUMBERS."""
    return max(1, WHY_NUMBERS // (why_parts(config, layer) * config.head_dim))


__all__ = [
    "ABLATION_SECONDS",
    "CALL_WORK",
    "CELL_WORK",
    "IMPORTANCE_WORK",
    "RECORD_SECONDS",
    "WORK_PER_SECOND",
    "ablation_windows",
    "ablation_work",
    "first_tokens",
    "forward_work",
    "importance_tokens",
    "importance_work",
    "measure_seconds",
    "recording_work",
    "WHY_NUMBERS",
    "why_keys",
    "why_parts",
    "within_work",
]
