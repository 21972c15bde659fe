"""Streamed data: local formats read with streaming, exact windows, disjoint train/validation splits, a deterministic
endless training stream, the built-in corpora, and DataError messages for bad input."""

import itertools
import json
import pickle
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from minigpt import data, reading, streams, tokenization, tokens

TEXT = "".join(f"Speaker {i}:\nLine number {i} of a small play.\n\n" for i in range(200))


def write(path, text):
    path.write_text(text)
    return str(path)


def take(dataset, n):
    return [np.asarray(example["input_ids"]).tolist() for example in itertools.islice(iter(dataset), n)]


def test_windows_are_the_sliding_window_of_the_stream():
    stream = np.arange(103)
    chunks = [stream[i : i + 7] for i in range(0, 103, 7)]  # chunk edges must not matter
    for block, stride, offset in [(10, 10, 0), (10, 4, 0), (10, 10, 3), (5, 5, 12)]:
        got = [w.tolist() for w in tokens.windows(chunks, block, stride, offset)]
        expected = [stream[i : i + block].tolist() for i in range(offset, 103 - block + 1, stride)]
        assert got == expected


def test_head_and_tail_split_a_text_at_a_character_like_nanogpt():
    pieces = [(line + "\n", False) for line in TEXT.split("\n")[:-1]]
    n = int(len(TEXT) * 0.9)
    train = "".join(t for t, _ in reading.head(pieces, n))
    validation = "".join(t for t, _ in reading.tail(pieces, n))
    assert train == TEXT[:n] and validation == TEXT[n:]


def test_text_validation_is_the_tail_and_training_windows_are_the_head(tmp_path):
    corpus = reading.open_corpus(write(tmp_path / "play.txt", TEXT))
    splits = data.text_splits(corpus, "char", block_size=16, stride=16, val_fraction=0.1, seed=0)
    tokenizer, n = splits.tokenizer, int(len(TEXT) * 0.9)
    validation = "".join(tokenizer.decode(ids) for ids in splits.validation["input_ids"])
    assert TEXT[n:].startswith(validation) and len(TEXT) - n - len(validation) < 16  # the tail, whole windows only
    first_epoch = take(splits.train, n // 16)
    assert sorted(tokenizer.decode(w) for w in first_epoch) == sorted(TEXT[i : i + 16] for i in range(0, n - 15, 16))


def test_training_stream_is_endless_shuffled_and_set_by_the_seed(tmp_path):
    corpus = reading.open_corpus(write(tmp_path / "play.txt", TEXT))
    per_epoch = int(len(TEXT) * 0.9) // 16
    run = lambda seed: take(data.text_splits(corpus, "char", 16, 16, 0.1, seed).train, 3 * per_epoch)
    first, again, other = run(1), run(1), run(2)
    assert len(first) == 3 * per_epoch  # goes on past the end of the corpus
    assert first == again and first != other
    assert first[:per_epoch] != first[per_epoch : 2 * per_epoch]  # each epoch its own order and cut


def test_names_validation_is_held_out_and_sized_like_makemore(tmp_path):
    names = [f"{a}{b}{c}" for a, b, c in itertools.product("abcdefghij", "klmnopqrst", "uvwxyz")]  # 600 distinct
    random.Random(0).shuffle(names)
    corpus = reading.open_corpus(write(tmp_path / "names.txt", "\n".join(names) + "\n"))
    splits = data.names_splits(corpus, block_size=16, val_size=1000, seed=3)
    decode = lambda ids: splits.tokenizer.decode(ids, skip_special_tokens=True)
    validation = {decode(ids) for ids in splits.validation["input_ids"]}
    rows = take(splits.train, 400)  # packed: several names a row
    train = {name for ids in rows for name in splits.tokenizer.decode(ids).strip(".").split(".")}
    assert len(validation) == 60  # min(1000, 10%)
    assert train | validation == set(names) and not train & validation
    assert splits.validation["input_ids"][0][0] == splits.validation["input_ids"][0][-1] == 0  # . name .


def test_names_with_unknown_characters_are_rejected_with_the_characters(tmp_path):
    corpus = reading.open_corpus(write(tmp_path / "names.txt", "anna\njo-ann\nzoë\n"))
    with pytest.raises(data.DataError, match=r"'-', 'ë'"):
        data.names_splits(corpus, 16, 1000, 0)


def test_jsonl_parquet_and_folders_stream_their_text_column(tmp_path):
    docs = [{"id": i, "body": f"document {i} " * 5} for i in range(30)]
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    pq.write_table(pa.Table.from_pylist(docs), tmp_path / "docs.parquet")
    folder = tmp_path / "folder"
    folder.mkdir()
    for i in range(3):
        write(folder / f"part{i}.txt", f"part {i}\n")
    for path in ("docs.jsonl", "docs.parquet"):
        corpus = reading.open_corpus(str(tmp_path / path), "body")
        assert list(reading.pieces(corpus)) == [(d["body"], True) for d in docs]  # documents end with eos
    assert "".join(t for t, _ in reading.pieces(reading.open_corpus(str(folder)))) == "part 0\npart 1\npart 2\n"
    with pytest.raises(data.DataError, match=r"no column 'text'.*\(id, body\)"):
        reading.open_corpus(str(tmp_path / "docs.jsonl"), "text")


def test_documents_are_separated_by_eos(tmp_path):
    (tmp_path / "docs.jsonl").write_text('{"text": "ab"}\n{"text": "cd"}\n')
    corpus = reading.open_corpus(str(tmp_path / "docs.jsonl"))
    tokenizer = tokenization.char_tokenizer(["abcd"])
    ids = np.concatenate(list(tokens.token_chunks(reading.pieces(corpus), tokenizer))).tolist()
    eos = tokenizer.eos_token_id
    assert ids == tokenizer("ab", add_special_tokens=False)["input_ids"] + [eos] + tokenizer(
        "cd", add_special_tokens=False
    )["input_ids"] + [eos]


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: str(p / "missing.txt"), "does not exist"),
        (lambda p: write(p / "empty.txt", ""), "is empty"),
        (lambda p: write(p / "data.csv", "a,b\n"), "use a .txt"),
    ],
)
def test_bad_datasets_raise_data_errors(tmp_path, make, message):
    with pytest.raises(data.DataError, match=message):
        reading.open_corpus(make(tmp_path))


