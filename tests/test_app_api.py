"""The demo's API, as a gradio_client user sees it: app.py runs as a server on 127.0.0.1 with two tiny fixture models
(random weights, built by helpers.build_fixture_models, so the results depend on nothing trained), offline, and never
reaches the network."""

import re
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from helpers import (
    LOWERCASE,
    REPO,
    app_error,
    call,
    char_tokenizer,
    gradio_client,
    running_app,
    server_log,
    stream,
)

# ---- tests (fixture_models, server, client: conftest.py) ------------------------------------------------------------


def new_tokens(notes: str) -> int:
    return int(re.search(r"^- (\d+) new tokens", notes, re.MULTILINE).group(1))


def test_api_lists_the_named_endpoints_with_their_parameters(client):
    api = client.view_api(print_info=False, return_format="dict")["named_endpoints"]
    parameters = {name: [p["parameter_name"] for p in info["parameters"]] for name, info in api.items()}
    assert parameters["/names"][:6] == ["prefix", "count", "temperature", "top_k", "top_p", "seed"]
    assert parameters["/text"][:6] == ["prompt", "max_new_tokens", "temperature", "top_k", "top_p", "seed"]
    assert parameters["/attention"] == ["text", "model"]
    for name in ("/names", "/text", "/attention"):  # every parameter may be left out
        assert all(p["parameter_has_default"] for p in api[name]["parameters"]), name


def test_names_start_with_the_prefix_and_use_only_letters(client):
    names, notes = call(client, "/names", prefix="em", count=12, seed=3)
    names = names.split("\n")
    assert len(names) == 12
    assert all(n.startswith("em") and set(n) <= set(LOWERCASE) for n in names)
    assert "seed" not in notes.lower()  # a chosen seed is not reported as a random one


def test_same_seed_same_output_and_other_seed_other_output(client):
    first = call(client, "/names", count=20, seed=7)[0]
    assert call(client, "/names", count=20, seed=7)[0] == first
    assert call(client, "/names", count=20, seed=8)[0] != first
    text = stream(client, prompt="to be", max_new_tokens=40, seed=7)[-1][0]
    assert stream(client, prompt="to be", max_new_tokens=40, seed=7)[-1][0] == text


def test_random_seed_is_reported_and_reproduces(client):
    names, notes = call(client, "/names", count=5)
    seed = int(notes.split("set the seed to ")[1].split()[0])
    assert call(client, "/names", count=5, seed=seed)[0] == names


def test_text_streams_as_it_grows_past_the_context(client):
    # The fixture's context is 32 tokens: 60 new tokens must slide past it. The prompt comes first, then the first
    # token at once, then the tokens written since the last update (paced: at most 25 updates a second).
    partials = stream(client, prompt="ab", max_new_tokens=60, temperature=1.0, seed=1)
    texts = [p[0] for p in partials]
    assert texts[0] == "ab" and len(set(texts)) >= 3  # shown as it grows
    assert all(later.startswith(earlier) for earlier, later in zip(texts, texts[1:]))
    final_notes = partials[-1][1]
    assert "new tokens" in final_notes
    generated = new_tokens(final_notes)
    assert generated == 60 or "end-of-text" in final_notes


