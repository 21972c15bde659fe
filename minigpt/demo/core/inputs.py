"""What visitors type, checked before anything reads it closely: numbers (ASCII digits, finite, whole where a count
is asked for), sampling settings, flags, texts (length, lone surrogates), and the one way to name a layer, a head (a
number, or "mean" for the layer's average) and a token position. Every check raises VisitorError with a message that
says what to change. No Gradio here."""

import contextlib
import math
import random
import re
import unicodedata

from minigpt.demo.core.serving import Sampling
from minigpt.errors import VISITORS_MISTAKES, VisitorError, shortened

# A number as text: digits, one point, an exponent (and the words float() reads for the infinities and NaN, which the
# finiteness check below refuses by name)
WRITTEN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?(inf|infinity|nan)", re.IGNORECASE)

MEAN = "mean"  # the head that stands for the average of a layer's heads

MAX_TEXT_CHARS = 20_000  # characters of a prompt, prefix or text, checked before tokenizing: ~5x GPT-2's 1024 tokens

MAX_TEMPERATURE = 100.0  # above, sampling is uniform noise; below MIN_TEMPERATURE, greedy in all but name (use 0)

MIN_TEMPERATURE = 1e-3


def number(name: str, value, default, kind=float):
    """`value` as an int or float; None (left out by an API client) means the default. Whole numbers stay ints (a
    seed of 2**63 - 1 is kept exact, not rounded through a float); 1.5 is not a whole number."""
    if value is None or value == "":
        return default
    if isinstance(value, str) and not value.isascii():  # int() and float() read "٣" and "０" as 3 and 0
        raise VisitorError(f"{name} must be written with the digits 0-9, got {shortened(value)}.")
    if isinstance(value, str) and not WRITTEN_NUMBER.fullmatch(value.strip()):  # int("1_0") is 10
        how = " written with the digits 0-9 alone" if "_" in value else ""
        raise VisitorError(f"{name} must be a number{how}, got {shortened(value)}.")
    if isinstance(value, bool):  # JSON's true and false are not numbers here
        raise VisitorError(f"{name} must be a number, got {shortened(value)}.")
    if kind is int and isinstance(value, int | str):
        with contextlib.suppress(ValueError):
            return int(value)  # an int, or a string of one: exact
    try:
        result = float(value)
    except (TypeError, ValueError):
        raise VisitorError(f"{name} must be a number, got {shortened(value)}.") from None
    except OverflowError:
        raise VisitorError(f"{name} must be a finite number, got {shortened(value)}.") from None
    if not math.isfinite(result):
        raise VisitorError(f"{name} must be a finite number, got {shortened(value)}.")
    if kind is int and not result.is_integer():
        raise VisitorError(f"{name} must be a whole number, got {shortened(value)}.")
    return int(result) if kind is int else result


def clamped(name: str, value: int, low: int, high: int, notes: list[str]) -> int:
    """`value` brought into [low, high], with a note saying so."""
    if low <= value <= high:
        return value
    kept = min(max(value, low), high)
    notes.append(f"{name} {value} is outside {low}..{high}: used {kept}.")
    return kept


def parse_sampling(temperature, top_k, top_p, seed, vocab_size: int, notes: list[str]) -> Sampling:
    temperature = number("Temperature", temperature, 1.0)
    if temperature < 0:
        raise VisitorError(
            f"Temperature must be 0 or more, got {temperature}: 0 always picks the most likely token, "
            "1 samples from the model's probabilities, higher is more random."
        )
    if temperature != 0 and not MIN_TEMPERATURE <= temperature <= MAX_TEMPERATURE:
        raise VisitorError(
            f"Temperature must be 0 (greedy) or between {MIN_TEMPERATURE:g} and {MAX_TEMPERATURE:g}, "
            f"got {temperature:g}: below, sampling is greedy in all but name; above, it is uniform "
            "noise (and the arithmetic overflows)."
        )
    if temperature == 0:
        notes.append("Temperature 0: greedy decoding, the most likely token every time (top-k, top-p and seed unused).")
    top_k = number("top-k", top_k, 0, int)
    if top_k < 0:
        raise VisitorError(f"top-k must be 0 (off) or a positive number of tokens, got {top_k}.")
    if top_k >= vocab_size:
        notes.append(f"top-k {top_k} is not below the model's {vocab_size} tokens, so it keeps them all (off).")
        top_k = 0
    top_p = number("top-p", top_p, 1.0)
    if not 0 < top_p <= 1:
        raise VisitorError(
            f"top-p must be above 0 and at most 1, got {top_p}: it keeps the most likely tokens whose "
            "probabilities add up to top-p; 1 turns it off."
        )
    seed = number("Seed", seed, -1, int)
    if seed < 0:
        seed = random.randrange(2**31)
        notes.append(f"Random seed {seed}: set the seed to {seed} to get this output again.")
    elif seed >= 2**63:
        raise VisitorError(f"Seed must be below 2**63, got {seed}.")
    return Sampling(temperature, top_k, top_p, seed)


