"""The endless training stream and its batches: examples shuffled epoch after epoch by a seed, names packed into
rows, served as a `datasets.IterableDataset` (minigpt/data.py makes the examples), and collated into padded batches."""

import itertools
import random
from collections.abc import Callable, Iterable, Iterator

import datasets
import numpy as np
import torch


def shuffled(examples: Iterable, buffer_size: int, rng: random.Random) -> Iterator:
    """A buffered shuffle: a uniform shuffle of streams up to `buffer_size` examples, a local one of longer ones."""
    buffer = []
    for example in examples:
        if len(buffer) < buffer_size:
            buffer.append(example)
            continue
        i = rng.randrange(buffer_size)
        yield buffer[i]
        buffer[i] = example
    rng.shuffle(buffer)
    yield from buffer


def packed(examples: Iterable[list[int]], block_size: int) -> Iterator[list[int]]:
    """Whole names packed into rows of at most `block_size` tokens, each name sharing its boundary with the next:
    ".emma." then ".ava." make ".emma.ava.". That shared "." is the target that ends "emma" and the token "ava" starts
    from, so every position keeps a real target; the positions `collate` gives (each name's from 0) keep a name from
    attending to the names before it. Rows of random names with almost no padding: a step costs what a batch grouped
    by length costs, without the bias of batches that hold only long or only short names (which slowed training a
    lot)."""
    row = []
    for example in examples:
        if row and len(row) + len(example) - 1 > block_size:
            yield row
            row = []
        row = row + example[1:] if row else list(example)
    if row:
        yield row


def endless(epoch_examples: Callable[[int, random.Random], Iterable], seed: int, buffer_size: int, pack: int | None):
    """Shuffled examples, epoch after epoch, as one endless stream whose order depends on the seed only; with `pack`,
    the shuffled names packed into rows of that many tokens."""
    for epoch in itertools.count():
        rng = random.Random(seed * 1_000_003 + epoch)
        examples = shuffled(epoch_examples(epoch, rng), buffer_size, rng)
        if pack:
            examples = packed(examples, pack)
        for ids in examples:
            yield {"input_ids": ids}


STREAM_PASSES = 1 << 17  # passes over a streamed corpus's shards: endless in practice; torchrun's sizes divide it


def shard_passes(epoch_examples: Callable, seed: int, buffer_size: int, n_shards: int, passes: list[int]):
    """One shuffled pass over a shard for each of `passes`: pass p reads shard p % n_shards at epoch p // n_shards.
    `datasets` calls this with one pass at a time and hands each DataLoader worker and torchrun process every k-th
    pass (with as many shards as processes, shards of their own). The order depends on the seed only, so that a
    resumed run that skips the batches already seen gets the uninterrupted run's."""
    for index in passes:
        epoch, shard = divmod(index, n_shards)
        rng = random.Random((seed * 1_000_003 + epoch) * 7_919 + shard)
        for ids in shuffled(epoch_examples(epoch, rng, [shard]), buffer_size, rng):
            yield {"input_ids": ids}


def streamed(epoch_examples, seed: int, buffer_size: int, pack: int | None = None, shards: int = 0):
    """The endless stream as a `datasets.IterableDataset`; `pack` packs names into rows (see `packed`). With `shards`
    (a streamed corpus's count), `epoch_examples(epoch, rng, [shard])` reads one shard, and the dataset's shards are
    its passes over them, to split between DataLoader workers and torchrun's processes (see `shard_passes`). No
    features are declared: each example's ids go to the collator as they are (numpy arrays or lists), not through
    Arrow types and back (14 us an example, a millisecond a batch)."""
    if shards:
        passes = list(range(shards * max(1, STREAM_PASSES // shards)))  # a list: `datasets` splits it, a pass a call
        kwargs = dict(epoch_examples=epoch_examples, seed=seed, buffer_size=buffer_size, n_shards=shards)
        return datasets.IterableDataset.from_generator(shard_passes, gen_kwargs={**kwargs, "passes": passes})
    kwargs = dict(epoch_examples=epoch_examples, seed=seed, buffer_size=buffer_size, pack=pack)
    return datasets.IterableDataset.from_generator(endless, gen_kwargs=kwargs)


class Rows:
    """Examples of token ids of different lengths, kept as one flat array and where each ends: a stream's generator
    holds them, and `datasets` hashes it by pickling it (two arrays at once, not 31,000 lists one by one: 1.4 s at
    every names run's start)."""

    def __init__(self, examples: Iterable[list[int]]):
        examples = list(examples)
        self.ends = np.cumsum([len(ids) for ids in examples], dtype=np.int64)
        self.ids = np.fromiter(itertools.chain.from_iterable(examples), dtype=np.int64, count=sum(map(len, examples)))

    def __iter__(self) -> Iterator[list[int]]:
        starts = itertools.chain([0], self.ends)
        return (self.ids[start:end].tolist() for start, end in zip(starts, self.ends))


def collate(examples: list[dict], pad_token_id: int, boundary_id: int | None = None) -> dict[str, torch.Tensor]:
    """Pads a batch on the right; padded positions get label -100 (no loss). With `boundary_id` (names), rows may hold
    several packed names: each gets its own positions, counted from 0 (see `packed_positions`).

    No attention_mask is passed: with right padding, causal attention already keeps every real token from seeing the
    padding after it, and without a mask the model takes sdpa's fast causal path. Packed names are kept apart by the
    model itself, which finds them where their positions restart at 0 (`transformers`' packed-sequence masks, the
    format `DataCollatorWithFlattening` makes).
    """
    length = max(len(e["input_ids"]) for e in examples)
    input_ids = torch.full((len(examples), length), pad_token_id, dtype=torch.long)  # (B, T)
    labels = torch.full((len(examples), length), -100, dtype=torch.long)  # (B, T)
    for row, example in enumerate(examples):
        ids = torch.as_tensor(example["input_ids"], dtype=torch.long)
        input_ids[row, : len(ids)] = ids
        labels[row, : len(ids)] = ids
    batch = {"input_ids": input_ids, "labels": labels}
    if boundary_id is not None:
        batch["position_ids"] = packed_positions(input_ids, boundary_id)
    return batch


def packed_positions(input_ids: torch.Tensor, boundary_id: int) -> torch.Tensor:
    """For rows of packed names (B, T): each token's distance to its name's first boundary, (B, T). The model attends
    within a run of positions counting up from 0 only, so a packed row computes exactly what its names would compute
    one a row. Padding continues the last run: it sees the row's last boundary, and nothing real sees it."""
    t = torch.arange(input_ids.shape[1])  # (T,)
    starts = input_ids == boundary_id  # (B, T): every boundary starts a name (the last one only ends one: harmless)
    return t - torch.where(starts, t, 0).cummax(dim=1).values  # (B, T)
