"""Continuous batching for the demo: the requests in flight decode as one batch that requests join and leave at token
boundaries, each with its own sampling settings and its own seeded generator (no Gradio here: numbers in, tokens out).

    batcher = ContinuousBatcher(model, eos_id=0, never_ids=[1], max_rows=128, max_waiting=64)
    for token in batcher.stream(prompt_ids, max_new=200, sampling=Sampling(1.0, 0, 1.0, seed=42)):
        ...                                  # the same tokens alone or among 100 other requests
    names = batcher.generate(prompt_ids, max_new=15, sampling=..., rows=10)   # one request, 10 rows, one generator

Why not transformers' continuous batching (`generate_batch`, `ContinuousBatchingManager`, `PagedAttentionCache`):
it samples every request with one `torch.multinomial` on the global generator, seeded once per manager (and one
`do_sample` for all), so a seed cannot give a request the same text alone and in a crowd; it packs every request into
one row, which MiniGPT's context check refuses once the batch holds more than `block_size` tokens; it cannot go past
the context (position `block_size` is an index error, no window jump); and MiniGPT's own sdpa path does not read the
paged cache (only `paged|eager` works). The README shows each of these, measured.

How a row computes the same numbers whatever else is in the batch (so that a seed's text never depends on the crowd):
- every row has its own cache row of fixed width `block_size` (slot t holds position t) and attends over all of it
  with a mask: the attention shapes of a row do not depend on the other rows (no left padding to the longest one);
- prompts (and the window jumps) are computed one request at a time, as alone; only the one-token decoding steps are
  batched;
- a decoding step has at least `MIN_DECODE_ROWS` rows (empty rows fill a smaller batch): a CPU matrix product takes
  other kernels for few rows, and which and up to how many depends on the CPU and the product's shape (on an AVX2
  machine a row's bits were the same from 4 rows up; on an AVX-512 one, a 256-wide product needs 11). So the floor is
  measured for each model at start (`rows_for_same_bits`) and raised to what this machine needs (a test checks it);
- each request samples from its own rows' logits with transformers' logits warpers and its own `torch.Generator`
  (one uniform number per row, through the cumulative distribution).
"""

import asyncio
import contextlib
import functools
import queue
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field

import torch
from torch.nn import functional as F
from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from minigpt.demo.core.limits import MIN_DECODE_ROWS  # the least floor; raised where this CPU needs more (above)
from minigpt.errors import VisitorError

DONE = object()  # the event that ends a request's stream


@dataclass
class Sampling:
    temperature: float  # 0: greedy
    top_k: int  # 0: off
    top_p: float  # 1: off
    seed: int

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def warpers(self) -> LogitsProcessorList:
        """transformers' own logits warpers, in generate()'s order; like generate(), none for a setting that is off
        (temperature 1 divides by 1)."""
        warpers = LogitsProcessorList()
        if self.temperature != 1.0:
            warpers.append(TemperatureLogitsWarper(self.temperature))
        if self.top_k:
            warpers.append(TopKLogitsWarper(self.top_k))
        if self.top_p < 1.0:
            warpers.append(TopPLogitsWarper(self.top_p))
        return warpers


class ServerBusy(VisitorError):
    """The batch and the waiting line are full: the caller should say so and let the user try again. Not a mistake,
    but like one an answer for the visitor (try again later), not a failure for the log."""


