"""The circuits section through a running server: its endpoints on the shipped specimen model reproduce the induction
circuit (1.1 writes the answer, patching it restores the answer, path patching its key restores its attention, ablating
0.2 fades its stripe, 0.2 -> 1.1 K-composition barely above the baseline); a visitor's mistakes get messages that say
what to change, with nothing in the log; and in Chromium the section draws its views and a click on a head works."""

import re

import pytest
import torch

import modeling_minigpt  # noqa: F401 (registers MiniGPT with the Auto classes: the specimen fixture loads it)
from helpers import REPO, app_error, call, chromium_page, needs_chromium, raw_error, server_log

# server (the app on the fixture models; the shipped ones, the specimen among them, are offered too), client:
# conftest.py

ENDPOINTS = {
    "/logit_attribution": ["text", "model", "position", "token", "other_token", "prompts"],
    "/patching": [
        "text", "corrupted_text", "model", "sender", "receiver", "receiver_input", "key_position", "part",
        "intermediate", "prompts", "exact_cell",
    ],
    "/composition": ["model"],
    "/head_circuit": ["text", "model", "layer", "head", "ablate", "source", "ablation"],
    "/circuit_walk": ["text", "model"],
}  # fmt: skip
ROMEO, ROMEO_CORRUPTED = "Romeo and Juliet, Romeo and Jul", "Romeo and Julaet, Romeo and Jul"
ZORBAK, ZORBAK_CORRUPTED = "Then Zorbak spoke. Then Zor", "Then Zoxbak spoke. Then Zor"


def test_endpoints_are_listed_with_their_parameters(client):
    api = client.view_api(print_info=False, return_format="dict")["named_endpoints"]
    for name, parameters in ENDPOINTS.items():
        assert [p["parameter_name"] for p in api[name]["parameters"]] == parameters, name
        assert all(p["parameter_has_default"] for p in api[name]["parameters"]), name


