"""Tokenizers for MiniGPT, built with the `tokenizers` library and wrapped as `PreTrainedTokenizerFast`.

Three kinds, all saved as tokenizer.json next to the model, so that `PreTrainedTokenizerFast.from_pretrained(folder)`
and `AutoTokenizer.from_pretrained(folder, trust_remote_code=True)` load them (README: why the flag):
- names: one token per letter a-z, plus "." as the boundary that both starts and ends a name (bos = eos, as in
  makemore) and a pad. `generate` stops when the model writes the boundary, i.e. at the end of a name.
- char: one token per character seen in the training text, plus an end-of-text token and a pad.
- bpe: byte-level BPE (GPT-2's scheme) trained on the training text, with a chosen vocabulary size.

Character-level tokenizers have no unknown token on purpose: a character they do not know must be reported, not turned
into a silent <unk>. `check_text(tokenizer, text)` raises a ValueError that lists such characters.
"""

from collections.abc import Iterable, Iterator
from pathlib import Path

from huggingface_hub.utils import HFValidationError, validate_repo_id
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

NAMES_ALPHABET = "abcdefghijklmnopqrstuvwxyz"
NAMES_BOUNDARY = "."  # makemore's start/end token, id 0
END_OF_TEXT = "<|endoftext|>"  # GPT-2's document separator; bos and eos of the text tokenizers
PAD = "<|pad|>"  # distinct from eos, so that padding never teaches the model to stop


def wrap(tokenizer: Tokenizer, boundary: str) -> PreTrainedTokenizerFast:
    """The `transformers` tokenizer around a `tokenizers` one: bos = eos = boundary, its own pad, left padding."""
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=boundary,
        eos_token=boundary,
        pad_token=PAD,
        padding_side="left",  # batched generation continues every prompt from its last real token
        clean_up_tokenization_spaces=False,  # decoding must give back the exact characters
    )


def char_level(vocab: dict[str, int], boundary: str, lowercase: bool = False) -> Tokenizer:
    """One token per character (newlines and spaces included); the boundary is prepended to every encoded text."""
    tokenizer = Tokenizer(models.WordLevel(vocab))  # no unk_token: an unknown character is an error, never dropped
    if lowercase:
        tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")  # every character alone
    tokenizer.decoder = decoders.Fuse()  # characters are joined back with nothing between them
    tokenizer.add_special_tokens([boundary, PAD])
    # A prompt starts with the boundary, as every training example does: tokenizer("em") -> [".", "e", "m"].
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{boundary} $A", pair=f"{boundary} $A $B", special_tokens=[(boundary, vocab[boundary])]
    )
    return tokenizer


def names_tokenizer() -> PreTrainedTokenizerFast:
    """28 tokens: "." (boundary, id 0), a-z (ids 1-26) and the pad (id 27). Upper case is read as lower case."""
    vocab = {NAMES_BOUNDARY: 0, **{c: i + 1 for i, c in enumerate(NAMES_ALPHABET)}, PAD: len(NAMES_ALPHABET) + 1}
    return wrap(char_level(vocab, NAMES_BOUNDARY, lowercase=True), NAMES_BOUNDARY)


def char_tokenizer(texts: Iterable[str]) -> PreTrainedTokenizerFast:
    """A character-level tokenizer over the characters that occur in `texts` (sorted, as nanoGPT numbers them)."""
    chars = set()
    for text in texts:
        chars.update(text)
    if not chars:
        raise ValueError("The training text is empty: there are no characters to build a tokenizer from.")
    vocab = {c: i for i, c in enumerate(sorted(chars))}
    vocab |= {END_OF_TEXT: len(vocab), PAD: len(vocab) + 1}
    return wrap(char_level(vocab, END_OF_TEXT), END_OF_TEXT)


