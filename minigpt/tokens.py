"""Token ids for training: a corpus's pieces tokenized in batches (the Rust tokenizer encodes a batch on every core),
a local corpus's parts tokenized once into flat files of token ids in the cache folder (as nanoGPT's prepare.py makes
them; the next run with the same files and tokenizer reads them instead), and the windows cut from them: slices of
a token file, or a sliding window over a stream of tokens. A BPE trained on a local corpus is cached beside them.
"""

import functools
import hashlib
import itertools
import os
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np

from minigpt.corpora import CACHE
from minigpt.reading import Corpus

ENCODE_BATCH = 1024  # rows tokenized per call to the fast tokenizer, at most
ENCODE_CHARS = 1 << 18  # characters tokenized per call, at most: the encodings of a batch take ~30 MB

# ----------------------------------------------------------------------------------------------------------------------
# Tokenized in batches


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


def name_examples(names_: Iterable[str], tokenizer, block_size: int) -> Iterator[list[int]]:
    """boundary + name + boundary for each name, cut to `block_size` tokens (names longer than block_size - 2 lose
    their last letters: with the names preset, 2 of makemore's 32,033 names)."""
    backend, eos = tokenizer.backend_tokenizer, tokenizer.eos_token_id
    for batch in batched(names_, ENCODE_BATCH):
        # One character gives at least one token: a name cut to block_size characters loses nothing that is kept.
        for encoding in backend.encode_batch([name[:block_size] for name in batch]):  # the boundary comes first
            yield (encoding.ids + [eos])[:block_size]


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


def bpe_file(corpus: Corpus, vocab_size: int, n_chars: int) -> Path | None:
    """Where the BPE tokenizer trained on a local corpus's first `n_chars` characters is cached; None for a Hub
    dataset (streamed: its BPE is trained again)."""
    fingerprint = corpus_fingerprint(corpus)
    if fingerprint is None:
        return None
    key = hashlib.sha1(f"{TOKENS_FORMAT}|{fingerprint}|{vocab_size}|{n_chars}".encode()).hexdigest()[:20]
    return CACHE / "tokenizers" / f"bpe-{key}.json"


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