def test_text_shorter_than_a_window_is_rejected(tmp_path):
    corpus = reading.open_corpus(write(tmp_path / "short.txt", "to be or not to be\n" * 3))
    with pytest.raises(data.DataError, match="shorter than one window of 64 tokens"):
        data.text_splits(corpus, "char", block_size=64, stride=64, val_fraction=0.5, seed=0)


def test_names_are_packed_whole_into_rows_sharing_their_boundaries():
    tokenizer = tokenization.names_tokenizer()
    names = ["emma", "ava", "olivia", "x", "bartholomewxyz", "jo", "mohammed", "alia"]
    rows = list(streams.packed(tokens.name_examples(names, tokenizer, 16), block_size=16))
    expected = [".emma.ava.", ".olivia.x.", ".bartholomewxyz.", ".jo.mohammed.", ".alia."]
    assert [tokenizer.decode(r) for r in rows] == expected
    assert all(len(r) <= 16 for r in rows)


def test_packed_names_compute_what_they_compute_one_a_row():
    from modeling_minigpt import MiniGPTConfig, MiniGPTForCausalLM

    tokenizer = tokenization.names_tokenizer()
    torch.manual_seed(0)
    config = MiniGPTConfig.from_preset("names", vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id)
    model = MiniGPTForCausalLM(config).eval()
    examples = list(tokens.name_examples(["emma", "ava", "olivia", "x", "bartholomewxyz", "jo", "lu"], tokenizer, 16))
    rows = [{"input_ids": r} for r in streams.packed(examples, 16)]
    packed = streams.collate(rows, tokenizer.pad_token_id, boundary_id=0)
    alone = streams.collate([{"input_ids": e} for e in examples], tokenizer.pad_token_id)
    assert packed["input_ids"].shape[0] < alone["input_ids"].shape[0]
    assert packed["position_ids"][0].tolist()[:10] == [0, 1, 2, 3, 4, 0, 1, 2, 3, 0]  # .emma.ava.: each from 0
    for implementation in ("eager", "sdpa"):
        model.set_attn_implementation(implementation)
        with torch.no_grad():
            torch.testing.assert_close(model(**packed).loss, model(**alone).loss, rtol=1e-5, atol=1e-6)
            # Per name too: the last logits of "emma" are the same packed or alone (the next name cannot leak back).
            emma_packed = model(**packed).logits[0, 4]
            emma_alone = model(**alone).logits[0, 4]
        torch.testing.assert_close(emma_packed, emma_alone, rtol=1e-5, atol=1e-5)