def describe(character: str) -> str:
    return f"{character!r} ({unicodedata.name(character, f'U+{ord(character):04X}')})"


def lone_surrogates(text: str) -> str:
    """The halves of UTF-16 pairs `text` holds alone, described ("'\\ud800' (U+D800)"), or "" if none: JSON's escapes
    carry them to the server, and nothing can encode them (UTF-8, a tokenizer, a hash of the text)."""
    return ", ".join(map(describe, sorted({c for c in text if "\ud800" <= c <= "\udfff"})))


def check_typed_text(text: str, what: str) -> None:
    """A visitor's text, checked before anything reads it closely: at most MAX_TEXT_CHARS characters (tokenizing a
    few megabytes takes seconds and gigabytes, for a model that keeps only its last block_size tokens), and no lone
    surrogate (half of a UTF-16 pair: no tokenizer can encode it)."""
    if len(text) > MAX_TEXT_CHARS:
        raise VisitorError(
            f"The {what} is {len(text):,} characters long: at most {MAX_TEXT_CHARS:,} are accepted (the "
            "model sees only its last context's worth of tokens anyway). Shorten it."
        )
    if halves := lone_surrogates(text):
        raise VisitorError(
            f"The {what} holds {halves}: half of a character (a lone UTF-16 surrogate), which cannot be encoded. "
            "Remove it."
        )


def flag(name: str, value, default: bool) -> bool:
    """`value` as a bool: true or false, 1 or 0 (as JSON or strings); None (left out by an API client): the default."""
    if value is None or value == "":
        return default
    spelled = str(value).strip().lower()
    if spelled not in ("true", "false", "1", "0"):
        raise VisitorError(f"{name} must be true or false, got {shortened(value)}.")
    return spelled in ("true", "1")


def kept_choice(value, count: int) -> int:
    """A layer or head chosen before, if the model now shown has it; else the nearest it has (the page's selection
    falls back alike: maps/endpoints.py kept_head)."""
    return min(max(int(value), 0), count - 1) if value is not None and str(value).lstrip("-").isdigit() else 0


def layer_index(value, n_layer: int, name: str = "layer") -> int:
    """A layer of a model with `n_layer` layers (left out: 0)."""
    layer = number(name, value, 0, int)
    if not 0 <= layer < n_layer:
        raise VisitorError(f"{name} must be 0 to {n_layer - 1}, got {layer}.")
    return layer


def head_index(value, n_head: int, name: str = "head", average: bool = True) -> int | str:
    """A head of a layer of `n_head` heads (left out: 0), or with `average` "mean", the average of the layer's heads.
    A head may be given as a number or as a string of one ("2"), as the API has always taken it."""
    if average and isinstance(value, str) and value.strip().lower() == MEAN:
        return MEAN
    also = " or 'mean' (their average)" if average else ""
    try:
        head = number(name, value, 0, int)
    except VISITORS_MISTAKES:
        head = None
    if head is None or not 0 <= head < n_head:
        raise VisitorError(f"{name} must be 0 to {n_head - 1}{also}, got {shortened(value)}.") from None
    return head


def token_position(value, length: int, name: str = "position", default: int | None = -1, last: bool = True) -> int:
    """A token position in a text of `length` tokens, counted from 0 (the start token); with `last`, -1 (and a
    left-out value, with the default -1) is the last."""
    position = number(name, value, default, int)
    if last and (position == -1 or position is None):
        position = length - 1
    if not 0 <= position < length:
        raise VisitorError(
            f"{name} must be between 0 and {length - 1} (the text has {length} tokens, counted from 0, "
            f"the start token included), got {position}."
        )
    return position


MAX_HEADS_CHARS = 10_000  # every head of a 48-layer, 25-head model written out, and room to spare


def parse_heads(spec: str, n_layer: int, n_head: int) -> list[tuple[int, int]]:
    """'1.2, 0.3' -> [(1, 2), (0, 3)]: layer.head pairs separated by commas or spaces; '' -> no head."""
    if len(spec or "") > MAX_HEADS_CHARS:
        raise VisitorError(
            f"heads is {len(spec):,} characters long: at most {MAX_HEADS_CHARS:,} (each head once, as layer.head)."
        )
    heads = []
    for item in re.split(r"[,\s;]+", (spec or "").strip()):
        if not item:
            continue
        # ASCII digits only, as number() reads them; and few: int() refuses a number of 4,300 digits or more
        match = re.fullmatch(r"([0-9]{1,6})\.([0-9]{1,6})", item)
        if not match:
            raise VisitorError(
                f"Cannot read the head {shortened(item)}: write each head as layer.head, e.g. '1.2, 0.3'."
            )
        layer, head = int(match[1]), int(match[2])
        if layer >= n_layer or head >= n_head:
            raise VisitorError(
                f"There is no head {item}: this model has layers 0-{n_layer - 1} and heads 0-{n_head - 1} in each."
            )
        if (layer, head) not in heads:
            heads.append((layer, head))
    return heads
