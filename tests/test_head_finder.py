"""The Head Finder: each head metric against its formula written out here (loops over queries and keys), on hand-built
patterns and on a model's own attention over a small corpus; the ablation against zeroing the head's columns of
out_proj; the corpora (a visitor's text, a run's validation tail); the disk cache (same numbers, dropped when the
weights change); the endpoints through the running app; and the table and dashboard in Chromium."""

import json
import math

import pytest
import torch
from torch.nn import functional as F

from helpers import (
    THREE_LAYERS,
    app_error,
    call,
    chromium_page,
    needs_chromium,
    printable_tokenizer,
    save_fixture_model,
    tiny_model,
)
from minigpt.errors import VisitorError

# Windows with repeated tokens (induction has queries to read), of different lengths (one padded batch).
WINDOWS = [[0, 5, 6, 7, 5, 6, 7, 8, 5], [0, 9, 9, 3], [0, 4, 5, 6, 4, 5, 6, 4, 5, 6, 4, 2], [0, 1]]


def formula_metrics(attentions: list[torch.Tensor], windows: list[list[int]]) -> dict:
    """Each metric by its definition: per query i >= 1 of each window, with A (L, H, T, T) that window's weights."""
    L, H = attentions[0].shape[:2]
    total = {name: torch.zeros(L, H, dtype=torch.float64) for name in ("previous_token", "self", "sink", "entropy")}
    induction, copies_seen, queries = torch.zeros(L, H, dtype=torch.float64), 0, 0
    histogram = torch.zeros(L, H, 200, dtype=torch.float64)
    for A, tokens in zip(attentions, windows):
        A = A.double()
        for i in range(1, len(tokens)):
            queries += 1
            total["previous_token"] += A[:, :, i, i - 1]
            total["self"] += A[:, :, i, i]
            total["sink"] += A[:, :, i, 0]
            for j in range(i + 1):
                a = A[:, :, i, j]
                total["entropy"] -= torch.where(a > 0, a * a.clamp(min=1e-300).log(), 0.0)
                histogram[:, :, i - j] += a
            # induction: earlier j whose last 3 tokens are i's last 3 (a repeated run of 3, the one definition)
            earlier = [j for j in range(2, i) if i >= 2 and tokens[j - 2 : j + 1] == tokens[i - 2 : i + 1]]
            if earlier:
                copies_seen += 1
                induction += sum(A[:, :, i, j + 1] for j in earlier)
    result = {name: value / queries for name, value in total.items()}
    result["induction"] = induction / copies_seen
    distances = torch.arange(200, dtype=torch.float64)
    mass = histogram / queries
    result["distance_mean"] = (mass * distances).sum(-1)
    result["distance_spread"] = ((mass * (distances - result["distance_mean"][..., None]) ** 2).sum(-1)).sqrt()
    return result


def sums_of(attentions: list[torch.Tensor], windows: list[list[int]], block_size: int = 16):
    """The module's means over `windows` read as one padded batch."""
    from minigpt.heads.metrics import Sums, add_batch, means, padded

    L, H = attentions[0].shape[:2]
    ids, queries = padded(windows)
    T = ids.shape[1]
    batch = torch.zeros(L, len(windows), H, T, T)
    for b, A in enumerate(attentions):
        batch[:, b, :, : A.shape[-1], : A.shape[-1]] = A
    sums = Sums.zeros(L, H, block_size)
    add_batch(sums, batch, ids, queries)
    return means(sums)


