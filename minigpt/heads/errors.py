"""The library's one error type, and the checks every instrument makes of the layers, heads, positions, tokens and
counts it is given, so that a wrong one is refused by name instead of read as another (Python's -1 is the last head)
or failing deep inside as a bare IndexError."""

import operator

import torch


class InstrumentError(ValueError):
    """A value an instrument cannot take (a head or layer the model lacks, a position outside the text, a token
    outside the vocabulary, an unknown mode): the message says what to change. A ValueError, so that code which
    catches bad values keeps doing so; the demo shows it to the visitor who sent the value, without a traceback."""


def shortened(value, limit: int = 60) -> str:
    """`value` as a message may echo it: its repr, cut to `limit` characters."""
    shown = repr(value)
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


def whole(value, name: str) -> int:
    """`value` as an int: a Python or NumPy integer, or a one-element integer tensor; a bool or a float is refused."""
    if isinstance(value, bool):
        raise InstrumentError(f"{name} must be a whole number, got {value!r}.")
    try:
        return operator.index(value)
    except TypeError:
        raise InstrumentError(
            f"{name} must be a whole number, got {type(value).__name__} {shortened(value)}."
        ) from None


def checked_layer(config, layer, name: str = "layer") -> int:
    """A layer of the model (0 .. n_layer - 1)."""
    layer = whole(layer, name)
    if not 0 <= layer < config.n_layer:
        raise InstrumentError(
            f"{name} must be 0 to {config.n_layer - 1} (the model has {config.n_layer} layers), got {layer}."
        )
    return layer


def checked_head(config, layer, head, name: str = "head") -> tuple[int, int]:
    """A head (layer, head) of the model; a negative head is refused rather than counted from the end."""
    layer, head = checked_layer(config, layer), whole(head, name)
    if not 0 <= head < config.n_head:
        raise InstrumentError(
            f"{name} must be 0 to {config.n_head - 1} (each layer has {config.n_head} heads), got {head}."
        )
    return layer, head


def checked_position(position, length: int, name: str = "position") -> int:
    """A position of a text of `length` tokens, from 0; negative ones count from the end (-1: the last)."""
    position = whole(position, name)
    if not -length <= position < length:
        raise InstrumentError(
            f"{name} {position} is outside the text's {length} tokens (0 to {length - 1}, or -1 for the last)."
        )
    return position % length


def checked_token(vocab_size: int, token, name: str = "token") -> int:
    """A token id of a vocabulary of `vocab_size` tokens."""
    token = whole(token, name)
    if not 0 <= token < vocab_size:
        raise InstrumentError(f"{name} must be a token id 0 to {vocab_size - 1}, got {token}.")
    return token


def checked_ids(ids, vocab_size: int, name: str) -> torch.Tensor:
    """`ids` (a list of ints, a list of lists of one length, an integer tensor) as a long tensor (a tensor stays
    where it is), every id checked against the vocabulary where the ids enter an instrument: an id outside it would
    fail in the embedding as a bare IndexError, or, negative, be read as another token."""
    try:
        found = torch.as_tensor(ids, device=ids.device if isinstance(ids, torch.Tensor) else "cpu")
    except (TypeError, ValueError, RuntimeError):
        found = None
    integers = found is not None and not (found.is_floating_point() or found.is_complex() or found.dtype == torch.bool)
    if not integers and (found is None or found.numel()):  # [] is a float tensor: an empty text, refused later
        raise InstrumentError(
            f"{name} must be token ids: a list of whole numbers (a list of such lists, all of one length, for a set) "
            f"or an integer tensor, got {shortened(ids)}."
        )
    found = found.long()
    outside = (found < 0) | (found >= vocab_size)
    if outside.any():
        where = outside.nonzero()[0].tolist()
        place = f"position {where[-1]}" + (f" of row {where[0]}" if len(where) > 1 else "")
        raise InstrumentError(
            f"{name} holds the token id {int(found[tuple(where)])} (at {place}), outside the model's vocabulary: "
            f"give token ids 0 to {vocab_size - 1}, as the model's tokenizer encodes a text."
        )
    return found


def checked_count(value, name: str, what: str, least: int = 1) -> int:
    """A count an instrument takes (top, k, batch_size, samples, prompts): a whole number, at least `least`. `what`
    says what it counts, for the message."""
    value = whole(value, name)
    if value < least:
        raise InstrumentError(f"{name} must be {least} or more ({what}), got {value}.")
    return value