def bpe_tokenizer(texts: Iterator[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Byte-level BPE trained on `texts`: any text encodes (no unknown token); merges learnt up to `vocab_size`."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[END_OF_TEXT, PAD],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # all 256 bytes, so nothing is ever unknown
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)  # reads the stream once; keeps word counts, not the text
    return wrap(tokenizer, END_OF_TEXT)


def saved_bpe(serialized: str) -> PreTrainedTokenizerFast:
    """A byte-level BPE that `bpe_tokenizer` trained, from its serialized form (backend_tokenizer.to_str())."""
    return wrap(Tokenizer.from_str(serialized), END_OF_TEXT)


def unknown_characters(tokenizer, text: str, allow_special_tokens: bool = False) -> list[str]:
    """The sorted characters of `text` that `tokenizer` has no token for (none for byte-level BPE).

    Training data must not contain a special token's character (a "." inside a name would teach the model to stop), so
    by default those count as unknown; a prompt may contain whole special tokens (".emma."): `allow_special_tokens`."""
    if allow_special_tokens:
        for special in tokenizer.all_special_tokens:
            text = text.replace(special, "")
    specials = set() if allow_special_tokens else set(tokenizer.all_special_tokens)
    backend = tokenizer.backend_tokenizer
    if isinstance(backend.model, models.WordLevel):  # fast path for our character-level tokenizers: a vocab lookup
        normalized = backend.normalizer.normalize_str(text) if backend.normalizer is not None else text
        vocab = backend.get_vocab()
        return sorted({c for c in normalized if c not in vocab or c in specials})
    return [c for c in sorted(set(text)) if c in specials or not encodes(tokenizer, c)]


def encodes(tokenizer, character: str) -> bool:
    """Whether any tokenizer (a Hub model's too) has a real token for `character`, not nothing and not unk."""
    try:
        ids = tokenizer.encode(character, add_special_tokens=False)
    except Exception:  # a vocabulary without an unknown token raises
        return False
    return bool(ids) and (tokenizer.unk_token_id is None or tokenizer.unk_token_id not in ids)


def known_characters(tokenizer) -> str:
    """The single characters the tokenizer has a token for, special tokens left out, sorted."""
    specials = set(tokenizer.all_special_tokens)
    return "".join(sorted(t for t in tokenizer.get_vocab() if len(t) == 1 and t not in specials))


def check_text(tokenizer: PreTrainedTokenizerFast, text: str) -> None:
    """Raises a ValueError naming every character of `text` that the tokenizer has no token for."""
    unknown = unknown_characters(tokenizer, text)
    if unknown:
        raise ValueError(
            f"The text contains characters this model does not know: {', '.join(map(repr, unknown))}. "
            f"Use only these characters: {known_characters(tokenizer)!r}."
        )


def check_names_text(tokenizer: PreTrainedTokenizerFast, text: str) -> None:
    """For the names model: raises a ValueError listing the characters outside a-z (upper case is fine)."""
    check_text(tokenizer, text)


def missing_local_path(source: str) -> bool:
    """Whether `source` (a saved tokenizer or model: a folder or a Hub id) can only be a local path, one that does not
    exist: it is not there and is not of a Hub id's form ('name' or 'owner/name'). Loading it would otherwise fail
    with the Hub's "Repo id must be in the form ..." instead of saying the path is missing."""
    if Path(source).expanduser().exists():
        return False
    try:
        validate_repo_id(source)
    except HFValidationError:
        return True
    return False


def is_character_level(tokenizer: PreTrainedTokenizerFast) -> bool:
    return isinstance(tokenizer.backend_tokenizer.model, models.WordLevel)


def kind_of(tokenizer: PreTrainedTokenizerFast) -> str:
    """Which of the three kinds a saved tokenizer is: names (the fixed a-z one), char (learned characters) or bpe."""
    if not is_character_level(tokenizer):
        return "bpe"
    return "names" if tokenizer.get_vocab() == names_tokenizer().get_vocab() else "char"


__all__ = [
    "names_tokenizer",
    "char_tokenizer",
    "bpe_tokenizer",
    "check_text",
    "check_names_text",
    "unknown_characters",
    "known_characters",
    "missing_local_path",
    "is_character_level",
    "kind_of",
    "NAMES_BOUNDARY",
    "END_OF_TEXT",
    "PAD",
]
