"""The corpus the head metrics read: a model's own validation windows (rebuilt from the training_args.json its folder
ships, with train.py's data pipeline), a built-in corpus of its kind when it has none (GPT-2, a Hub id), or a text a
visitor gives, cut into windows of the model's context. No Gradio here.

A corpus is a list of windows of token ids, each at most `block_size` long. A visitor's text is read as the demo
reads a text (the start token, then the text), one window after another; a model of names (a tokenizer with no
newline) reads it as one name a line, as it was trained.
"""

import hashlib
import json
import logging
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from minigpt import data, reading, tokenization
from minigpt.demo.core.inputs import MAX_TEXT_CHARS
from minigpt.demo.core.models import LanguageModel
from minigpt.demo.core.texts import encode
from minigpt.demo.core.work_budgets import RECORD_SECONDS, WORK_PER_SECOND, first_tokens, recording_work, within_work
from minigpt.errors import VisitorError

logger = logging.getLogger(__name__)

MAX_CORPUS_CHARS = 1_000_000  # a visitor's corpus, checked before tokenizing (the Train tab's limit on a pasted text)
MOST_TOKENS = 32_768  # tokens a corpus is cut to: a shipped model measures them in seconds on 2 CPU cores; a big
# model fewer, as many as its recording's work bound holds (work_budgets.RECORD_SECONDS)
DEFAULT_SEED = 42  # TrainingArguments' seed, which picks the held-out names of a run that did not record its own


@dataclass
class Corpus:
    windows: list[list[int]]  # each at most block_size token ids
    description: str  # what it is, in words
    starts_with_boundary: bool  # every window's first token is the start token (else: a window of running text)
    notes: list[str]

    @property
    def tokens(self) -> int:
        return sum(map(len, self.windows))

    @property
    def key(self) -> str:
        """A fingerprint of the token ids: the disk cache's key, with the weights'."""
        digest = hashlib.sha1()
        for window in self.windows:
            digest.update(",".join(map(str, window)).encode() + b";")
        return digest.hexdigest()[:16]

    def about(self) -> dict:
        return {
            "description": self.description,
            "windows": len(self.windows),
            "tokens": self.tokens,
            "starts_with_start_token": self.starts_with_boundary,
            "key": self.key,
        }


def token_budget(model) -> int:
    """Tokens a corpus is cut to for `model` before tokenizing: MOST_TOKENS, or fewer where as many windows of its
    full context would not fit the recording's work bound (a window's cost grows with its length squared)."""
    config = model.config
    windows = RECORD_SECONDS * WORK_PER_SECOND // recording_work(config, config.block_size)
    return int(min(MOST_TOKENS, max(1, windows) * config.block_size))


def check_measurable(lm: LanguageModel) -> None:
    """Refuses, before any corpus is built, a model whose one window of full context would not fit the bound."""
    config = lm.model.config
    seconds = recording_work(config, config.block_size) / WORK_PER_SECOND
    if seconds > RECORD_SECONDS:
        raise VisitorError(
            f"Measuring every head of {lm.name} would take about {seconds:,.0f} s for one window of its context "
            f"({config.block_size:,} tokens) on one core: the Head Finder measures at most {RECORD_SECONDS} s' worth "
            "a corpus on this server. Measure it on your own machine: minigpt.heads.measure(model, windows)."
        )


def cut_to_budget(windows: list[list[int]], budget: int, config, notes: list[str]) -> list[list[int]]:
    """The first windows holding `budget` tokens and fitting the recording's work bound (the last one cut), with a
    note when some are left out."""
    bound = RECORD_SECONDS * WORK_PER_SECOND
    first = first_tokens([w for w in windows if len(w) >= 2], budget)
    kept = within_work(first, partial(recording_work, config), bound)
    total, whole = sum(map(len, kept)), sum(map(len, windows))
    if total < whole:
        notes.append(f"Measured on the first {total:,} tokens of {whole:,}.")
    return kept


def reads_lines(lm: LanguageModel) -> bool:
    """A model of names: its tokenizer has no newline, and its examples are one name between boundaries."""
    return bool(tokenization.unknown_characters(lm.tokenizer, "\n"))


def name_windows(lm: LanguageModel, names: list[str]) -> list[list[int]]:
    """One window a name, as the names were trained: the boundary, the name, the end token (cut to the context)."""
    end = lm.eos_id if lm.eos_id is not None else lm.boundary_id
    return [([lm.boundary_id] + encode(lm, name, "corpus") + [end])[: lm.block_size] for name in names]


def text_corpus(lm: LanguageModel, text: str) -> Corpus:
    """A visitor's text as windows: a model of names reads one name a line; any other model reads the start token and
    then the text, one window of block_size tokens after another."""
    if not isinstance(text, str):
        raise VisitorError(f"The corpus must be text, got {type(text).__name__}.")
    if len(text) > MAX_CORPUS_CHARS:
        raise VisitorError(
            f"The corpus is {len(text):,} characters long: at most {MAX_CORPUS_CHARS:,} are accepted. Shorten it "
            f"(the metrics read at most {MOST_TOKENS:,} tokens anyway)."
        )
    notes, budget = [], token_budget(lm.model)
    # Only what the budget holds is tokenized, a piece at a time: a names corpus of 500,000 lines or a text of a
    # million characters costs what its first MOST_TOKENS tokens cost.
    if reads_lines(lm):
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        windows, whole = names_within(lm, lines, budget)
        description = f"your text, {len(lines):,} names (one a line)"
    else:
        ids, whole = ids_within(lm, text, budget)
        span = lm.block_size - 1
        windows = [[lm.boundary_id] + ids[start : start + span] for start in range(0, len(ids), span)]
        description = f"your text, in windows of the start token and {span} tokens"
    windows = cut_to_budget([w for w in windows if len(w) >= 2], budget, lm.model.config, notes if whole else [])
    if not whole:  # the text goes on past what was read: its length in tokens is not known
        notes.append(f"Measured on the first {sum(map(len, windows)):,} tokens of your text.")
    if not windows:
        raise VisitorError("The corpus is empty: give some text (or leave it empty for the model's validation text).")
    return Corpus(windows, description, True, notes)