@pytest.fixture(scope="module")
def specimen():
    """The shipped specimen loaded here: the reference the endpoints' numbers must equal (minigpt.heads.circuits on
    the same weights)."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(REPO / "minigpt" / "models" / "specimen").eval()


# The server and this process compute the same float32 operations, possibly summed in another order (thread counts):
# logits of size ~10 agree to ~1e-5 relative; effects and attention weights (ratios and probabilities) to ~1e-5.
CLOSE = 1e-4


def test_attribution_names_head_1_1_as_the_writer_of_the_answer(client, specimen):
    from minigpt.heads.circuits import logit_attribution

    answer = call(client, "/logit_attribution", text=ROMEO, model="specimen")
    assert answer["model"] == "specimen" and len(answer["ids"]) == len(answer["tokens"]) == 32
    assert answer["token"]["token"] == "i" and answer["position"] == 31
    heads = answer["heads"]
    assert max((v, layer, h) for layer, row in enumerate(heads) for h, v in enumerate(row))[1:] == (1, 1)
    reference = logit_attribution(specimen, answer["ids"])
    assert torch.tensor(heads).allclose(reference.heads, atol=CLOSE)
    total = sum(c["value"] for c in answer["components"]) + answer["bias_term"]
    assert total == pytest.approx(answer["logit"], abs=1e-3)  # the components add up to the logit
    other = call(client, "/logit_attribution", text=ROMEO, model="specimen", token="i", other_token="a")
    assert other["other_token"]["token"] == "a" and other["logit"] < answer["logit"]


def test_patching_head_1_1_restores_the_answer_and_its_key_carries_the_circuit(client, specimen):
    from minigpt.heads.circuits import patch_heads, patch_path, patch_two_step

    answer = call(client, "/patching", text=ROMEO, corrupted_text=ROMEO_CORRUPTED, model="specimen")
    assert answer["model"] == "specimen" and answer["corrupted_ids"] != answer["ids"]
    assert answer["clean_answer"]["token"] == "i" and answer["corrupted_answer"]["token"] != "i"
    reference = patch_heads(specimen, answer["ids"], answer["corrupted_ids"])
    assert torch.tensor(answer["heads"]).allclose(reference.effects, atol=CLOSE)
    assert answer["heads"][1][1] > 0.9 and answer["heads"][1][1] == max(max(row) for row in answer["heads"])
    assert len(answer["residual"]) == 2 and len(answer["residual"][0]) == 32
    assert answer["residual"][0][14] > 0.9  # the changed letter's stream, entering layer 0, carries everything
    zorbak = call(
        client, "/patching", text=ZORBAK, corrupted_text=ZORBAK_CORRUPTED, model="specimen", receiver="1.1",
        sender="0.2", intermediate="mlp 0", receiver_input="k",
    )  # fmt: skip
    path = zorbak["path"]
    assert path["key_position"] == 9 and path["key_token"] == "b"
    assert path["senders"] == ["embed", "0.0", "0.1", "0.2", "0.3", "mlp 0", "resid 1"] and path["inputs"] == list(
        "qkv"
    )
    for row in path["paths"]:  # every cell is the library's path patching of that sender into that input
        expected = patch_path(specimen, zorbak["ids"], zorbak["corrupted_ids"], row["sender"], (1, 1), row["input"], 9)
        assert row["effect"] == pytest.approx(expected.effect, abs=CLOSE), (row["sender"], row["input"])
        assert row["attention_patched"] == pytest.approx(expected.attention_patched, abs=CLOSE)
    two = patch_two_step(specimen, zorbak["ids"], zorbak["corrupted_ids"], "0.2", "mlp 0", (1, 1), "k", 9)
    assert path["two_step"]["effect"] == pytest.approx(two.effect, abs=CLOSE)
    # The words name what the grid measured: the key carries it, MLP 0 feeds it, 0.2 reaches it through MLP 0.
    findings = " ".join(zorbak["findings"])
    assert "+1.02 through its key" in findings and "mlp 0 +0.64" in findings and "0.2 → mlp 0 → 1.1's key" in findings


def test_an_empty_corrupted_text_is_one_token_changed_for_you(client):
    answer = call(client, "/patching", text=ROMEO, model="specimen")
    proposed = [note for note in answer["notes"] if "Romeo and Ju" in note]
    assert proposed, answer["notes"]
    changed = [(a, b) for a, b in zip(answer["ids"], answer["corrupted_ids"]) if a != b]
    assert len(changed) == 1 and len(answer["corrupted_ids"]) == len(answer["ids"])  # one token, and only one
    assert answer["heads"][1][1] > 0.9


def test_composition_is_barely_above_the_baseline_and_ablating_0_2_fades_the_stripe(client, specimen):
    from minigpt.heads.circuits import composition_baseline, composition_scores

    answer = call(client, "/composition", model="specimen")
    assert answer["model"] == "specimen"
    assert answer["baseline"] == pytest.approx(composition_baseline(specimen, "k"), abs=CLOSE)
    k = torch.tensor(answer["scores"]["k"])
    assert k.allclose(composition_scores(specimen, "k"), atol=CLOSE)
    # Barely above the baseline: the weights alone hardly single out the previous-token head 0.2 for 1.1's keys.
    assert answer["baseline"] < k[0, 2, 1, 1] < 2 * answer["baseline"]
    strongest = answer["strongest"][0]
    assert strongest["score"] == pytest.approx(max(e["score"] for e in answer["strongest"]))
    head = call(client, "/head_circuit", text=ROMEO, model="specimen", layer=1, head=1, ablate="0.2")
    assert head["model"] == "specimen" and len(head["ids"]) == 32
    assert head["ov"]["source"] == "effective" and len(head["ov"]["tokens"]) == 79
    assert head["ov"]["copying_score"] > 0.9 > 0.5 > head["ov"]["baseline"]["positive_share"]
    ablation = head["ablation"]
    assert ablation["induction_before"] > 0.1 and ablation["induction_after"] < ablation["induction_before"] / 10
    assert len(ablation["before"]) == len(ablation["after"]) == 32


def test_each_part_prompt_sets_and_positions_are_the_librarys_numbers(client, specimen):
    """part= patches one part of each head (the library's patch_heads with that part); prompts= averages the text and
    its variants (the library on each variant, averaged here); each head at each position on the text alone."""
    from minigpt.heads import patch_heads, variants

    answer = call(client, "/patching", text=ROMEO, corrupted_text=ROMEO_CORRUPTED, model="specimen", part="v")
    expected = patch_heads(specimen, answer["ids"], answer["corrupted_ids"], part="v").effects
    assert torch.tensor(answer["heads"]).allclose(expected, atol=CLOSE) and answer["part"] == "v"
    assert len(answer["heads_by_position"][1][1]) == len(answer["ids"])
    assert answer["corrupted_text"] == ROMEO_CORRUPTED and answer["differing_positions"] == [14]
    over = call(client, "/patching", text=ROMEO, corrupted_text=ROMEO_CORRUPTED, model="specimen", prompts=4)
    assert over["prompts"]["count"] + over["prompts"]["left_out"] == 4 and over["heads_by_position"] is None
    config = specimen.config
    special = {config.bos_token_id, config.eos_token_id, config.pad_token_id}  # the boundary, end and padding tokens
    allowed = [t for t in range(config.vocab_size) if t not in special]
    pairs = variants([answer["ids"], answer["corrupted_ids"]], 4, allowed, special)
    effects = []
    for clean, corrupted in pairs.tolist():
        try:
            effects.append(patch_heads(specimen, clean, corrupted).effects)
        except ValueError:  # the variant's answer does not change: left out, as the endpoint counts it
            continue
    assert len(effects) == over["prompts"]["count"]
    assert torch.tensor(over["heads"]).allclose(torch.stack(effects).mean(0), atol=CLOSE)
    assert "over the text and 3 variants of it" in over["prompts"]["described"] or over["prompts"]["left_out"]


def test_the_sentences_follow_the_numbers(client):
    """The findings are written from the answer: the head named is the grid's largest, the input the whole stream's
    largest; on the other pair the other input is named."""
    romeo = call(client, "/patching", text=ROMEO, corrupted_text=ROMEO_CORRUPTED, model="specimen", receiver="1.1")
    zorbak = call(client, "/patching", text=ZORBAK, corrupted_text=ZORBAK_CORRUPTED, model="specimen", receiver="1.1")
    for answer, carrying in ((romeo, "value"), (zorbak, "key")):
        best = max((v, f"{layer}.{head}") for layer, row in enumerate(answer["heads"]) for head, v in enumerate(row))
        assert f"head {best[1]} restores {best[0]:.0%}" in answer["findings"][0]
        assert f"what 1.1's {carrying} reads" in " ".join(answer["findings"])
    assert "what 1.1's key reads" not in " ".join(romeo["findings"])


def test_one_head_reads_through_earlier_layers_and_each_ablation_puts_in_its_own(client, specimen):
    from minigpt.heads import copying_score, ov_circuit

    common = dict(text=ROMEO, model="specimen", layer=1, head=1, ablate="0.2")
    bare = call(client, "/head_circuit", **common, source="bare")
    assert bare["ov"]["source"] == "bare"
    assert bare["ov"]["copying_score"] == pytest.approx(
        copying_score(ov_circuit(specimen, 1, 1, source="bare")), abs=CLOSE
    )
    assert bare["token_qk"]["matching"] > 0.9 and bare["token_qk"]["chance"] == pytest.approx(1 / 77)
    afters = {
        mode: call(client, "/head_circuit", **common, ablation=mode)["ablation"]
        for mode in ("zero", "mean", "resample")
    }
    assert {mode: a["mode"] for mode, a in afters.items()} == {"zero": "zero", "mean": "mean", "resample": "resample"}
    assert len({round(a["induction_after"], 6) for a in afters.values()}) == 3  # three different replacements
    layer0 = call(client, "/head_circuit", text=ROMEO, model="specimen", layer=0, head=2)
    assert layer0["token_qk"] is None and "cannot match a key's previous token" in " ".join(layer0["findings"])


def next_probabilities(model, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return torch.softmax(model(torch.tensor([ids])).logits[0, -1].float(), dim=-1)


def test_the_circuit_walk_finds_the_specimens_circuit_in_its_numbers(client, specimen):
    """On the Zorbak text: the model copies (its premise, checked first); 1.1 writes and carries the answer, and
    mean-ablated it lowers the answer's probability; with the copied token changed the value carries it, with the
    token before it changed the key; 0.2 reaches the key through MLP 0; heads 0.0, 0.2 and 1.1 are needed."""
    from minigpt.heads import ablated_pass, run_forward_pass

    walk = call(client, "/circuit_walk", text=ZORBAK, model="specimen")
    steps = walk["steps"]
    names = ["prediction", "writer", "carrier", "input", "route", "input", "route", "needed"]
    assert [s["name"] for s in steps] == names
    probabilities = next_probabilities(specimen, walk["ids"])
    assert steps[0]["copies"] and steps[0]["token"] == steps[0]["copied"] == int(probabilities.argmax())
    assert f"({float(probabilities.max()):.2f}), the token that followed the repeated end" in steps[0]["finding"]
    assert steps[1]["head"] == steps[2]["head"] == "1.1" and steps[1]["share"] >= 0.1
    before, after = steps[2]["ablated"]
    ablated = ablated_pass(specimen, run_forward_pass(specimen, walk["ids"]), [(1, 1)], "mean").logits(specimen, -1)
    assert before == pytest.approx(float(probabilities.max()), abs=CLOSE)
    assert after == pytest.approx(float(torch.softmax(ablated.float(), -1)[steps[0]["token"]]), abs=CLOSE)
    assert after < before and f"lowers p('b') from {before:.2f} to {after:.2f}" in steps[2]["finding"]
    assert "+0.85 through its value" in steps[3]["finding"] or "through its value" in steps[3]["finding"]
    assert "embed → mlp 0 → 1.1's value" in steps[4]["finding"]
    assert "through its key" in steps[5]["finding"] and "0.2 → mlp 0 → 1.1's key" in steps[6]["finding"]
    assert steps[7]["needed"] == ["0.0", "0.2", "1.1"] and steps[7]["kept"] > 0.8
    # every head called needed is said with its measured job (issue 61: 0.0 is no previous-token head)
    jobs = steps[7]["jobs"]
    assert (
        jobs["0.0"]["role"] == "offset"
        and jobs["0.0"]["offset"] == 2
        and "0.0 looks 2 tokens back" in steps[7]["finding"]
    )
    assert jobs["0.2"]["offset"] == 1 and jobs["1.1"]["role"] == "induction"


def test_the_walk_checks_its_premises_before_it_tells_a_story(client, specimen):
    """Issue 61's texts: where no head writes a share that means something, none is named the writer; where no
    change of one token alters the answer, the walk says which tokens it changed and to how many others; on a random
    model the walk says that the model does not copy, with the probabilities of its answer and of the copied token."""
    walk = call(client, "/circuit_walk", text="We few, we happy few, we band of", model="specimen")
    prediction, writer, carrier = walk["steps"][:3]
    # its end repeats one letter ("f" of "few"), the one before it not: no copy to expect, said so (issue 61), with
    # the model's answer; not "does not copy here yet" on a specimen that copies wherever a phrase repeats
    probabilities = next_probabilities(specimen, walk["ids"])
    top = int(probabilities.argmax())
    assert prediction["repeated"] == 1 and prediction["copies"] is None and prediction["token"] == top
    assert prediction["finding"].startswith("The text's end repeats only its last token ('f', seen before at token 4)")
    assert f"({probabilities[top]:.2f}); the steps follow that answer" in prediction["finding"]
    assert "does not copy here yet" not in prediction["finding"]
    assert writer["head"] is None and writer["share"] < 0.1
    assert "no head dominates that logit" in writer["finding"] and "the largest part is mlp 0's" in writer["finding"]
    if carrier["name"] == "carrier" and "heads" not in carrier:  # no corruption found: what was tried is said
        assert re.search(r"Changing token \d+ \('.+'\) to each of the \d+ tokens", carrier["finding"])
        assert "No change of one token alters the answer" not in carrier["finding"]
    # Each input the walk traces (what to copy, where to look) has its step: where no change of its token alters
    # the answer (the owl text's "where to look", on the specimen), the step says what was tried instead of silence.
    from minigpt.demo.circuits.circuit_walk import CORRUPTIONS

    walk = call(client, "/circuit_walk", text="the owl and the pussycat, the owl and the pus", model="specimen")
    inputs = [s for s in walk["steps"] if s["name"] == "input"]
    assert [s["title"] for s in inputs] == [f"Through which input: {what}" for _, what in CORRUPTIONS]
    for untraced in (s for s in inputs if "path" not in s):
        assert re.search(r"Changing token \d+ \('.+'\) to each of the \d+ tokens", untraced["finding"])
        assert "cannot be traced on this text" in untraced["finding"]
    walk = call(client, "/circuit_walk", text=ROMEO, model="tiny-text")  # random weights: nothing is copied
    first = walk["steps"][0]
    assert first["name"] == "prediction" and not first["copies"]
    assert first["finding"].startswith("This model does not copy here yet: it predicts")


@pytest.mark.parametrize(
    "params, message",
    [
        (dict(corrupted_text="Romeo and Juliet, Romeo and Ju"), "both need the same number of tokens"),
        (dict(corrupted_text=ROMEO), "The model's top next token is the same after both texts"),
        (dict(corrupted_text=ROMEO_CORRUPTED, receiver="0.1"), "receiver must be one head of a later layer"),
        (dict(corrupted_text=ROMEO_CORRUPTED, receiver="1.1", sender="2.0"), "There is no head 2.0"),
    ],
)
def test_patching_mistakes_say_what_to_change_and_leave_the_log_alone(server, client, params, message):
    mark = len(server_log(server[1]))
    error = app_error(client, "/patching", text=ROMEO, model="specimen", **params)
    assert message in error, error
    assert "Traceback" not in server_log(server[1])[mark:]


@pytest.mark.parametrize(
    "params, message",
    [
        (dict(token="é"), "The specimen model does not know these characters of the token: 'é'"),
        (dict(other_token="🙂"), "does not know these characters of the other_token: '🙂'"),
        (dict(token="\x00"), "does not know these characters of the token: '\\x00' (U+0000)"),
        (dict(token="a" * 1_000_000), "token is 1,000,000 characters long: a single token is at most 256"),
        (dict(position="1_0"), "position must be a number written with the digits 0-9 alone, got '1_0'"),
    ],
)
def test_attribution_mistakes_say_what_to_change_and_leave_the_log_alone(server, client, params, message):
    """A token the tokenizer cannot read is refused as the text field refuses it, a huge one before it is tokenized
    (issue 48: the tokenizer's own message and a traceback; 2 s for a million characters)."""
    mark = len(server_log(server[1]))
    error = app_error(client, "/logit_attribution", text=ROMEO, model="specimen", **params)
    assert message in error, error
    half = raw_error(server[0], "/logit_attribution", ROMEO, "specimen", -1, "", "\ud800")  # gradio_client can't
    assert "The other_token holds" in half and "(U+D800): half of a character" in half
    assert "Traceback" not in server_log(server[1])[mark:]


def test_patching_takes_the_documented_default_key_position_however_it_is_written(client):
    """-1, "-1", -1.0 and "-1.0" are the default key (after the repeat's first copy); a later sender is refused in
    the words a visitor types."""
    common = dict(text=ZORBAK, corrupted_text=ZORBAK_CORRUPTED, model="specimen", receiver="1.1", sender="mlp 0")
    for written in (-1, "-1", -1.0, "-1.0"):
        answer = call(client, "/patching", **common, key_position=written)
        assert answer["path"]["key_position"] == 9 and answer["path"]["key_token"] == "b", written
    error = app_error(client, "/patching", **{**common, "sender": "mlp 1"})
    assert (
        "The sender 'mlp 1' comes after what the receiver (layer 1) reads: give a head or 'mlp L' of layer 0" in error
    )


def test_the_change_one_token_helper_works_for_a_vocabulary_smaller_than_its_search(server, client):
    """The names and induction models have 28 tokens, fewer than the 64 candidates the helper weighs: /patching with
    its defaults answers with one token changed, or says that no change of one token alters the answer."""
    mark = len(server_log(server[1]))
    answer = call(client, "/patching", model="names")  # "emma"
    changed = [(a, b) for a, b in zip(answer["ids"], answer["corrupted_ids"]) if a != b]
    assert len(changed) == 1 and answer["clean_answer"] != answer["corrupted_answer"]
    error = app_error(client, "/patching", text="abcabc", model="induction")
    assert re.search(r"Changing token \d+ \('.'\) to each of the \d+ tokens the model finds likeliest", error)
    assert "Traceback" not in server_log(server[1])[mark:]


@needs_chromium
def test_the_section_draws_its_views_and_a_click_on_a_head_draws_its_circuits(page_url):
    from urllib.parse import quote

    from playwright.sync_api import expect

    with chromium_page() as page:
        page.goto(f"{page_url}?model=specimen&text={quote(ROMEO)}")
        expect(page.locator("#attention-grid svg[data-layer]")).to_have_count(10)
        page.locator("#circuits").get_by_text("Circuits: how heads work together").first.click()
        # How to read each view: docs/circuits.md in a fold, its links to the web only (the page serves no other doc)
        page.locator("#circuits-doc").get_by_text("How to read each view (docs/circuits.md)").click()
        doc = page.locator("#circuits-doc-text")
        expect(doc.get_by_role("heading", name="The walk: the circuit found, step by step")).to_be_visible()
        hrefs = doc.locator("a").evaluate_all("links => links.map((link) => link.href)")
        assert hrefs and all(href.startswith("https://") for href in hrefs), hrefs
        page.locator("#circuit-attribution-button").click()
        expect(page.locator("#circuit-attribution")).to_contain_text("Largest")
        page.locator("#circuit-change").click()
        expect(page.locator("#circuit-corrupted textarea")).not_to_have_value("")
        proposed = page.locator("#circuit-corrupted textarea").input_value()
        assert len(proposed) == len(ROMEO) and sum(a != b for a, b in zip(proposed, ROMEO)) == 1  # one letter changed
        page.locator("#circuit-patch").click()
        expect(page.locator("#circuit-patching")).to_contain_text(re.compile(r"head 1\.1 restores 1\d\d%"))
        expect(page.locator("#circuit-patching .path tr[data-sender]")).to_have_count(7)
        page.locator("#circuit-composition-button").click()
        expect(page.locator("#circuit-composition svg.graph .node")).to_have_count(8)
        expect(page.locator("#circuit-composition")).to_contain_text("The patching evidence")
        page.locator('#circuit-composition .node[data-layer="1"][data-head="1"]').click()  # a click on a head
        expect(page.locator("#circuit-chosen textarea")).to_have_value("1.1")
        expect(page.locator("#circuit-head .head-circuit")).to_have_attribute("data-head", "1")
        expect(page.locator("#circuit-head")).to_contain_text("with 0.2 ablated (zero)")
        expect(page.locator('#circuit-head [data-map="after"] td.cell').first).to_be_visible()


def test_the_ablate_box_suggests_the_previous_token_head_measured_before_the_chosen_one(specimen):
    """No shipped model's head as a default (issue 61): for a head of layer 1 the box gets the layer-0 head with the
    largest previous-token weight on the text shown, from the model's own attention; a layer-0 head gets none."""
    from minigpt.demo.circuits.head_circuit import previous_token_head_before
    from minigpt.demo.core.state import DemoState

    view = DemoState.configure(training=False).text_view("specimen", ZORBAK)
    with torch.no_grad():
        weights = specimen(torch.tensor([view.ids]), output_attentions=True).attentions[0][0]  # layer 0: (H, T, T)
    previous = torch.stack([weights[:, i, i - 1] for i in range(1, len(view.ids))], dim=-1).mean(-1)  # (H,)
    assert previous_token_head_before(view, 1) == f"0.{int(previous.argmax())}" == "0.2"
    assert previous_token_head_before(view, 0) == ""


def swapped_heads(model, layer: int, first: int, second: int):
    """The same model with two heads of `layer` swapped (their query, key and value rows and their columns of the
    output projection): every output equal, the heads' names exchanged."""
    attention, width = model.model.layers[layer].attn, model.config.n_embd // model.config.n_head
    with torch.no_grad():
        for weights, dim in (
            (attention.qkv_proj.weight, 0),
            (attention.qkv_proj.bias, 0),
            (attention.out_proj.weight, 1),
        ):
            for part in range(weights.shape[dim] // model.config.n_embd):  # q, k, v (qkv_proj) or the one output
                start = part * model.config.n_embd
                a, b = (weights.narrow(dim, start + h * width, width) for h in (first, second))
                a_was = a.clone()
                a.copy_(b), b.copy_(a_was)
    return model


def test_the_boxes_naming_a_head_start_with_the_head_measured_to_copy_on_the_text_shown(specimen, tmp_path):
    """No shipped model's head as a default (issue 61): on each text where the model copies (its top next token is the
    one that followed the repeated end the first time: the walk's premise), the receiver and the chosen head start as
    the head with the highest induction score on that text (minigpt.heads' role scores ranking it first), the
    receiver's above layer 0; else empty, the label saying what to type. On the specimen and on the specimen with
    heads 1.1 and 1.3 swapped (the same model, its copying head renamed), the defaults are renamed as the measurement
    is."""
    from transformers import AutoTokenizer

    from minigpt.demo.circuits.ui import CHOSEN_LABELS, RECEIVER_LABELS, CircuitsSection
    from minigpt.demo.core.state import DemoState
    from minigpt.heads import head_roles, repeated_tokens, run_forward_pass, top_heads
    from minigpt.heads.role_scores import excess

    swapped = swapped_heads(specimen, 1, 1, 3)
    swapped.save_pretrained(tmp_path / "swapped")
    AutoTokenizer.from_pretrained(REPO / "minigpt" / "models" / "specimen").save_pretrained(tmp_path / "swapped")
    state = DemoState.configure([str(tmp_path / "swapped")], training=False)
    section, defaults = CircuitsSection(state), {}
    for model in ("specimen", "swapped"):
        for text in (ZORBAK, ROMEO, "abcdefg"):  # "abcdefg" repeats nothing: nothing to copy
            view = state.text_view(model, text)
            probes = repeated_tokens(list(range(1, 40)), view.ids[0], count=2, half=8)  # what head_roles wants too
            roles = head_roles(view.lm.model, run_forward_pass(view.lm.model, view.ids), probes)
            expected = []
            with torch.no_grad():
                top = int(view.lm.model(torch.tensor([view.ids])).logits[0, -1].argmax())
            for first_layer in (1, 0):  # the receiver's, above layer 0; the chosen head's
                if "induction_on_text" not in roles:
                    expected.append("")
                    continue
                layer, head, score = top_heads(roles["induction_on_text"][first_layer:], k=1)[0]
                copied = [b for a, b in zip(view.ids, view.ids[1:]) if a == view.ids[-1]]  # after the earlier copy
                copies = top in copied[:1] and excess(score, roles["chance"]["induction_on_text"]) >= 0
                expected.append(f"{layer + first_layer}.{head}" if copies else "")
            receiver, chosen = section.measured_defaults(view.shown)
            assert [receiver.value, chosen.value] == expected, (model, text)
            assert (
                receiver.label == RECEIVER_LABELS[bool(expected[0])]
                and chosen.label == CHOSEN_LABELS[bool(expected[1])]
            )
            defaults[model, text] = expected
    renamed = {"1.1": "1.3", "1.3": "1.1"}
    for text in (ZORBAK, ROMEO, "abcdefg"):  # the swapped model's copying head is the specimen's, renamed
        assert defaults["swapped", text] == [renamed.get(h, h) for h in defaults["specimen", text]], text
    assert defaults["specimen", ZORBAK] != defaults["swapped", ZORBAK]  # its copying head is one of the two swapped
    assert defaults["specimen", "abcdefg"] == ["", ""]