def test_greedy_text_matches_the_model_argmax_past_the_context(client, fixture_models):
    """Temperature 0 gives the model's own greedy continuation, checked against a plain loop that runs the model on
    the whole window every step (no cache): 50 tokens after 'hello' cross the 32-token context twice, where the
    window keeps its last 24 tokens."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = fixture_models[1]
    model, tokenizer = AutoModelForCausalLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)
    window = [tokenizer.bos_token_id] + tokenizer.encode("hello", add_special_tokens=False)
    new = []
    with torch.no_grad():
        while len(new) < 50:
            logits = model(torch.tensor([window]), use_cache=False).logits[0, -1]
            logits[tokenizer.pad_token_id] = float("-inf")  # the pad is never generated
            next_id = int(logits.argmax())
            if next_id == tokenizer.eos_token_id:
                break
            new.append(next_id)
            window = (window + [next_id])[-24:] if len(window) == 32 else window + [next_id]
    text, notes = stream(client, prompt="hello", max_new_tokens=50, temperature=0)[-1]
    assert text == "hello" + tokenizer.decode(new)
    assert len(new) > 40 and "greedy" in notes


def test_empty_prompt_starts_from_the_boundary_token(client):
    text, notes = stream(client, prompt="", max_new_tokens=5, seed=2)[-1]
    assert "<|endoftext|>" in notes and "Empty prompt" in notes
    assert len(text) <= 5


def test_long_prompt_keeps_the_last_context_tokens_and_says_so(client):
    prompt = "".join(LOWERCASE[i % 26] for i in range(10_000))
    text, notes = stream(client, prompt=prompt, max_new_tokens=3, seed=0)[-1]
    assert "10001 tokens" in notes and "kept the last 32" in notes  # 10,000 characters + the boundary token
    assert text.startswith(prompt[-32:])


@pytest.mark.parametrize(
    "endpoint, params, message",
    [
        ("/names", dict(prefix="Zoë"), "'ë' (LATIN SMALL LETTER E WITH DIAERESIS)"),
        ("/names", dict(prefix="an 1"), "' ' (SPACE), '1' (DIGIT ONE)"),
        ("/names", dict(prefix="🙂"), "'🙂' (SLIGHTLY SMILING FACE)"),
        ("/text", dict(prompt="hi 🙂"), "'🙂' (SLIGHTLY SMILING FACE)"),
        ("/attention", dict(text="é"), "LATIN SMALL LETTER E WITH ACUTE"),
        ("/names", dict(temperature=-1), "Temperature must be 0 or more, got -1"),
        ("/names", dict(count="many"), "Number of names must be a number, got 'many'"),
        ("/names", dict(top_k=-3), "top-k must be 0 (off)"),
        ("/names", dict(top_p=0), "top-p must be above 0"),
        ("/text", dict(top_p=1.5), "top-p must be above 0 and at most 1, got 1.5"),
        ("/names", dict(prefix="abcdefghijklmnop"), "use at most 14 characters"),
        ("/names", dict(model="no-such-model"), "no-such-model"),
    ],
)
def test_bad_input_gives_a_clear_error(client, endpoint, params, message):
    error = app_error(client, endpoint, **params)
    assert message in error
    assert "Traceback" not in error


def test_unknown_characters_are_listed_with_the_known_ones(client):
    error = app_error(client, "/names", prefix="Ann-Marie")
    assert "'-' (HYPHEN-MINUS)" in error and "abcdefghijklmnopqrstuvwxyz" in error
    assert "'A'" in error  # this fixture tokenizer does not lower-case


@pytest.mark.parametrize(
    "params, note, expected_count",
    [
        (dict(count=0), "Number of names 0 is outside 1..100: used 1.", 1),
        (dict(count=10**6), "Number of names 1000000 is outside 1..100: used 100.", 100),
        (dict(top_k=10**4), "keeps them all (off)", 10),
        (dict(temperature=0, count=3), "greedy", 3),
    ],
)
def test_out_of_range_values_are_clamped_and_said(client, params, note, expected_count):
    names, notes = call(client, "/names", **{"count": 10, "seed": 1, **params})
    assert note in notes
    assert len(names.split("\n")) == expected_count
    if params.get("temperature") == 0:
        assert len(set(names.split("\n"))) == 1


@pytest.mark.parametrize("max_new_tokens, used", [(0, 1), (10**9, 500)])
def test_max_new_tokens_is_clamped_and_said(client, max_new_tokens, used):
    text, notes = stream(client, prompt="a", max_new_tokens=max_new_tokens, temperature=1.0, seed=5)[-1]
    assert f"outside 1..500: used {used}" in notes
    generated = new_tokens(notes)
    assert generated <= used and (generated == used or "end-of-text" in notes)


def test_top_k_1_is_greedy(client):
    assert call(client, "/names", count=4, top_k=1, seed=1)[0] == call(client, "/names", count=4, temperature=0)[0]


def test_attention_endpoint_shapes_and_maps(client):
    notes, grid, large, trace, layer, head = call(client, "/attention", text="emma")
    assert "6 tokens: . e m m a" not in notes  # 'emma' gets the boundary in front: 5 tokens
    assert "5 tokens: . e m m a" in notes
    assert grid.count("<svg") == 4 * (4 + 1)  # 4 layers x (4 heads + their average)
    assert large.count("<figure data-layer") == 2  # the chosen head and the average of its layer
    assert "data-weights" not in large  # hover values are read from the server, not carried by the page
    rows = {row[0]: row[3] for row in trace["data"]}
    assert rows["input x (after attn_norm)"] == "(1, 5, 64)"
    assert rows["fused Q/K/V projection"] == "(1, 5, 192)"
    assert rows["Q, K, V before the split"] == "(1, 5, 64)"
    assert rows["after the split into heads"] == "(1, 4, 5, 16)"
    assert rows["scores"] == rows["weights"] == "(1, 4, 5, 5)"
    assert rows["weighted sum of values"] == "(1, 4, 5, 16)"
    assert rows["after merging the heads"] == rows["after the output projection"] == "(1, 5, 64)"


def test_attention_of_a_text_model_keeps_its_context(client):
    notes, grid, *_ = call(client, "/attention", text="x" * 100, model="tiny-text")
    assert "101 tokens" in notes and "kept the last 32" in notes
    assert grid.count("<svg") == 2 * (2 + 1)


def test_sixteen_concurrent_clients_all_get_their_own_seeded_output(server):

    client = gradio_client(server[0])
    expected_names = {seed: call(client, "/names", count=5, seed=seed)[0] for seed in range(8)}
    expected_text = {seed: stream(client, prompt="th", max_new_tokens=30, seed=seed)[-1][0] for seed in range(8)}

    def request(i: int):
        own = gradio_client(server[0])
        if i % 2:
            return "text", i // 2, stream(own, prompt="th", max_new_tokens=30, seed=i // 2)[-1][0]
        return "names", i // 2, call(own, "/names", count=5, seed=i // 2)[0]

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(request, range(16)))
    for kind, seed, output in results:
        assert output == (expected_names if kind == "names" else expected_text)[seed], (kind, seed)


def test_server_made_no_network_call_and_binds_loopback(server):
    url, process = server
    log = server_log(process)
    assert "NETWORK CALL" not in log
    assert f"Running on local URL:  {url.rstrip('/')}" in log
    assert "public URL" not in log  # never share=True


# ---- in process: where the maps come from, and how they are drawn ---------------------------------------------------


def test_maps_are_the_eager_weights_of_the_sdpa_loaded_model(fixture_models):
    """The app loads once, with sdpa, and its maps equal those of the same weights loaded for eager attention."""
    from transformers import AutoModelForCausalLM

    from minigpt.demo.core.limits import BATCHING
    from minigpt.demo.core.models import load_language_model
    from minigpt.heads.recorded_pass import run_forward_pass
    from minigpt.heads.shapes import trace_steps

    lm = load_language_model("names", str(fixture_models[0]), BATCHING)
    assert lm.model.config._attn_implementation == "sdpa"
    ids = [0, 5, 13, 13, 1, 0]  # . e m m a .
    recorded = run_forward_pass(lm.model, ids)
    weights = recorded.attentions
    eager = AutoModelForCausalLM.from_pretrained(fixture_models[0], attn_implementation="eager").eval()
    with torch.no_grad():
        expected = torch.stack(eager(torch.tensor([ids]), output_attentions=True).attentions, dim=1)[0]  # (L, H, T, T)
    assert weights.shape == (4, 4, 6, 6)
    torch.testing.assert_close(weights, expected)
    torch.testing.assert_close(weights.sum(-1), torch.ones(4, 4, 6))
    assert (weights.triu(1) == 0).all()  # no token looks ahead
    trace = trace_steps(lm.model.model.layers[2].attn, recorded, layer=2)
    assert [s.shape for s in trace][:2] == [(1, 6, 64), (1, 6, 192)]


def test_the_pad_token_is_never_generated(fixture_models):
    """A random model would write its pad token about once in 28 tokens: none in 100 names and 200 tokens of text."""
    from minigpt.demo.core.limits import BATCHING
    from minigpt.demo.core.models import load_language_model
    from minigpt.demo.core.serving import Sampling

    names_lm = load_language_model("names", str(fixture_models[0]), BATCHING)
    pad = names_lm.tokenizer.pad_token_id
    assert names_lm.never_ids == [pad]
    samples = names_lm.batcher.generate([0], 15, Sampling(1.0, 0, 1.0, seed=0), rows=100)
    assert sum(map(len, samples)) > 300 and not any(pad in s for s in samples)
    text_lm = load_language_model("text", str(fixture_models[1]), BATCHING)
    tokens = text_lm.batcher.generate([0], 200, Sampling(1.0, 0, 1.0, seed=0))[0]
    assert text_lm.tokenizer.pad_token_id not in tokens


def test_unknown_characters_whatever_the_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from minigpt.tokenization import unknown_characters

    allowed = lambda tokenizer, text: unknown_characters(tokenizer, text, allow_special_tokens=True)  # as app does
    chars = char_tokenizer(LOWERCASE, ".")
    assert allowed(chars, "zoë 🙂.") == [" ", "ë", "🙂"]  # '.' is the boundary token itself
    assert unknown_characters(chars, "zoë 🙂.") == [" ", ".", "ë", "🙂"]  # in training data it is not a letter
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer, bpe.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(["hello world"] * 10, trainer=trainer)
    assert allowed(PreTrainedTokenizerFast(tokenizer_object=bpe), "zoë 🙂") == []  # bytes cover all
    with_unk = Tokenizer(models.WordLevel({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
    with_unk.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    with_unk = PreTrainedTokenizerFast(tokenizer_object=with_unk, unk_token="[UNK]")
    assert allowed(with_unk, "ab") == unknown_characters(with_unk, "ab") == ["b"]
    assert unknown_characters(with_unk, "a[UNK]") == ["K", "N", "U", "[", "]"]  # not a way to smuggle an unknown in


def test_heatmap_pixels_are_the_weights_and_the_mask_is_grey():
    import base64
    import io

    from PIL import Image

    from minigpt.demo.core.attention_maps import COLOURS, MASKED_RGB, heatmap_png

    uri = heatmap_png(torch.tensor([[1.0, 0.0], [0.25, 0.75]]).numpy())  # colour: square root of the weight
    pixels = Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))).convert("RGB")
    assert pixels.size == (2, 2)
    assert pixels.getpixel((0, 0)) == tuple(COLOURS[255])  # column (key) first in PIL: query 0 looks at itself
    assert pixels.getpixel((1, 0)) == MASKED_RGB  # query 0 cannot see key 1
    assert pixels.getpixel((0, 1)) == tuple(COLOURS[128]) and pixels.getpixel((1, 1)) == tuple(COLOURS[221])


SHIPPED = [REPO / "minigpt" / "models" / "names", REPO / "minigpt" / "models" / "shakespeare"]


def test_plain_python_app_py_serves_the_shipped_models_offline():
    """`python app.py` as a Space runs it: the shipped models, no download, no network call."""

    with running_app() as (url, process):
        client = gradio_client(url)
        names, _ = call(client, "/names", prefix="an", count=5, seed=0)
        assert all(n.startswith("an") for n in names.split("\n"))
        text, _ = stream(client, prompt="ROMEO:", max_new_tokens=20, seed=0)[-1]
        assert text.startswith("ROMEO:") and len(text) > len("ROMEO:")
        notes, grid, *_ = call(client, "/attention", text="to be, or not", model="shakespeare")
        assert grid.count("<svg") > 0
        assert "NETWORK CALL" not in server_log(process)