def test_collate_pads_on_the_right_without_loss_on_padding():
    batch = streams.collate([{"input_ids": [0, 5, 0]}, {"input_ids": [0, 1, 2, 3, 0]}], pad_token_id=27)
    assert batch["input_ids"].tolist() == [[0, 5, 0, 27, 27], [0, 1, 2, 3, 0]]
    assert batch["labels"].tolist() == [[0, 5, 0, -100, -100], [0, 1, 2, 3, 0]]


def test_play_markdown_becomes_speaker_and_lines():
    markdown = (
        "# Macbeth\n\n## ACT I\n\n_Thunder. Enter three\nWitches_\n\n"
        "**First Witch**  \nWhen shall we three meet again  \n"
        "In thunder, _aside_ or in rain?\n\n**ALL**  \n\\[Within]  \nFair is foul.\n\n_Exeunt_\n"
    )
    assert data.play_to_text(markdown) == (
        "First Witch:\nWhen shall we three meet again\nIn thunder,  or in rain?\n\nALL:\nFair is foul.\n"
    )


def test_builtin_corpora_need_no_download():
    names = data.builtin_names().read_text().split()
    assert len(names) == len(set(names)) == 32_000
    assert all(name.isascii() and name.isalpha() and name.islower() for name in names)
    plays = data.builtin_shakespeare().read_text()
    assert plays.startswith("THESEUS:\nNow, fair Hippolyta") and len(plays) > 4_000_000


