"""The library's one error type, and the checks every instrument makes of the layers, heads, positions and tokens it
is given, so that a wrong one is refused by name instead of read as another (Python's -1 is the last head) or failing
deep inside as a bare IndexError."""

import operator


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
