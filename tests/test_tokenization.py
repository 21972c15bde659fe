"""Tokenizers: exact round trips, the special tokens generation relies on, loading with AutoTokenizer, and a clear
error (never a silent unknown token) for characters a character-level vocabulary does not have."""

import pytest
from transformers import AutoTokenizer

from minigpt import tokenization

SAMPLE = "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n"


def test_names_tokenizer_matches_makemore_numbering():
    tokenizer = tokenization.names_tokenizer()
    assert len(tokenizer) == 28
    assert tokenizer("emma")["input_ids"] == [0, 5, 13, 13, 1]  # boundary first, then a=1 ... z=26
    assert tokenizer.bos_token == tokenizer.eos_token == "."
    assert tokenizer.pad_token_id == 27 != tokenizer.eos_token_id
    assert tokenizer.padding_side == "left"
    assert tokenizer.decode([0, 5, 13, 13, 1, 0], skip_special_tokens=True) == "emma"
    assert tokenizer("Emma")["input_ids"] == tokenizer("emma")["input_ids"]  # upper case reads as lower case


def test_names_tokenizer_survives_save_and_autotokenizer(tmp_path):
    tokenization.names_tokenizer().save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    batch = loaded(["ann", "bo"], padding=True)
    assert batch["input_ids"] == [[0, 1, 14, 14], [27, 0, 2, 15]]  # left padding with the pad token
    assert batch["attention_mask"] == [[1, 1, 1, 1], [0, 1, 1, 1]]
    assert (loaded.bos_token_id, loaded.eos_token_id, loaded.pad_token_id) == (0, 0, 27)
    with pytest.raises(ValueError, match=r"'-', '2'"):
        tokenization.check_names_text(loaded, "jo-ann2")


def test_unknown_characters_are_an_error_that_lists_them():
    tokenizer = tokenization.names_tokenizer()
    with pytest.raises(ValueError) as error:
        tokenization.check_names_text(tokenizer, "Zoë Anne!")
    message = str(error.value)
    assert "' '" in message and "'!'" in message and "'ë'" in message and "abcdefghijklmnopqrstuvwxyz" in message
    tokenization.check_names_text(tokenizer, "Zoe")  # fine: only letters
    with pytest.raises(Exception, match="Missing"):  # encoding itself refuses: no unknown token to fall back to
        tokenizer("zoë")


def test_char_tokenizer_round_trips_text_exactly(tmp_path):
    tokenizer = tokenization.char_tokenizer([SAMPLE])
    assert len(tokenizer) == len(set(SAMPLE)) + 2  # the characters, end-of-text, pad
    ids = tokenizer(SAMPLE, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(SAMPLE)
    assert tokenizer.decode(ids) == SAMPLE
    tokenizer.save_pretrained(tmp_path)
    assert AutoTokenizer.from_pretrained(tmp_path).decode(ids) == SAMPLE
    with pytest.raises(ValueError, match="'~'"):
        tokenization.check_text(tokenizer, "~~~")


def test_bpe_tokenizer_learns_merges_and_encodes_anything():
    tokenizer = tokenization.bpe_tokenizer(iter([SAMPLE] * 20), vocab_size=300)
    assert 258 < len(tokenizer) <= 300  # 256 bytes + 2 specials + merges, no more than asked
    ids = tokenizer(SAMPLE, add_special_tokens=False)["input_ids"]
    assert len(ids) < len(SAMPLE) / 2  # merges learnt from the text compress it
    assert tokenizer.decode(ids) == SAMPLE
    unseen = "Zoë says: ünïcödé ✓"
    assert tokenizer.decode(tokenizer(unseen, add_special_tokens=False)["input_ids"]) == unseen
    tokenization.check_text(tokenizer, unseen)  # byte level: nothing is unknown
    assert tokenizer.pad_token_id != tokenizer.eos_token_id == tokenizer.bos_token_id
