"""The endless training stream: examples shuffled epoch after epoch by a seed, names packed into rows, served as a
`datasets.IterableDataset` (minigpt/data.py makes the examples)."""

import itertools
import random
from collections.abc import Callable, Iterable, Iterator

import datasets
import numpy as np


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


def streamed(epoch_examples, seed: int, buffer_size: int, pack: int | None = None) -> datasets.IterableDataset:
    """The endless stream as a `datasets.IterableDataset`; `pack` packs names into rows (see `packed`). No features
    are declared: each example's ids go to the collator as they are (numpy arrays or lists), not through Arrow types
    and back (14 us an example, a millisecond a batch)."""
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