def random_attention(length: int, layers: int = 2, heads: int = 3, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(layers, heads, length, length, generator=generator) * 2
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    return scores.masked_fill(~causal, -math.inf).softmax(-1)


def test_every_metric_equals_its_formula_on_random_weights():
    attentions = [random_attention(len(w), seed=i) for i, w in enumerate(WINDOWS)]
    found, expected = sums_of(attentions, WINDOWS), formula_metrics(attentions, WINDOWS)
    for name, value in expected.items():
        torch.testing.assert_close(found[name].double(), value, rtol=1e-5, atol=1e-6, msg=name)


def test_a_perfect_previous_token_head_and_an_even_head():
    """Hand-built: all weight on i - 1 scores previous 1, self 0, entropy 0, distance 1 with no spread, and sink only
    at query 1 (its previous token is the first); even weights score 1/(i + 1) on each role, log(i + 1) entropy."""
    windows = [[0, 1, 2, 3, 4, 5], [0, 1, 2]]
    previous = []
    for window in windows:
        A = torch.diag(torch.ones(len(window) - 1), -1)  # query i: all its weight on key i - 1
        A[0, 0] = 1.0  # query 0 can only look at itself
        previous.append(A)
    found = sums_of([A[None, None] for A in previous], windows)
    queries = sum(len(w) - 1 for w in windows)
    assert found["previous_token"].item() == pytest.approx(1.0)
    assert found["self"].item() == pytest.approx(0.0)
    assert found["sink"].item() == pytest.approx(len(windows) / queries)
    assert found["entropy"].item() == pytest.approx(0.0, abs=1e-6)
    assert found["distance_mean"].item() == pytest.approx(1.0)
    assert found["distance_spread"].item() == pytest.approx(0.0, abs=1e-3)

    from minigpt.heads.metrics import even_attention

    even = sums_of([even_attention(len(w))[None, None] for w in windows], windows)
    one_over = sum(1 / (i + 1) for w in windows for i in range(1, len(w))) / queries
    for role in ("previous_token", "self", "sink"):
        assert even[role].item() == pytest.approx(one_over)
    assert even["entropy"].item() == pytest.approx(
        sum(math.log(i + 1) for w in windows for i in range(1, len(w))) / queries
    )


def zeroed_head_loss(model, windows: list[list[int]], layer: int, head: int) -> float:
    """The mean loss per predicted token with the head's columns of out_proj's weight zeroed (its output gone, the
    bias kept): the ablation done another way than the module's hook."""
    D = model.config.head_dim
    weight = model.model.layers[layer].attn.out_proj.weight
    saved = weight.detach().clone()
    with torch.no_grad():
        weight[:, head * D : (head + 1) * D] = 0
        total = sum(
            F.cross_entropy(model(input_ids=torch.tensor([w])).logits[0, :-1], torch.tensor(w[1:]), reduction="sum")
            for w in windows
        )
        weight.copy_(saved)
    return float(total) / sum(len(w) - 1 for w in windows)


def test_measure_on_the_models_own_attention_equals_the_formulas():
    from minigpt.heads.metrics import measure

    model = tiny_model("sdpa", shape=THREE_LAYERS)
    windows = [[w % 31 for w in window] for window in WINDOWS] * 3
    result = measure(model, windows)
    attentions = []
    with torch.no_grad():
        for window in windows:  # one window at a time, no padding: the model's own weights, as output_attentions gives
            out = model(input_ids=torch.tensor([window]), output_attentions=True)
            attentions.append(torch.stack(out.attentions)[:, 0])  # (L, H, T, T)
    expected = formula_metrics(attentions, windows)
    for name, value in expected.items():
        torch.testing.assert_close(torch.tensor(result["metrics"][name]).double(), value, rtol=1e-4, atol=1e-5)

    with torch.no_grad():
        plain = sum(
            F.cross_entropy(model(input_ids=torch.tensor([w])).logits[0, :-1], torch.tensor(w[1:]), reduction="sum")
            for w in windows
        ) / sum(len(w) - 1 for w in windows)
    assert result["plain_loss"] == pytest.approx(float(plain), rel=1e-5)
    for layer, head in [(0, 0), (1, 1), (2, 0)]:
        rise = zeroed_head_loss(model, windows, layer, head) - float(plain)
        assert result["metrics"]["ablation"][layer][head] == pytest.approx(rise, abs=1e-5)

    # Chance: a head spreading its weight evenly, 1 / (i + 1) on each role's key; log(i + 1) entropy.
    queries = [i for w in windows for i in range(1, len(w))]
    assert result["chance"]["sink"] == pytest.approx(sum(1 / (i + 1) for i in queries) / len(queries))
    assert result["chance"]["entropy"] == pytest.approx(sum(math.log(i + 1) for i in queries) / len(queries))
    assert result["chance"]["ablation"] == 0.0
    histogram = torch.tensor(result["distance_histogram"])  # (L, H, bins)
    torch.testing.assert_close(histogram.sum(-1), torch.ones(3, 2), rtol=1e-5, atol=1e-5)


def test_the_examples_are_the_queries_that_do_the_role_most():
    """A head's top example is the query whose role weight is furthest above even, w - 1 / (i + 1), over the whole
    corpus."""
    from minigpt.heads.metrics import Examples, measure

    model = tiny_model("sdpa", shape=THREE_LAYERS)
    windows = [[w % 31 for w in window] for window in WINDOWS] * 2
    result = measure(model, windows)
    examples = Examples.from_json(result["examples"])
    with torch.no_grad():
        attentions = [
            torch.stack(model(input_ids=torch.tensor([w]), output_attentions=True).attentions)[:, 0] for w in windows
        ]
    for layer, head in [(0, 1), (2, 0)]:
        best = max(
            (attentions[w][layer, head, i, 0].item() - 1 / (i + 1), w, i)
            for w, window in enumerate(windows)
            for i in range(1, len(window))
        )
        top = examples.of(layer, head, "sink")[0]
        assert top["value"] == pytest.approx(best[0], abs=1e-5)
        assert attentions[top["window"]][layer, head, top["query"], 0].item() == pytest.approx(
            attentions[best[1]][layer, head, best[2], 0].item(), abs=1e-6
        )


# ---- corpora ---------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def text_lm(tmp_path_factory):
    from minigpt.demo.core.models import load_language_model

    folder = save_fixture_model(
        tmp_path_factory.mktemp("text") / "m",
        printable_tokenizer(),
        seed=3,
        name="shakespeare",
        block_size=16,
        n_layer=2,
        n_head=2,
        n_embd=16,
    )
    return folder, load_language_model("m", str(folder), dict(max_rows=2, max_waiting=2))


def test_a_visitors_text_reads_as_windows_from_the_start_token(text_lm):
    from minigpt.demo.head_finder.corpus import text_corpus

    _, lm = text_lm
    text = "To be, or not to be, that is the question:\nWhether 'tis nobler in the mind to suffer"
    corpus = text_corpus(lm, text)
    ids = lm.tokenizer.encode(text, add_special_tokens=False)
    assert all(w[0] == lm.boundary_id and len(w) <= lm.block_size for w in corpus.windows)
    assert [t for w in corpus.windows for t in w[1:]] == ids
    assert corpus.starts_with_boundary and corpus.tokens == len(ids) + len(corpus.windows)


def test_a_runs_validation_windows_are_the_tail_of_its_text(text_lm, tmp_path):
    """A folder whose training_args.json names its data: the windows are the last tenth of the characters, cut as
    train.py cut them (windows of block_size, no start token); a folder whose data is gone: a built-in corpus, said."""
    import shutil

    from minigpt.demo.head_finder.corpus import default_corpus

    folder, lm = text_lm
    text = "".join(f"line {i}: the quick brown fox jumps over the lazy dog.\n" for i in range(200))
    (tmp_path / "data.txt").write_text(text)
    run = tmp_path / "run"
    shutil.copytree(folder, run)
    args = {"preset": "shakespeare", "dataset": str(tmp_path / "data.txt"), "val_fraction": 0.1, "seed": 1}
    (run / "training_args.json").write_text(json.dumps(args))
    corpus = default_corpus(lm, str(run))
    tail = lm.tokenizer.encode(text[int(len(text) * 0.9) :], add_special_tokens=False)
    whole = len(tail) // lm.block_size * lm.block_size
    assert [t for w in corpus.windows for t in w] == tail[:whole]
    assert "validation" in corpus.description and not corpus.starts_with_boundary

    (tmp_path / "data.txt").unlink()
    corpus = default_corpus(lm, str(run))
    assert "Shakespeare" in corpus.description and any("not on this machine" in n for n in corpus.notes)


def test_a_corpus_is_cut_to_the_token_budget_with_a_note(text_lm, monkeypatch):
    from minigpt.demo.head_finder import corpus as head_corpus

    _, lm = text_lm
    monkeypatch.setattr(head_corpus, "MOST_TOKENS", 100)
    corpus = head_corpus.text_corpus(lm, "abcdefghij" * 100)
    assert corpus.tokens == 100 and corpus.notes == ["Measured on the first 100 tokens of 1,067."]


# ---- the disk cache --------------------------------------------------------------------------------------------------


def test_the_cache_gives_the_same_numbers_and_is_dropped_when_the_weights_change(text_lm, tmp_path):
    from minigpt.demo.core.models import load_language_model
    from minigpt.demo.head_finder.corpus import text_corpus
    from minigpt.demo.head_finder.measures import CACHE_VERSION, MetricsStore

    folder, _ = text_lm
    run = tmp_path / "run"
    import shutil

    shutil.copytree(folder, run)
    lm = load_language_model("m", str(run), dict(max_rows=2, max_waiting=2))
    store = MetricsStore(tmp_path / "cache")
    corpus = text_corpus(lm, "to be or not to be, to be or not to be")
    first = store.measured(lm, str(run), corpus)
    again = store.measured(lm, str(run), corpus)
    assert not first["cached"] and again["cached"] and store.computed == 1
    assert {k: v for k, v in again.items() if k != "cached"} == json.loads(
        json.dumps({k: v for k, v in first.items() if k != "cached"})
    )

    with torch.no_grad():  # new weights, saved where the old were: the next server loads them
        lm.model.model.layers[0].attn.qkv_proj.weight.mul_(2.0)
    lm.model.save_pretrained(run)
    changed = load_language_model("m", str(run), dict(max_rows=2, max_waiting=2))
    measured = store.measured(changed, str(run), corpus)
    assert not measured["cached"] and store.computed == 2
    assert measured["metrics"]["entropy"] != first["metrics"]["entropy"]
    files = sorted(p.name for p in store.model_folder(changed, str(run)).iterdir())
    assert files == [f"{corpus.key}-v{CACHE_VERSION}.json", "weights"]  # the old weights' numbers are gone
    assert json.loads((store.model_folder(changed, str(run)) / files[0]).read_text())["weights"] == measured["weights"]


def test_concurrent_requests_measure_once_and_a_model_keeps_its_latest_corpora(text_lm, tmp_path, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    from minigpt.demo.head_finder import measures as head_finder
    from minigpt.demo.head_finder.corpus import text_corpus

    folder, lm = text_lm
    store = head_finder.MetricsStore(tmp_path / "cache")
    corpus = text_corpus(lm, "the same corpus, asked for four times at once")
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: store.measured(lm, str(folder), corpus), range(4)))
    assert store.computed == 1 and sum(not a["cached"] for a in answers) == 1
    assert all(a["metrics"] == answers[0]["metrics"] for a in answers)

    monkeypatch.setattr(head_finder, "KEPT_PER_MODEL", 2)
    keys = []
    for text in ("one corpus", "another corpus", "a third corpus"):
        keys.append(text_corpus(lm, text).key)
        store.measured(lm, str(folder), text_corpus(lm, text))
    kept = sorted(p.name for p in store.model_folder(lm, str(folder)).glob("*.json"))
    assert kept == sorted(f"{key}-v{head_finder.CACHE_VERSION}.json" for key in keys[1:])