def names_within(lm: LanguageModel, lines: list[str], budget: int) -> tuple[list[list[int]], bool]:
    """The windows of the first names that hold `budget` tokens, and whether every name was read; each line cut to
    the context before it is tokenized (its window keeps at most block_size tokens: never more than its characters)."""
    windows, tokens, start = [], 0, 0
    while start < len(lines) and tokens < budget:
        batch = name_windows(lm, [line[: lm.block_size] for line in lines[start : start + 256]])
        windows, tokens, start = windows + batch, tokens + sum(map(len, batch)), start + 256
    return windows, start >= len(lines)


def ids_within(lm: LanguageModel, text: str, budget: int) -> tuple[list[int], bool]:
    """The ids of the start of `text` that holds `budget` tokens (a few more), and whether that is the whole text;
    tokenized a piece at a time: pieces end at a line's or a word's end, as long as one typed text may be."""
    ids, start = [], 0
    while start < len(text) and len(ids) < budget:
        end = min(len(text), start + MAX_TEXT_CHARS)
        if end < len(text):  # cut after the last newline or space of the piece, if it has one
            cut = max(text.rfind("\n", start, end), text.rfind(" ", start, end))
            end = cut + 1 if cut > start else end
        ids += encode(lm, text[start:end], "corpus")
        start = end
    return ids, start >= len(text)


def training_args(source: str) -> dict | None:
    """The run's arguments, from the training_args.json train.py writes into a model folder; None elsewhere."""
    path = Path(source) / "training_args.json"
    try:
        return json.loads(path.read_text()) if path.is_file() else None
    except (OSError, ValueError):
        logger.warning("Could not read %s: the head metrics use a built-in corpus", path, exc_info=True)
        return None


def training_dataset(args: dict) -> str | None:
    """Where the run's data is now: its file, or the built-in corpus it came from, written again on this machine
    (a model trained elsewhere names a cache path of that machine)."""
    dataset, preset = args.get("dataset"), args.get("preset")
    if dataset and (not reading.looks_local(dataset) or Path(dataset).expanduser().exists()):
        return dataset
    builtin = data.BUILTIN_CORPORA.get(preset)
    if dataset and builtin and Path(dataset).parent.name == data.CACHE.name:
        rebuilt = builtin()
        return str(rebuilt) if rebuilt.name == Path(dataset).name else None
    return None


def validation_windows(lm: LanguageModel, args: dict, dataset: str) -> tuple[list[list[int]], bool]:
    """The run's validation windows, as train.py's data pipeline held them out (its tokenizer: the model's)."""
    corpus = reading.open_corpus(dataset, args.get("text_column"))
    block_size = lm.block_size
    if tokenization.unknown_characters(lm.tokenizer, "\n") and args.get("preset") in ("names", "induction"):
        splits = data.names_splits(corpus, block_size, args.get("val_size", 1000), args.get("seed", DEFAULT_SEED))
        return list(splits.validation["input_ids"]), True
    boundary_first = bool(args.get("boundary_first"))
    windows = data.text_validation(corpus, lm.tokenizer, block_size, args.get("val_fraction", 0.1), boundary_first)
    return windows, boundary_first


def builtin_windows(lm: LanguageModel) -> tuple[list[list[int]], bool, str]:
    """A corpus of the model's kind for a model without a recorded run: the held-out built-in names (one a line) for a
    model of names, else the last tenth of the built-in Shakespeare plays."""
    if reads_lines(lm):
        names = list(reading.names(reading.open_corpus(str(data.builtin_names()))))
        held_out = sorted(data.held_out_indices(len(names), 1000, DEFAULT_SEED))  # as the names preset holds them out
        return name_windows(lm, [names[i] for i in held_out]), True, "the built-in held-out names"
    corpus = reading.open_corpus(str(data.builtin_shakespeare()))
    windows = data.text_validation(corpus, lm.tokenizer, lm.block_size, 0.1)
    return windows, False, "the last tenth of the built-in Shakespeare plays"


def default_corpus(lm: LanguageModel, source: str) -> Corpus:
    """The model's validation text when its folder records the run (else a built-in corpus of its kind), cut to the
    token budget."""
    notes = []
    args = training_args(source)
    dataset = training_dataset(args) if args else None
    windows = None
    if dataset:
        try:
            windows, boundary_first = validation_windows(lm, args, dataset)
            description = f"the model's validation data ({Path(dataset).name})"
        except (data.DataError, ValueError, OSError) as error:
            logger.warning("Could not rebuild the validation data of %s", lm.name, exc_info=True)
            notes.append(f"The model's training data could not be read again ({error}): a built-in corpus instead.")
    elif args:
        notes.append(f"The model's training data ({args.get('dataset')}) is not on this machine: a built-in corpus.")
    if windows is None:
        windows, boundary_first, description = builtin_windows(lm)
    windows = cut_to_budget([list(map(int, w)) for w in windows], token_budget(lm.model), lm.model.config, notes)
    return Corpus(windows, description, boundary_first, notes)
