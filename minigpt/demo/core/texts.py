"""A visitor's text as one model reads it: its ids (from the boundary token, cut to the context), readable token
labels, notes about the input, and the recorded forward pass that serves every view of it. No Gradio here."""

import hashlib
from dataclasses import dataclass

from minigpt.demo.core.attention_maps import token_labels
from minigpt.demo.core.inputs import check_typed_text, describe
from minigpt.demo.core.models import LanguageModel
from minigpt.demo.core.pass_cache import ForwardPassCache
from minigpt.errors import VisitorError
from minigpt.heads.recorded_pass import ForwardPass
from minigpt.tokenization import known_characters, unknown_characters

# An answer or file holding every head's map is refused past this many numbers: Compare's JSON differences past 4M
# (about 40 MB of JSON), an export's float32 weights or pixels past 32M (128 MB). A 12-layer, 16-head model's maps of
# 512 tokens are 50M numbers, GPT-2's of 1,024 tokens 151M.
MAX_ANSWER_NUMBERS = 4_000_000
MAX_FILE_NUMBERS = 32_000_000


def check_every_map(view: "TextView", length: int, what: str, instead: str, limit: int = MAX_ANSWER_NUMBERS) -> None:
    """Refuses `what` (a view holding every head's map of `length` tokens) past `limit` numbers, saying the longest
    text it serves for this model and what to ask `instead`."""
    config = view.lm.model.config
    heads = config.n_layer * config.n_head
    if heads * length**2 > limit:
        longest = int((limit / heads) ** 0.5)
        raise VisitorError(
            f"{what} holds every head's map: {config.n_layer} layers x {config.n_head} heads x {length}^2 tokens = "
            f"{heads * length**2:,} numbers, over this server's limit of {limit:,}. Use a text of at most {longest} "
            f"tokens for this model, or {instead}."
        )


def encode(lm: LanguageModel, text: str, what: str) -> list[int]:
    """The ids of `text` (no special tokens added), or a message naming every character the model does not know."""
    check_typed_text(text, what)
    unknown = unknown_characters(lm.tokenizer, text, allow_special_tokens=True)  # a prompt may hold '.' etc.
    if unknown:
        known = known_characters(lm.tokenizer)
        hint = f" It knows only: {known!r}." if len(known) <= 100 else ""
        raise VisitorError(
            f"The {lm.name} model does not know these characters of the {what}: "
            f"{', '.join(map(describe, unknown))}. Remove or replace them.{hint}"
        )
    return lm.tokenizer.encode(text, add_special_tokens=False, verbose=False)  # longer than the context: keep_context


def from_boundary(lm: LanguageModel, text: str, what: str) -> list[int]:
    """[boundary] + the ids of `text`: every text starts from the boundary token, as in training (an empty text too).
    A text that already starts with the boundary (as in '.emma.') is not given a second one."""
    ids = encode(lm, text, what)
    return ids if ids[:1] == [lm.boundary_id] else [lm.boundary_id] + ids


def keep_context(lm: LanguageModel, ids: list[int], what: str, notes: list[str]) -> list[int]:
    if len(ids) <= lm.block_size:
        return ids
    notes.append(
        f"The {what} is {len(ids)} tokens, more than the model's context of {lm.block_size} tokens: "
        f"kept the last {lm.block_size}."
    )
    return ids[-lm.block_size :]


@dataclass
class TextView:
    """A text as one model sees it: its tokens, their readable labels, notes about the input, and the recorded pass."""

    lm: LanguageModel
    ids: list[int]
    tokens: list[str]
    notes: list[str]
    text: str
    passes: ForwardPassCache  # where the recorded pass is kept (one per (model, ids), shared by every view)

    @property
    def recorded(self) -> ForwardPass:
        return self.passes.get(self.lm.model, self.ids)

    @property
    def key(self) -> str:
        """What identifies this view's numbers: the model and the token ids (see view_key)."""
        return view_key(self.lm.name, self.ids)

    @property
    def label(self) -> str:
        return text_label(self.text, self.lm.name)

    @property
    def shown(self) -> dict:
        """The page's record of the text it shows (the `shown` state): every view of the page is drawn from it."""
        return {"model": self.lm.name, "text": self.text, "key": self.key, "label": self.label, "length": len(self.ids)}

    @property
    def about(self) -> dict:
        """What every JSON answer carries: the model and token ids it was computed for, and the tokens as shown."""
        return {"model": self.lm.name, "ids": list(self.ids), "tokens": self.tokens}


def text_label(text: str, model: str) -> str:
    """A text and model in words, for a learner: '"emma" on names' (a long text cut to 40 characters, a model's name
    to 80: a link may name anything)."""
    text = text if len(text) <= 40 else text[:39] + "…"
    model = model if len(model) <= 80 else model[:79] + "…"
    return f"“{text}” on {model}" if text else f"the empty text on {model}"


def notes_markdown(notes: list[str]) -> str:
    """Notes as the answers give them: one Markdown list item each."""
    return "\n".join(f"- {note}" for note in notes)


def view_key(model: str, ids: list[int]) -> str:
    """A short fingerprint of (model, token ids): two views show the same numbers exactly when their keys match."""
    return hashlib.sha1(f"{model}|{','.join(map(str, ids))}".encode()).hexdigest()[:16]


def read_text(lm: LanguageModel, text: str, passes: ForwardPassCache) -> TextView:
    """`text` as `lm` reads it: from the boundary token, its last context's worth of tokens kept (with a note)."""
    notes = []
    ids = keep_context(lm, from_boundary(lm, text, "text"), "text", notes)
    return TextView(lm, ids, token_labels(lm.tokenizer, ids), notes, text, passes)


def first_upper(clause: str) -> str:
    """A clause as a sentence's start (str.capitalize would lower a token's letters after the first)."""
    return clause[:1].upper() + clause[1:]


# The fewest tokens the text's end must repeat for a copy to be expected there: an induction head finds what to copy
# by the token before it (a previous-token head writes it into the key), so the current token and the one before must
# both match the earlier copy; one token repeated alone is a letter seen before, which any text has. On the shipped
# specimen, on random ordinary tokens whose end repeats exactly n tokens (docs/circuits.md, the walk's premise), the
# top token is the copied one for 15 of 200 prompts at n = 1, 138 at n = 2, 198 at n = 3.
COPY_RUN = 2


def repeated_end(ids: list[int]) -> tuple[int, int] | None:
    """(where, length): the longest suffix of the text seen before, its `length` in tokens, and `where`, the position
    just after its first occurrence (the token an induction head copies); None when the end is not a repeat."""
    best = None
    for length in range(1, len(ids) - 1):
        suffix = ids[-length:]
        starts = [i for i in range(1, len(ids) - length) if ids[i : i + length] == suffix]
        if not starts:
            break
        best = starts[0] + length, length
    return best


def repeated_source(ids: list[int]) -> int | None:
    """Where the text's end was seen before (`repeated_end`'s `where`), or None when the end is not a repeat."""
    found = repeated_end(ids)
    return found and found[0]