# ---- the endpoints, through the running app ------------------------------------------------------------------------


def test_head_metrics_and_dashboard_through_the_api(client, fixture_models):
    names = fixture_models[0].name
    answer = call(client, "/head_metrics", model=names, text="emma\nolivia\nava\nisabella\nsophia\nmia")
    L, H = 4, 4
    assert answer["model"] == names and answer["corpus"]["windows"] == 6
    assert answer["corpus"]["tokens"] == sum(len(n) + 2 for n in ["emma", "olivia", "ava", "isabella", "sophia", "mia"])
    assert len(answer["heads"]) == L * H and all(len(answer["metrics"][m]) == L for m in answer["definitions"])
    for row in answer["heads"]:
        assert 0 <= row["previous_token"] <= 1 and row["entropy"] >= 0
    again = call(client, "/head_metrics", model=names, text="emma\nolivia\nava\nisabella\nsophia\nmia")
    assert again["cached"] and again["metrics"] == answer["metrics"]

    board = call(client, "/head_dashboard", model=names, layer=1, head=2, text="emma\nolivia\nava", map_text="anna")
    assert board["layer"] == 1 and board["head"] == 2 and board["map"]["tokens"] == [".", "a", "n", "n", "a"]
    assert len(board["map"]["weights"]) == 5 and abs(sum(board["map"]["weights"][4]) - 1) < 1e-5
    for example in board["examples"]:
        shown = [item for segment in example["segments"] for item in segment]
        assert shown[-1]["position"] == example["query"]

    assert "layer must be 0 to 3, got 9" in app_error(client, "/head_dashboard", model=names, layer=9)
    assert "does not know these characters" in app_error(client, "/head_metrics", model=names, text="émile")
    blank = call(client, "/head_metrics", model=names, text="\n \n")  # no text: the model's own (here: built-in names)
    assert blank["corpus"]["description"] == "the built-in held-out names" and blank["corpus"]["windows"] == 1000


