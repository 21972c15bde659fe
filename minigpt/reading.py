"""Reading a corpus for training: a local .txt/.jsonl/.parquet file, a folder of them, or a Hub dataset id, streamed
with `datasets` (streaming=True) row by row and never held in memory whole. A corpus reads as its texts, as pieces of
text of bounded length that say where a document ends (what the tokenizer gets), or as names, one a row; `head` and
`tail` split the pieces at a character (the training part and the validation part of a text). The built-in corpora
(minigpt/corpora.py) are files in the cache folder, read like any other.
"""

import dataclasses
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import datasets

FILE_BUILDERS = {".txt": "text", ".jsonl": "json", ".json": "json", ".parquet": "parquet"}  # extension -> builder
PIECE_CHARS = 1 << 16  # longer lines and documents are read and tokenized in pieces of this many characters
ROWS_A_READ = 64  # rows read from a corpus at a time


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
# Parts of a text: the training part and the validation part, a shard


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


def shard_pieces(corpus: Corpus, index: int) -> Iterator[tuple[str, bool]]:
    """The pieces of one shard of a streamed corpus (of a Hub dataset: one of its files)."""
    rows = corpus.rows.shard(num_shards=corpus.rows.n_shards, index=index)
    return pieces(dataclasses.replace(corpus, rows=rows))