def test_the_induction_labs_lines_are_names_written_twice_after_a_lead_or_not():
    lines = data.builtin_repeats().read_text().splitlines()
    names = set(data.builtin_names().read_text().split())
    assert len(lines) == 50_000 and all(len(line) <= 30 and line.isascii() and line.isalpha() for line in lines)
    copies = []
    for line in lines:  # the longest ending written twice: the copied run, at most 15 letters
        c = max(c for c in range(1, len(line) // 2 + 1) if line[-2 * c : -c] == line[-c:])
        assert c <= 15 and len(line) - 2 * c <= 30 - 2 * c
        copies.append(c)
    assert len(set(copies)) >= 12  # copies of many lengths: no fixed look-back predicts them
    led = sum(len(line) > 2 * c for line, c in zip(lines, copies)) / len(lines)
    assert 0.3 < led < 0.5  # half the lines draw a lead, some of them empty (a copy of 15 letters leaves no room)
    assert sum(line[-c:] in names for line, c in zip(lines, copies)) > len(lines) / 10  # runs of names (one, or more)
    assert data.builtin_repeats().read_text().splitlines() == lines  # seeded: the same lines every time


def test_a_repeat_goes_back_a_span_and_on_as_the_text_went():
    window, rng = np.arange(100, 164), random.Random(0)
    for _ in range(200):
        repeated = data.with_a_repeat(window, rng).tolist()
        assert len(repeated) == 64
        k = next(i for i in range(1, 64) if repeated[i] != repeated[i - 1] + 1)  # where it jumps back
        m = repeated[k - 1] + 1 - repeated[k]
        assert repeated[:k] == window[:k].tolist() and 8 <= m <= k  # a span of at least 8 tokens, read again
        assert repeated[k:] == window[k - m : 64 - m].tolist()  # then the text goes on as it did


def test_a_random_span_is_written_twice_where_the_texts_span_was():
    window, rng, vocabulary = np.arange(100, 164), random.Random(1), list(range(1000, 1050))
    for _ in range(200):
        repeated = data.with_a_repeat(window, rng, vocabulary=vocabulary).tolist()
        drawn = [i for i, token in enumerate(repeated) if token >= 1000]
        start, n = drawn[0], len(drawn)
        assert drawn == list(range(start, start + n)) and len(repeated) == 64
        span = repeated[start : start + n]  # m random tokens, then the same again (cut by the window's end)
        m = next(p for p in range(-(-n // 2), n + 1) if span[p:] == span[: n - p])
        assert m >= 8 and (start + 2 * m == start + n or start + n == 64)
        assert repeated[:start] == window[:start].tolist()  # the text before it
        k = start + m  # the text resumes where it would have repeated
        assert repeated[start + 2 * m :] == window[k : k + 64 - start - 2 * m].tolist()


def test_a_repeat_fraction_of_the_training_windows_repeat_and_validation_stays_plain(tmp_path):
    text = "".join(f"line {i:04d} of a play\n" for i in range(3000))  # every window occurs once in the text
    corpus = reading.open_corpus(write(tmp_path / "play.txt", text))
    splits = data.text_splits(corpus, "char", 64, 64, 0.1, seed=0, repeat_fraction=0.25)
    decode = splits.tokenizer.decode
    windows = [decode(ids) for ids in take(splits.train, 1000)]
    repeated = sum(window not in text for window in windows)
    assert 200 <= repeated <= 300  # 25% of 1,000 windows, give or take sampling noise (sd 14)
    assert all(decode(ids) in text for ids in splits.validation["input_ids"])


def test_boundary_first_windows_start_with_the_start_token_and_tile_the_text(tmp_path):
    text = "".join(f"line {i:04d} of a play\n" for i in range(3000))
    corpus = reading.open_corpus(write(tmp_path / "play.txt", text))
    for fraction in (0.0, 1.0):
        splits = data.text_splits(corpus, "char", 64, 64, 0.1, seed=0, repeat_fraction=fraction, boundary_first=True)
        bos, decode = splits.tokenizer.bos_token_id, splits.tokenizer.decode
        for rows in (take(splits.train, 200), splits.validation["input_ids"]):
            assert all(len(ids) == 64 and ids[0] == bos and bos not in ids[1:] for ids in rows)
        if fraction == 0.0:  # plain: 63 characters of text each, one after the other
            first_epoch = [decode(ids[1:]) for ids in take(splits.train, int(len(text) * 0.9) // 63)]
            assert sorted(first_epoch) == sorted(text[i : i + 63] for i in range(0, int(len(text) * 0.9) - 62, 63))


def test_long_lines_are_read_in_pieces_that_put_the_text_back(tmp_path, monkeypatch):
    monkeypatch.setattr(reading, "PIECE_CHARS", 4)
    files = [write(tmp_path / "a.txt", "ab\r\ncdefghij\nlast"), write(tmp_path / "b.txt", "x\n")]
    rows = [row["text"] for row in reading.text_file_lines(files)]
    assert rows == ["ab\n", "cdef", "ghij", "\n", "last", "\n", "x\n"]  # a missing last newline is put back
    corpus = reading.open_corpus(str(tmp_path))
    assert "".join(text for text, _ in reading.pieces(corpus)) == "ab\ncdefghij\nlast\nx\n"


def test_long_documents_are_cut_into_pieces_that_end_the_document_once(tmp_path, monkeypatch):
    monkeypatch.setattr(reading, "PIECE_CHARS", 4)
    corpus = reading.open_corpus(write(tmp_path / "docs.jsonl", '{"text": "abcdefghij"}\n{"text": ""}\n'))
    assert list(reading.pieces(corpus)) == [("abcd", False), ("efgh", False), ("ij", True), ("", True)]


# ---- tokenized once --------------------------------------------------------------------------------------------------


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache folder for token files."""
    monkeypatch.setattr(tokens, "CACHE", tmp_path / "cache")
    return tmp_path / "cache"


def splits_of(path, **kwargs):
    return data.text_splits(reading.open_corpus(path), "char", 16, 8, 0.1, seed=0, **kwargs)


def test_a_local_corpus_is_tokenized_once_and_its_windows_are_the_texts(tmp_path, cache, monkeypatch, capsys):
    """The first run writes the two parts' token files and says so; a second run with the same file and tokenizer
    reads them and tokenizes nothing (token_chunks is never called); the windows are those cut from the text's
    tokens."""
    path = write(tmp_path / "play.txt", TEXT)
    first = splits_of(path)
    assert sorted(p.name.split(".")[1] for p in (cache / "tokens").iterdir()) == ["uint16", "uint16"]
    assert capsys.readouterr().out.count("Tokenized the") == 2
    monkeypatch.setattr(tokens, "token_chunks", lambda *a: pytest.fail("tokenized again"))
    again = splits_of(path)
    assert capsys.readouterr().out.count("from the cache") == 2
    assert take(again.train, 300) == take(first.train, 300)
    assert np.array_equal(again.train_ids, first.train_ids)
    tokenizer = first.tokenizer
    assert tokenizer.decode(first.train_ids.tolist()) == TEXT[: int(len(TEXT) * 0.9)]
    n_train = len(first.train_ids)
    assert sorted(take(first.train, (n_train - 16) // 8 + 1)) == sorted(cut(first.train_ids.tolist(), 16, 8))


def test_a_texts_validation_alone_is_what_its_splits_hold_out(tmp_path, cache, capsys):
    """text_validation (the Head Finder rebuilding a run's validation windows with the run's tokenizer) gives the
    windows text_splits holds out, boundary first or not, and tokenizes no training text."""
    path = write(tmp_path / "play.txt", TEXT)
    for boundary_first in (False, True):
        splits = splits_of(path, boundary_first=boundary_first)
        capsys.readouterr()
        alone = data.text_validation(reading.open_corpus(path), splits.tokenizer, 16, 0.1, boundary_first)
        assert alone == splits.validation["input_ids"]
        assert "train text" not in capsys.readouterr().out


def cut(ids: list[int], size: int, step: int) -> list[list[int]]:
    """Every window of `size` tokens, one each `step`: the formula, written out."""
    return [ids[i : i + size] for i in range(0, len(ids) - size + 1, step)]


def test_a_streamed_corpus_is_split_by_its_shards_and_never_read_whole_first(tmp_path, monkeypatch):
    """A streamed corpus (a Hub dataset: it may be bigger than the disk) is not read whole before training: its
    validation text is the start of its first shard, its training text the rest; the training stream has the
    corpus's shards, so that DataLoader workers (and torchrun's processes, by split_dataset_by_node) each read and
    tokenize shards of their own. Four files, each of its own letters, are four shards here."""
    from datasets.distributed import split_dataset_by_node

    letters = ["abc", "def", "ghi", "jkl"]
    folder = tmp_path / "shards"
    folder.mkdir()
    texts = []
    for i, group in enumerate(letters):
        rng = random.Random(i)
        texts.append("".join("".join(rng.choices(group, k=7)) + "\n" for _ in range(100)))  # 800 characters
        (folder / f"part-{i}.txt").write_text(texts[-1])
    read = []
    real_lines = reading.text_file_lines
    monkeypatch.setattr(reading, "text_file_lines", lambda files: (read.append(1) or row for row in real_lines(files)))
    corpus = reading.open_corpus(str(folder))
    corpus.files = None  # as a Hub dataset is: streamed, tokenized as read, no token file
    tokenizer = tokenization.char_tokenizer("".join(texts))
    encode = lambda text: tokenizer.backend_tokenizer.encode(text, add_special_tokens=False).ids  # noqa: E731
    read.clear()
    monkeypatch.setattr(tokens, "ENCODE_BATCH", 16)  # lines a tokenizer call takes: the read-ahead, small beside 400
    splits = data.text_splits(corpus, "char", 16, 8, 0.1, seed=0, tokenizer=tokenizer, streamed_validation_chars=160)
    # Lines read before training: the validation's 20 (twice: as validation, and skipped by the training stream),
    # then a tokenizer batch's and the rows read with it; not the corpus's 400.
    assert len(read) <= 2 * 20 + 16 + 2 * reading.ROWS_A_READ
    assert splits.validation["input_ids"] == cut(encode(texts[0][:160]), 16, 16)
    assert "4 shard(s)" in splits.summary and splits.train.n_shards % 4 == 0  # its passes over the 4 shards

    # One epoch: every window of each shard's training text, once (shard 0's after its validation text).
    expected = [w for i, text in enumerate(texts) for w in cut(encode(text[160:] if i == 0 else text), 16, 8)]
    assert sorted(take(splits.train, len(expected))) == sorted(expected)

    def shards_of(examples) -> set[int]:
        return {i for example in examples for i, group in enumerate(letters) if tokenizer.decode(example)[0] in group}

    # Two DataLoader workers alternate (batch i from worker i mod 2), each reading its own two shards (~100 windows
    # a shard).
    loader = torch.utils.data.DataLoader(splits.train, batch_size=None, num_workers=2)
    batches = [example["input_ids"].tolist() for example in itertools.islice(loader, 480)]
    assert shards_of(batches[0::2]) == {0, 2} and shards_of(batches[1::2]) == {1, 3}
    # torchrun's second process of two reads shards 1 and 3 only.
    assert shards_of(take(split_dataset_by_node(splits.train, rank=1, world_size=2), 240)) == {1, 3}


def test_a_streams_start_reads_none_of_its_tokens_and_names_are_kept_as_one_array(tmp_path, cache, monkeypatch):
    """`datasets` hashes a stream's generator and its arguments by pickling them: a memory map in them would be read
    and copied whole (a big corpus's gigabytes at every start), so the stream holds its token file by path, and the
    names as one flat array (31,000 lists took 1.4 s to pickle)."""
    path = write(tmp_path / "play.txt", TEXT)
    splits_of(path)  # the token files written

    def copied(*args):
        raise AssertionError("a memory map was pickled")

    monkeypatch.setattr(np.memmap, "__reduce__", copied)
    monkeypatch.setattr(np.memmap, "__reduce_ex__", copied)
    again = splits_of(path)  # hashed by `datasets` as the stream is made
    assert take(again.train, 3) and len(pickle.dumps(tokens.TokenFile(cache))) < 200
    token_file = next((cache / "tokens").glob("*.bin"))
    monkeypatch.undo()
    copy = pickle.loads(pickle.dumps(tokens.TokenFile(token_file)))
    assert np.array_equal(copy.ids, tokens.TokenFile(token_file).ids) and len(copy.ids) > 0
    names = [[1, 5, 1], [1, 2, 3, 4, 1], [1, 1]]
    assert list(streams.Rows(names)) == names and list(pickle.loads(pickle.dumps(streams.Rows(names)))) == names


def test_a_changed_file_or_tokenizer_is_tokenized_again_and_a_failed_one_leaves_no_token_file(tmp_path, cache):
    path = write(tmp_path / "play.txt", TEXT)
    splits_of(path)
    write(tmp_path / "play.txt", TEXT.upper())  # same length, other text: the file's modification time changed
    changed = splits_of(path)
    assert changed.tokenizer.decode(changed.train_ids[:10].tolist()) == TEXT.upper()[:10]
    bpe = data.text_splits(reading.open_corpus(path), "bpe", 16, 16, 0.1, seed=0, vocab_size=300)
    assert len(list((cache / "tokens").glob("*.bin"))) == 6 and len(bpe.train_ids) < len(changed.train_ids)

    def broken(texts, tokenizer):
        yield np.arange(5)
        raise KeyboardInterrupt  # a run stopped while it tokenizes

    other = write(tmp_path / "other.txt", TEXT)
    with pytest.MonkeyPatch.context() as patch, pytest.raises(KeyboardInterrupt):
        patch.setattr(tokens, "token_chunks", broken)
        splits_of(other)
    assert len(list((cache / "tokens").glob("*.bin"))) == 6 and not list((cache / "tokens").glob("*.part"))
    assert take(splits_of(other).train, 5)  # the next run tokenizes it whole


def test_a_dataloader_worker_gives_the_batches_the_main_process_gives(tmp_path, cache):
    """On a GPU train.py makes batches in one DataLoader worker (training.GPU_DEFAULTS): the stream, pinned or not, is
    the one the main process reads, batch for batch."""
    splits = splits_of(write(tmp_path / "play.txt", TEXT))
    collate = lambda rows: streams.collate(rows, pad_token_id=0)  # noqa: E731
    batches = []
    for workers in (0, 1):
        loader = torch.utils.data.DataLoader(splits.train, batch_size=8, collate_fn=collate, num_workers=workers)
        batches.append([batch["input_ids"] for batch in itertools.islice(loader, 20)])
    assert all(torch.equal(a, b) for a, b in zip(*batches)) and len(batches[1]) == 20


def test_a_gpu_gets_the_fast_defaults_and_flags_still_win(monkeypatch):
    """What train.py's presets take on a CUDA GPU, read through its own flag parser (a CPU cannot run them, so CUDA is
    declared present): a worker for batches, non-blocking copies; the gpt2 preset compiled, 32 rows a batch."""
    from minigpt import training

    _, cpu = training.parse_args(["--preset", "gpt2"])
    assert (cpu.torch_compile, cpu.per_device_train_batch_size, cpu.dataloader_num_workers) == (False, 12, 0)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    _, gpu = training.parse_args(["--preset", "gpt2"])
    assert (gpu.torch_compile, gpu.per_device_train_batch_size, gpu.gradient_accumulation_steps) == (True, 32, 4)
    assert gpu.dataloader_num_workers == 1 and gpu.accelerator_config.non_blocking
    _, chosen = training.parse_args(["--preset", "gpt2", "--torch_compile", "false", "--dataloader_num_workers", "0"])
    assert not chosen.torch_compile and chosen.dataloader_num_workers == 0
    _, names = training.parse_args(["--preset", "names"])
    assert not names.torch_compile and names.dataloader_num_workers == 1


def test_a_local_corpus_trains_its_bpe_once(tmp_path, cache, monkeypatch, capsys):
    """Byte-level BPE is trained on the training text once: a second run reads it (and the tokens) from the cache,
    trains nothing, and encodes exactly as the tokenizer it trained."""
    path = write(tmp_path / "play.txt", TEXT)
    bpe = lambda: data.text_splits(reading.open_corpus(path), "bpe", 16, 16, 0.1, seed=0, vocab_size=300)  # noqa: E731
    first = bpe()
    monkeypatch.setattr(data.tokenization, "bpe_tokenizer", lambda *a: pytest.fail("trained again"))
    again = bpe()
    assert "BPE tokenizer trained on this text from the cache" in capsys.readouterr().out
    assert again.tokenizer.backend_tokenizer.to_str() == first.tokenizer.backend_tokenizer.to_str()
    assert again.tokenizer(TEXT[:200])["input_ids"] == first.tokenizer(TEXT[:200])["input_ids"]
    assert (again.tokenizer.eos_token, again.tokenizer.pad_token, again.tokenizer.padding_side) == (
        first.tokenizer.eos_token,
        first.tokenizer.pad_token,
        "left",
    )