@needs_chromium
def test_sort_by_a_metric_open_the_top_head_and_see_its_dashboard(page_url):
    from playwright.sync_api import expect

    with chromium_page() as page:
        page.goto(page_url)
        expect(page.locator("#attention-grid svg[data-layer]")).to_have_count(20)
        page.locator("#head-finder").get_by_text("Head Finder").first.click()
        page.locator("#finder-corpus textarea").fill("emma\nolivia\nava\nisabella\nsophia\nmia\nharper\nevelyn")
        page.locator("#finder-measure").click()
        table = page.locator("#head-finder-table table")
        expect(table.locator("tbody tr")).to_have_count(16)
        table.locator("th", has_text="previous").click()
        values = table.locator("tbody tr td:nth-child(4)").evaluate_all(
            "cells => cells.map(c => Number(c.dataset.value))"
        )
        assert values == sorted(values, reverse=True)
        top = table.locator("tbody tr").first
        layer, head = top.get_attribute("data-layer"), top.get_attribute("data-head")
        top.click()
        board = page.locator("#head-dashboard .dashboard")
        expect(board.locator("h3")).to_have_text(f"Layer {layer}, head {head}")
        expect(board).to_contain_text("previous")
        expect(board.locator("svg.histogram rect").first).to_be_attached()
        expect(board.locator(".snippet").first).to_be_visible()
        assert page.locator("#head-dashboard .stale-note").count() == 0

        # Another text shown: the dashboard (its map is of the text) says it is out of date; the table, measured on
        # the model's corpus, holds for any text of that model (it is greyed only when another model is shown).
        page.get_by_label("Text to look at (filled in by each generation)").fill("olivia")
        page.get_by_role("button", name="Show attention").click()
        expect(page.locator("#head-dashboard .stale-note")).to_contain_text("computed for “emma” on tiny-names")
        finder = page.locator("#head-finder-table .view-of")
        expect(finder).to_have_attribute("data-model-view", "tiny-names")
        expect(finder).to_have_attribute("data-label", "the tiny-names model and its corpus")
        assert page.locator("#head-finder-table .stale-note").count() == 0