def kept_when_full(block_size: int) -> int:
    """Tokens a full window keeps when it jumps: its last 3/4."""
    return max(1, block_size * 3 // 4)


def rows_for_same_bits(model, max_rows: int) -> int:
    """The fewest rows from which every linear layer of `model` gives each row the same bits in a batch of any size up
    to `max_rows`, on this machine (the CPU's matrix kernels change with the row count below some size). The kernels
    depend on the shapes alone, so the measure is made once per set of shapes, on weights of its own (no hook of the
    model's modules can touch it)."""
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    shapes = tuple(sorted({(m.in_features, m.out_features, m.bias is not None) for m in linears}))
    return rows_for_same_bits_of(shapes, linears[0].weight.dtype if linears else torch.float32, max_rows)


@functools.cache
def rows_for_same_bits_of(shapes: tuple[tuple[int, int, bool], ...], dtype: torch.dtype, max_rows: int) -> int:
    generator = torch.Generator().manual_seed(0)
    needed = 1
    with torch.no_grad():
        for in_features, out_features, has_bias in shapes:
            weight = torch.randn(out_features, in_features, generator=generator, dtype=dtype, device="cpu")
            bias = torch.randn(out_features, generator=generator, dtype=dtype, device="cpu") if has_bias else None
            x = torch.randn(max_rows, in_features, generator=generator, dtype=dtype, device="cpu")
            full = F.linear(x, weight, bias)  # (max_rows, out)
            rows = max_rows
            while rows > 1 and torch.equal(F.linear(x[: rows - 1], weight, bias), full[: rows - 1]):
                rows -= 1
            needed = max(needed, rows)
    return needed


class SlotCache:
    """Keys and values of `capacity` rows, each `block_size` slots wide (slot t holds position t), for every layer.

    It serves MiniGPT's forward as its `past_key_values` (the two methods the model calls: `get_seq_length`, `update`).
    Before each forward, `use` says which rows the batch is (slots first..first+B) and where the new tokens go.
    """

    def __init__(self, config, capacity: int, device="cpu"):
        self.config, self.device = config, device  # the model's device: the keys and values live beside it
        shape = (config.n_layer, 0, config.n_head, config.block_size, config.head_dim)
        self.keys = self.values = torch.zeros(shape, device=device)
        self.reserve(capacity)
        self.use(slice(0, 0), None)

    def reserve(self, capacity: int, most: int | None = None) -> None:
        """Room for `capacity` rows, grown on demand (a big model's rows are large) to twice what it had, up to `most`
        rows: requests that arrive one by one then copy the cache a few times, not once each."""
        if capacity > self.keys.shape[1]:
            capacity = max(capacity, min(2 * self.keys.shape[1], most or capacity))
            grow = lambda old: torch.cat([old, old.new_zeros(old.shape[0], capacity - old.shape[1], *old.shape[2:])], 1)
            self.keys, self.values = grow(self.keys), grow(self.values)  # (L, rows, H, S, D)

    def use(self, rows: slice, positions: torch.Tensor | None) -> None:
        """The next forward is rows `rows`; `positions` (B,) where each row's one new token goes, or None for a
        prefill of one row from position 0."""
        self.rows, self.positions = rows, positions
        self.row_index = None if positions is None else torch.arange(len(positions), device=self.device)
        self.past_length = 0 if positions is None else int(positions.max())  # for the model's context-length check

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.past_length

    def update(self, key, value, layer_idx: int, *args, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
        keys, values = self.keys[layer_idx, self.rows], self.values[layer_idx, self.rows]  # views (B, H, S, D)
        if self.positions is None:  # prefill: key (1, H, T, D) at positions 0..T-1
            keys[:, :, : key.shape[2]], values[:, :, : key.shape[2]] = key, value
        else:  # decoding: key (B, H, 1, D), row b at its own position
            rows, positions = self.row_index, self.positions
            keys[rows, :, positions], values[rows, :, positions] = key[:, :, 0], value[:, :, 0]
        return keys, values  # every slot; the mask hides those a row has not written

    def copy_row(self, source: int, target: int) -> None:
        self.keys[:, target], self.values[:, target] = self.keys[:, source], self.values[:, source]


@dataclass(eq=False)
class Request:
    prompt: list[int]
    max_new: int
    sampling: Sampling
    rows: int  # sequences sampled from the prompt (names: one per name), sharing the request's generator
    deliver: Callable[[object], None]  # called from the batching thread: a {row: token} dict per step, then DONE
    generator: torch.Generator = field(init=False)
    steps: int = 0  # tokens given to each row so far
    cancelled: bool = False

    def __post_init__(self):
        self.generator = torch.Generator().manual_seed(self.sampling.seed)
        self.warpers = None if self.sampling.greedy else self.sampling.warpers()

    def cancel(self) -> None:
        """The client is gone: the request leaves the batch before the next step."""
        self.cancelled = True


@dataclass(eq=False)
class Row:
    request: Request
    index: int  # which of its request's rows
    window: list[int]  # the tokens the model sees: the prompt and the new tokens since the last jump
    slot: int  # its row in the cache
    needs_prefill: bool = True  # its window is not in the cache yet (a new request, or a jump)
    done: bool = False


class ContinuousBatcher:
    """Decodes the requests in flight as one batch, in a background thread; requests join at the next step and leave
    when done (end token, max tokens) or cancelled. At most `max_rows` rows decode at once and `max_waiting` requests
    wait for room; beyond that `submit` raises ServerBusy. With `background=False` nothing runs until `step()` is called
    (tests drive the batch step by step)."""

    def __init__(
        self,
        model,
        eos_id: int | None,
        never_ids: list[int],
        max_rows: int = 128,
        max_waiting: int = 64,
        background: bool = True,
        min_decode_rows: int = MIN_DECODE_ROWS,
    ):
        self.model, self.eos_id, self.never_ids, self.background = model, eos_id, list(never_ids), background
        # 1: a lone row decodes alone, faster, no longer bit for bit a crowd's; else the floor this machine needs
        self.min_decode_rows = 1 if min_decode_rows == 1 else max(min_decode_rows, rows_for_same_bits(model, max_rows))
        self.block_size = model.config.block_size
        self.max_rows, self.max_waiting = max_rows, max_waiting
        self.cache = SlotCache(model.config, self.min_decode_rows, model.device)
        self.rows: list[Row] = []  # the batch, row i in cache slot i (touched by the batching thread only)
        self.waiting: deque[Request] = deque()
        self.changed = threading.Condition()
        self.thread: threading.Thread | None = None
        self.steps = 0  # decoding steps run, for tests and benchmarks
        self.streams = 0  # astream iterators open with a `per_second` pace, which they share (event loop only)

    # ---- the API ----

    def submit(self, prompt: list[int], max_new: int, sampling: Sampling, deliver, rows: int = 1) -> Request:
        if not 1 <= len(prompt) <= self.block_size:
            raise ValueError(f"The prompt must hold 1 to {self.block_size} tokens, got {len(prompt)}.")
        if rows > self.max_rows:
            raise ValueError(f"A request may ask for at most {self.max_rows} rows, got {rows}.")
        request = Request(list(prompt), max_new, sampling, rows, deliver)
        with self.changed:
            rows_asked = len(self.rows) + sum(r.rows for r in self.waiting) + rows
            if rows_asked > self.max_rows and len(self.waiting) >= self.max_waiting:  # no room now, nor in the line
                raise ServerBusy(
                    f"The server is busy (requests in progress: {self.active_requests()}, waiting: "
                    f"{len(self.waiting)}). Try again in a few seconds."
                )
            self.waiting.append(request)
            if self.thread is None and self.background:
                self.thread = threading.Thread(target=self._serve_forever, name="continuous-batching", daemon=True)
                self.thread.start()
            self.changed.notify()
        return request

    def stream(self, prompt: list[int], max_new: int, sampling: Sampling, rows: int = 1) -> Iterator[dict[int, int]]:
        """Each step's new tokens of one request, {row: token}, as they come; closing the iterator cancels it."""
        events = queue.Queue()
        request = self.submit(prompt, max_new, sampling, events.put, rows)
        try:
            while (event := events.get()) is not DONE:
                yield raise_if_error(event)
        finally:
            request.cancel()

    async def astream(
        self,
        prompt: list[int],
        max_new: int,
        sampling: Sampling,
        rows: int = 1,
        every: float = 0.0,
        per_second: float = 0.0,
    ) -> AsyncIterator[list[dict[int, int]]]:
        """`stream` for an event loop, yielding the steps decoded since the caller last took some: one when it keeps
        up, several when the server lags behind the batch (fewer, larger updates). Waiting holds no thread; closing
        the iterator (or cancelling its task) cancels the request.

        Paced updates, for a server whose every update costs more than a decoding step (a web page redraws at a
        human pace anyway): at most one update every `every` seconds, and at most `per_second` updates a second
        shared by all the streams in flight (32 streams at 250 a second: one every 0.128 s each). The first step
        and the end go out at once; the steps between are gathered. 0 turns a limit off."""
        loop, events, ended = asyncio.get_running_loop(), asyncio.Queue(), asyncio.Event()

        def receive(event) -> None:  # in the event loop
            events.put_nowait(event)
            if event is DONE:
                ended.set()

        request = self.submit(prompt, max_new, sampling, lambda event: loop.call_soon_threadsafe(receive, event), rows)
        last_update, sharing = -float("inf"), int(per_second > 0)  # agenerate's streams, unpaced, share nothing
        self.streams += sharing
        try:
            while True:
                first = await events.get()
                interval = max(every, self.streams / per_second if per_second else 0.0)
                if first is not DONE and (wait := last_update + interval - loop.time()) > 0:
                    with contextlib.suppress(TimeoutError):  # gather until the update is due or the request ends
                        await asyncio.wait_for(ended.wait(), wait)
                ready = [first] + [events.get_nowait() for _ in range(events.qsize())]
                steps = [raise_if_error(event) for event in ready if event is not DONE]
                if steps:
                    yield steps
                    last_update = loop.time()
                if ready[-1] is DONE:  # nothing comes after it
                    return
        finally:
            self.streams -= sharing
            request.cancel()

    def generate(self, prompt: list[int], max_new: int, sampling: Sampling, rows: int = 1) -> list[list[int]]:
        """`rows` continuations of `prompt` (each ending with the end token, if written), once all are done."""
        new = [[] for _ in range(rows)]
        for tokens in self.stream(prompt, max_new, sampling, rows):
            for row, token in tokens.items():
                new[row].append(token)
        return new

    async def agenerate(self, prompt: list[int], max_new: int, sampling: Sampling, rows: int = 1) -> list[list[int]]:
        """`generate` for an event loop."""
        new = [[] for _ in range(rows)]
        async with contextlib.aclosing(self.astream(prompt, max_new, sampling, rows)) as ready:
            async for steps in ready:
                for tokens in steps:
                    for row, token in tokens.items():
                        new[row].append(token)
        return new

    def active_requests(self) -> int:
        return len({id(row.request) for row in list(self.rows)})

    # ---- the batching loop ----

    def _serve_forever(self) -> None:
        while True:
            with self.changed:
                self.changed.wait_for(lambda: self.rows or self.waiting)
            self.step()

    def step(self) -> None:
        """New requests and full windows are prefilled one at a time (a token each), then every row decodes its last
        token in one batched forward (a token each); rows that end or are cancelled leave."""
        with torch.no_grad():
            try:
                self._drop_cancelled()
                self._admit()
                prefilled = [row for row in self.rows if row.needs_prefill]
                if prefilled:
                    self._sample(prefilled, self._prefill(prefilled))
                if self.rows and not any(row.needs_prefill for row in self.rows):  # (a prompt of block_size tokens
                    self._sample(self.rows, self._decode())  # jumps right after its prefill: decode next step)
            except Exception as error:  # a bug must not hang the clients: fail the requests in flight, keep serving
                for request in {id(row.request): row.request for row in self.rows}.values():
                    with contextlib.suppress(Exception):
                        request.deliver(error)
                        request.deliver(DONE)
                self.rows = []

    def _drop_cancelled(self) -> None:
        with self.changed:
            self.waiting = deque(r for r in self.waiting if not r.cancelled)
        self._leave([row for row in self.rows if row.request.cancelled])

    def _admit(self) -> None:
        """Waiting requests join, first come first served, while their rows fit."""
        with self.changed:
            while self.waiting and len(self.rows) + self.waiting[0].rows <= self.max_rows:
                request = self.waiting.popleft()
                first = len(self.rows)
                self.cache.reserve(max(first + request.rows, self.min_decode_rows), most=self.max_rows)
                self.rows += [Row(request, i, list(request.prompt), first + i) for i in range(request.rows)]

    def _prefill(self, rows: list[Row]) -> torch.Tensor:
        """Logits (len(rows), V) of each row's next token, its window computed into its cache row as it would be alone.
        Rows of one request with the same window (a new request's rows) are computed once and copied."""
        logits, done = [], {}
        for row in rows:
            key = (id(row.request), tuple(row.window))
            if key in done:
                source, row_logits = done[key]
                self.cache.copy_row(source, row.slot)
            else:
                row_logits = self._forward_one(row)
                done[key] = row.slot, row_logits
            logits.append(row_logits)
            row.needs_prefill = False
        return torch.cat(logits)

    def _forward_one(self, row: Row) -> torch.Tensor:
        T = len(row.window)
        device = self.model.device
        ids, positions = torch.tensor([row.window], device=device), torch.arange(T, device=device)[None]  # (1, T)
        mask = torch.arange(self.block_size, device=device)[None] <= positions[0, :, None]  # (T, S): causal
        self.cache.use(slice(row.slot, row.slot + 1), None)
        out = self.model(
            input_ids=ids,
            position_ids=positions,
            attention_mask=mask[None, None],
            past_key_values=self.cache,
            use_cache=True,
            logits_to_keep=1,
        )
        return out.logits[:, -1].float().cpu()  # (1, V): sampled on the CPU, with the requests' CPU generators

    def _decode(self) -> torch.Tensor:
        """Every row's last token in one forward; logits (len(self.rows), V)."""
        n = len(self.rows)
        batch = max(n, self.min_decode_rows)  # empty rows (token 0 at position 0, in free slots) fill a small batch
        device = self.model.device
        tokens = torch.zeros(batch, 1, dtype=torch.long, device=device)
        positions = torch.zeros(batch, 1, dtype=torch.long, device=device)
        tokens[:n, 0] = torch.tensor([row.window[-1] for row in self.rows], device=device)
        positions[:n, 0] = torch.tensor([len(row.window) - 1 for row in self.rows], device=device)  # (B, 1)
        mask = torch.arange(self.block_size, device=device)[None] <= positions  # (B, S): the slots each row wrote
        self.cache.use(slice(0, batch), positions[:, 0])
        out = self.model(
            input_ids=tokens,
            position_ids=positions,
            attention_mask=mask[:, None, None],
            past_key_values=self.cache,
            use_cache=True,
            logits_to_keep=1,
        )
        self.steps += 1
        return out.logits[:n, -1].float().cpu()  # (n, V): sampled on the CPU

    def _sample(self, rows: list[Row], logits: torch.Tensor) -> None:
        """Each request picks its rows' tokens with its own settings and generator, as alone; rows that end leave.

        A sampled token is the inverse of the cumulative distribution at one uniform number per row, drawn from the
        request's generator (torch.multinomial draws one random number per vocabulary entry: with 32 requests that was
        40% of a step). The cumulative sums of every sampled row are taken at once: a row's sums do not depend on the
        other rows (summed along the row)."""
        logits[:, self.never_ids] = float("-inf")
        by_request: dict[int, list[int]] = {}
        for i, row in enumerate(rows):
            by_request.setdefault(id(row.request), []).append(i)
        picked, sampled, probs, uniforms = {}, [], [], []  # picked: {position in rows: token}
        for indices in by_request.values():
            request = rows[indices[0]].request
            indices.sort(key=lambda i: rows[i].index)  # the request's rows in its own order, wherever their slots
            scores = logits[indices]  # (rows of this request, V)
            if request.warpers is None:  # greedy
                picked.update(zip(indices, scores.argmax(-1).tolist()))
                continue
            for warper in request.warpers:  # transformers' warpers, called as generate() calls them
                scores = warper(None, scores)
            sampled += indices
            probs.append(scores.softmax(dim=-1))
            uniforms.append(torch.rand(len(indices), 1, generator=request.generator, device="cpu"))
        if sampled:
            cumulative = torch.cat(probs).cumsum(dim=-1)  # (sampled rows, V)
            points = torch.cat(uniforms) * cumulative[:, -1:]  # in [0, total): the total is 1 up to rounding
            tokens = torch.searchsorted(cumulative, points, right=True)[:, 0]  # first token whose sum passes the point
            picked.update(zip(sampled, tokens.tolist()))
        for indices in by_request.values():
            request = rows[indices[0]].request
            request.steps += 1
            request.deliver({rows[i].index: picked[i] for i in indices})
            for i in indices:
                self._advance(rows[i], picked[i])
        self._leave([row for row in rows if row.done])

    def _advance(self, row: Row, token: int) -> None:
        row.window.append(token)
        if token == self.eos_id or row.request.steps >= row.request.max_new:
            row.done = True
        elif len(row.window) > self.block_size:  # the context is full: keep its last 3/4, recomputed next step
            row.window = row.window[-kept_when_full(self.block_size) :]
            row.needs_prefill = True

    def _leave(self, leaving: list[Row]) -> None:
        """Rows leave the batch; the last rows move into the holes (the batch stays slots 0..n-1). A request whose
        rows have all left is told it is done."""
        for row in leaving:
            row.done = True
        for row in leaving:
            last = self.rows.pop()
            if last is not row:
                self.cache.copy_row(last.slot, row.slot)
                last.slot = row.slot
                self.rows[row.slot] = last
        for request in {id(row.request): row.request for row in leaving}.values():
            if not any(row.request is request for row in self.rows):
                request.deliver(DONE)


def generate_in_this_thread(
    model, eos_id: int | None, never_ids: list[int], prompt: list[int], max_new: int, sampling: Sampling, rows: int = 1
) -> list[list[int]]:
    """`ContinuousBatcher.generate` for one request, decoded in the calling thread by a batcher of its own: the same
    tokens as in the shared batch (a row's numbers do not depend on the others), for callers whose forward hooks act
    on their own thread only (ablation.heads_ablated)."""
    batcher = ContinuousBatcher(model, eos_id, never_ids, background=False)
    events = []
    request = batcher.submit(prompt, max_new, sampling, events.append, rows)
    while not events or events[-1] is not DONE:
        batcher.step()
    new = [[] for _ in range(request.rows)]
    for event in events[:-1]:
        for row, token in raise_if_error(event).items():
            new[row].append(token)
    return new


def raise_if_error(event):
    if isinstance(event, BaseException):
        raise event
    return event