def test_the_specimens_head_1_1_is_said_with_what_each_role_was_measured_on(client):
    """Issue 41: the Finder and lesson step 11 disagreed without a word why (the Finder: "sink"; the lesson: induction
    0.91). Both measures are in the dashboard now, each with what it was measured on, in the Head roles' words: a
    sink on prose (the opening of the plays, measured as a corpus), an induction head on random tokens written
    twice."""
    from minigpt import data
    from minigpt.demo.head_finder.view import role_sentence
    from minigpt.heads.role_scores import above_chance

    prose = data.builtin_shakespeare().read_text()[:6_000]  # the plays' opening: prose with little to copy
    answer = call(client, "/head_dashboard", model="specimen", layer=1, head=1, text=prose)
    assert "sink" in answer["roles"] and "induction" not in answer["roles"]
    assert above_chance(answer["probe"]["induction"], answer["probe"]["chance"])  # ~0.91 against ~0.07
    sentence = role_sentence(answer)
    assert sentence.startswith(f"On {answer['corpus']['description']} it is a sink head (it rests on the first token)")
    assert f"its induction is {answer['probe']['induction']:.2f}" in sentence
    assert "it copies when something repeats" in sentence and "little to copy" in sentence


@pytest.fixture(scope="module")
def fixture_lms(fixture_models):
    from minigpt.demo.core.models import load_language_model

    names, text = fixture_models
    batching = dict(max_rows=2, max_waiting=2)
    return load_language_model("tiny-names", str(names), batching), load_language_model(
        "tiny-text", str(text), batching
    )


def test_a_corpus_has_one_limit_and_only_its_measured_start_is_tokenized(fixture_lms, monkeypatch):
    """A million characters are accepted (the README's limit) and one more refused, with the same number; a text of
    940,000 characters or a names corpus of one such line is measured on its start, and of 190,000 names only those
    the token budget holds are tokenized."""
    from minigpt.demo.head_finder import corpus as head_corpus

    names_lm, text_lm = fixture_lms
    limit = head_corpus.MAX_CORPUS_CHARS
    assert limit == 1_000_000
    with pytest.raises(VisitorError, match="at most 1,000,000 are accepted"):
        head_corpus.text_corpus(text_lm, "a" * (limit + 1))
    budget = head_corpus.token_budget(text_lm.model)
    corpus = head_corpus.text_corpus(text_lm, "to be or not to be " * 49_500)  # 940,500 characters
    assert corpus.tokens == budget and corpus.notes == [f"Measured on the first {budget:,} tokens of your text."]
    one_line = head_corpus.text_corpus(names_lm, "emma" * 235_000)  # a names corpus that is one long line
    assert len(one_line.windows) == 1 and one_line.tokens == names_lm.block_size

    encoded = []
    monkeypatch.setattr(head_corpus, "encode", lambda lm, text, what: encoded.append(text) or [1] * len(text))
    many = head_corpus.text_corpus(names_lm, "liam\n" * 190_000)  # 950,000 characters
    assert many.tokens == head_corpus.token_budget(names_lm.model)
    assert len(encoded) < 2 * many.tokens / 6  # each name is a window of 6 tokens: only about the budget's are read


def test_a_model_with_costly_attention_is_measured_within_the_bound_on_fewer_tokens(tmp_path):
    """Audit 3's model (12 layers x 16 heads, width 32, context 256: few parameters, many attention cells) took 62.9 s
    under the parameter-count bound. Its corpus is now cut so that the estimated work, counted over every window's
    attention (L x H x T^2 cells) and the (L x H + 1) ablation passes, fits the two bounds."""
    from helpers import printable_tokenizer, save_fixture_model
    from minigpt.demo.core import work_budgets
    from minigpt.demo.core.models import load_language_model
    from minigpt.demo.head_finder import corpus as head_corpus

    shape = dict(name="shakespeare", n_layer=12, n_head=16, n_embd=32, block_size=256)
    folder = save_fixture_model(tmp_path / "wide-attention", printable_tokenizer(), seed=0, **shape)
    lm = load_language_model("wide-attention", str(folder), dict(max_rows=2, max_waiting=2))
    head_corpus.check_measurable(lm)  # one window fits: measured, on fewer tokens
    corpus = head_corpus.text_corpus(lm, "to be or not to be, that is the question. " * 2_000)
    config, ablated = lm.model.config, work_budgets.ablation_windows(lm.model, corpus.windows)
    recording = sum(work_budgets.recording_work(config, len(w)) for w in corpus.windows) / work_budgets.WORK_PER_SECOND
    ablation = sum(work_budgets.ablation_work(config, len(w)) for w in ablated) / work_budgets.WORK_PER_SECOND
    assert recording <= work_budgets.RECORD_SECONDS and ablation <= work_budgets.ABLATION_SECONDS
    assert work_budgets.measure_seconds(config, corpus.windows, ablated) == pytest.approx(recording + ablation)
    # the costly part, the ablation, reads the first tokens only, and they fill most of its bound (not cut to nothing)
    assert sum(map(len, ablated)) < corpus.tokens and ablation > work_budgets.ABLATION_SECONDS / 2
    # a window's cells are counted: the same tokens in windows of the full context cost more than in short ones
    assert work_budgets.recording_work(config, 256) > 4 * work_budgets.recording_work(config, 64)


def test_a_model_too_big_to_measure_gets_its_estimate_before_any_corpus_is_read(monkeypatch):
    """GPT-2 XL's shape: one window of its context alone is over the bound. The refusal names the estimate, in well
    under a second (nothing is built: the shape is all it reads), and no corpus is made."""
    from types import SimpleNamespace

    from minigpt.demo.head_finder import corpus as head_corpus
    from minigpt.demo.head_finder import endpoints
    from modeling_minigpt import MiniGPTConfig

    config = MiniGPTConfig(n_layer=48, n_head=25, n_embd=1600, block_size=1024, vocab_size=50257)
    lm = SimpleNamespace(name="gpt2-xl", model=SimpleNamespace(config=config))
    monkeypatch.setattr(endpoints, "text_corpus", lambda *a: pytest.fail("a corpus was built"))
    with pytest.raises(VisitorError, match=r"Measuring every head of gpt2-xl would take about [\d,]+ s") as refused:
        endpoints.HeadFinder(state=None).corpus_for(lm, "a text")
    assert f"at most {head_corpus.RECORD_SECONDS} s" in str(refused.value)
