"""The "What does this head do?" endpoints through gradio_client, on the tiny fixture models: plain-number answers that
equal the model's own numbers, and clear messages for bad input."""

import pytest
import torch
from torch.nn import functional as F

from helpers import app_error, call, server_log, stream

# fixture_models, server (the app serving them), client: conftest.py

ENDPOINTS = {
    "/next_tokens": ["text", "model", "position", "temperature", "top_k", "top_p"],
    "/logit_lens": ["text", "model", "position"],
    "/ablate": [
        "text",
        "model",
        "heads",
        "mode",
        "position",
        "prompt",
        "new_tokens",
        "temperature",
        "top_k",
        "top_p",
        "seed",
    ],
    "/importance": ["text", "model", "mode"],
    "/head_roles": ["text", "model"],
    "/compare": ["text", "other_text", "model"],
}


@pytest.fixture(scope="module")
def names_model(fixture_models):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(fixture_models[0]).eval()


EMMA = [0, 5, 13, 13, 1]  # . e m m a


def test_endpoints_are_listed_with_their_parameters(client):
    api = client.view_api(print_info=False, return_format="dict")["named_endpoints"]
    for name, parameters in ENDPOINTS.items():
        assert [p["parameter_name"] for p in api[name]["parameters"]] == parameters, name
        assert all(p["parameter_has_default"] for p in api[name]["parameters"]), name


def test_next_tokens_are_the_softmax_of_the_models_logits(client, names_model):
    answer = call(client, "/next_tokens", text="emma", position=2)
    assert answer["tokens"] == [".", "e", "m", "m", "a"] and answer["position"] == 2
    with torch.no_grad():
        probabilities = names_model(torch.tensor([EMMA])).logits[0, 2].softmax(-1)
    expected, order = probabilities.sort(descending=True)
    assert [t["id"] for t in answer["top"]] == order[:10].tolist()
    assert [t["probability"] for t in answer["top"]] == pytest.approx(expected[:10].tolist(), rel=1e-4)
    assert answer["next"]["token"] == "m" and answer["next"]["probability"] == pytest.approx(float(probabilities[13]))
    assert call(client, "/next_tokens", text="emma")["next"] is None  # the last token: nothing follows


def sampler_formula(logits: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """What a sampler draws from, written out: logits / T, all but the top-k at -inf, then the least likely tokens
    whose probabilities add up to at most 1 - top_p at -inf (the most likely always kept), softmax."""
    logits = logits / temperature
    logits[logits < logits.topk(top_k).values[-1]] = float("-inf")
    ascending, order = logits.sort()
    dropped = ascending.softmax(-1).cumsum(-1) <= 1 - top_p
    dropped[-1] = False
    logits[order[dropped]] = float("-inf")
    return logits.softmax(-1)


@pytest.mark.parametrize("temperature, top_k, top_p", [(1.0, 0, 1.0), (2.0, 0, 1.0), (0.5, 5, 1.0), (1.5, 8, 0.7)])
def test_next_token_bars_follow_the_sampling_settings(client, names_model, fixture_models, temperature, top_k, top_p):
    from transformers import AutoTokenizer

    settings = dict(temperature=temperature, top_k=top_k, top_p=top_p)
    answer = call(client, "/next_tokens", text="emma", position=2, **settings)
    with torch.no_grad():
        logits = names_model(torch.tensor([EMMA])).logits[0, 2]
    logits[AutoTokenizer.from_pretrained(fixture_models[0]).pad_token_id] = float("-inf")  # never generated
    expected = sampler_formula(logits.clone(), temperature, top_k or logits.numel(), top_p)
    ids = [t["id"] for t in answer["top"]]
    assert answer["sampled"]["probabilities"] == pytest.approx(expected[ids].tolist(), abs=1e-5)
    assert answer["sampled"]["temperature"] == temperature


def test_next_token_bars_at_temperature_zero_are_the_greedy_choice(client):
    answer = call(client, "/next_tokens", text="emma", position=2, temperature=0)
    assert answer["sampled"]["probabilities"] == [1.0] + [0.0] * 9  # the most likely token, every time


def test_ablate_gives_losses_before_and_after(client, names_model):
    plain = call(client, "/ablate", text="emma", heads="")
    with torch.no_grad():
        logits = names_model(torch.tensor([EMMA])).logits[0, :-1]
    expected = F.cross_entropy(logits, torch.tensor(EMMA[1:]), reduction="none")
    assert plain["loss_before"] == pytest.approx(expected.tolist(), rel=1e-4)
    assert plain["loss_after"] == plain["loss_before"] and plain["heads"] == []  # nothing ablated: bit-identical
    answer = call(client, "/ablate", text="emma", heads="1.2, 0.3", mode="mean", position=1)
    assert answer["heads"] == [[1, 2], [0, 3]] and answer["mode"] == "mean" and answer["position"] == 1
    assert answer["loss_before"] == plain["loss_before"] and answer["loss_after"] != answer["loss_before"]
    assert answer["total_after"] == pytest.approx(sum(answer["loss_after"]) / 4)
    assert len(answer["top5_before"]) == len(answer["top5_after"]) == 5


def test_ablated_generation_redoes_the_text_with_the_same_seed(client):
    text = stream(client, prompt="to be", max_new_tokens=20, seed=4, model="tiny-text")[-1][0]
    same = call(client, "/ablate", text="to be", model="tiny-text", heads="", prompt="to be", new_tokens=20, seed=4)
    assert same["generation"]["plain"] == same["generation"]["ablated"] == text
    off = call(
        client,
        "/ablate",
        text="to be",
        model="tiny-text",
        heads="0.0, 0.1, 1.0, 1.1",
        prompt="to be",
        new_tokens=20,
        seed=4,
    )["generation"]
    assert off["plain"] == text and off["ablated"].startswith("to be") and len(off["ablated"]) <= len("to be") + 20
    # (random weights: the heads barely move the sampled tokens; that generation runs ablated is tested in process)


def test_importance_roles_lens_and_compare_answer_layer_by_head(client):
    importance = call(client, "/importance", text="emmanuel")
    assert len(importance["importance"]) == 4 and all(len(row) == 4 for row in importance["importance"])
    roles = call(client, "/head_roles", text="emmanuel")
    for role in ("previous_token", "first_token", "self", "induction"):
        scores = torch.tensor(roles[role])
        assert scores.shape == (4, 4) and bool(((scores >= 0) & (scores <= 1 + 1e-6)).all()), role
        best = roles["top_heads"][role][0]
        assert best["score"] == pytest.approx(float(scores.max()))
        assert roles[role][best["layer"]][best["head"]] == best["score"]
    assert roles["probe"]["length"] == 7  # (16 - 1) // 2 random tokens, twice, in the 16-token context
    T = 9  # . e m m a n u e l: rows 1..8 each see i + 1 keys, one of them on the pattern
    even = sum(1 / (i + 1) for i in range(1, T)) / (T - 1)
    for role in ("previous_token", "first_token", "self"):
        assert roles["chance"][role] == pytest.approx(even)
    marked = {(h["role"], h["layer"], h["head"]) for h in roles["above_chance"]}
    for role, chance in roles["chance"].items():
        assert roles["threshold"][role] == pytest.approx(chance + (1 - chance) / 2)  # what the view states
        for layer, row in enumerate(roles[role]):
            for head, score in enumerate(row):
                assert ((role, layer, head) in marked) == (score >= chance + (1 - chance) / 2), (role, layer, head)
    lens = call(client, "/logit_lens", text="emma", position=3)
    assert [step["after"] for step in lens["layers"]] == ["embeddings", "layer 0", "layer 1", "layer 2", "layer 3"]
    top3 = [t["id"] for t in call(client, "/next_tokens", text="emma", position=3)["top"][:3]]
    assert [t["id"] for t in lens["layers"][-1]["top"]] == top3
    compared = call(client, "/compare", text="emma", other_text="anna")
    assert torch.tensor(compared["difference"]).shape == (4, 4, 5, 5)
    assert compared["loss"] == pytest.approx(call(client, "/ablate", text="emma")["loss_before"], rel=1e-5)
    assert len(compared["other_loss"]) == 4 and max(map(max, compared["difference_per_head"])) > 0


def test_compare_texts_of_different_lengths_over_their_common_positions(client, names_model):
    """ "emma" against "emmanuel": the difference covers their first 5 tokens, equals the two models' own maps there
    (the longer text's first rows are its prefix's whole maps: attention is causal), and a note says so."""
    answer = call(client, "/compare", text="emmanuel", other_text="emma")
    assert answer["compared_tokens"] == 5 and len(answer["other_loss"]) == 4 and len(answer["loss"]) == 8
    assert answer["model"] == "tiny-names" and answer["other_ids"] == EMMA
    assert any("9 and 5 tokens" in note and "first 5" in note for note in answer["notes"])
    long_ids = EMMA[:-1] + [1, 14, 21, 5, 12]  # . e m m a n u e l
    with torch.no_grad():
        long = names_model(torch.tensor([long_ids]), output_attentions=True).attentions
        short = names_model(torch.tensor([EMMA]), output_attentions=True).attentions
    expected = torch.stack([a[0, :, :5, :5] - b[0] for a, b in zip(long, short)])  # (L, H, 5, 5)
    torch.testing.assert_close(torch.tensor(answer["difference"]).float(), expected, atol=2e-6, rtol=0)


def test_compare_with_no_second_text_changes_the_last_token_to_the_models_next_guess(client, names_model):
    answer = call(client, "/compare", text="emma", other_text="")
    with torch.no_grad():
        logits = names_model(torch.tensor([EMMA])).logits[0, -2]  # what the model expects where "a" stands
    logits[[EMMA[-1], 0, 27]] = float("-inf")  # neither the token that is there, the boundary '.' nor the pad
    assert answer["other_ids"] == EMMA[:-1] + [int(logits.argmax())] and answer["compared_tokens"] == 5
    assert answer["other_text"] == "emm" + answer["other_tokens"][-1]
    assert any("changed to" in note for note in answer["notes"])
    difference = torch.tensor(answer["difference"])
    assert difference[..., :-1, :].abs().max() == 0 and difference[..., -1, :].abs().max() > 0  # the last row alone


def test_text_past_the_context_keeps_its_end_and_says_so(client):
    answer = call(client, "/ablate", text="x" * 100, model="tiny-text", heads="1.1")
    assert len(answer["tokens"]) == 32 and len(answer["loss_before"]) == 31
    assert "101 tokens" in answer["notes"][0] and "kept the last 32" in answer["notes"][0]


@pytest.mark.parametrize(
    "endpoint, params, message",
    [
        ("/ablate", dict(heads="4.0"), "There is no head 4.0: this model has layers 0-3 and heads 0-3"),
        ("/ablate", dict(heads="1,2"), "Cannot read the head '1': write each head as layer.head"),
        ("/ablate", dict(mode="half"), "The ablation mode must be 'zero', 'mean' or 'resample', got 'half'"),
        ("/ablate", dict(text=""), "The text is empty"),
        ("/importance", dict(text=""), "The text is empty"),
        ("/head_roles", dict(text=""), "The text is empty"),
        ("/next_tokens", dict(position=5), "Position must be between 0 and 4"),
        ("/logit_lens", dict(position="first"), "Position must be a number, got 'first'"),
        ("/next_tokens", dict(position="٣"), "Position must be written with the digits 0-9"),
        ("/head_roles", dict(text="Émile"), "LATIN CAPITAL LETTER E WITH ACUTE"),
        ("/importance", dict(model="no-such-model"), "Unknown model 'no-such-model'"),
    ],
)
def test_bad_input_gives_a_clear_message(client, endpoint, params, message):
    error = app_error(client, endpoint, **params)
    assert message in error and "Traceback" not in error


def test_user_mistakes_stay_out_of_the_server_log(client, server):
    mark = len(server_log(server[1]))  # the server is shared: what came before is other tests'
    app_error(client, "/ablate", heads="9.9")
    assert "Traceback" not in server_log(server[1])[mark:]


def test_generated_tokens_are_coloured_by_the_probability_they_were_sampled_with(fixture_models):
    """With top-k 1 every generated token was certain (p = 1 after the warpers), which holds only if the probabilities
    line up with the tokens and go through the sampler's warpers; the prompt's tokens get no colour."""
    import asyncio
    import re

    from minigpt.demo.core.state import DemoState
    from minigpt.demo.generation.endpoints import Generation
    from minigpt.demo.head_tools.ui import InsightsSection

    async def last_update(updates):
        return [update async for update in updates][-1]

    state = DemoState.configure([], *map(str, fixture_models), training=False)
    text = Generation(state).text("to be", max_new_tokens=12, top_k=1, seed=3, model="tiny-text")
    generated, _ = asyncio.run(last_update(text))
    insights = InsightsSection(state)
    drawn = insights.sampled_colours(generated, "tiny-text", "to be", 1.0, 1, 1.0, 3)
    probabilities = [float(p) for p in re.findall(r'data-probability="([0-9.]+)"', drawn)]
    assert probabilities == [1.0] * (len(generated) - len("to be"))
    plain = insights.sampled_colours(generated, "tiny-text", "to be", 1.0, 0, 1.0, 3)  # no top-k: the model's softmax
    assert all(0 < float(p) < 1 for p in re.findall(r'data-probability="([0-9.]+)"', plain))


def test_induction_is_measured_on_the_learners_text_when_it_repeats(client):
    """Issue 41: the induction score never used the learner's text, even when it repeats and the map shows the
    stripe. On the specimen, a line written twice: the score on the text (the same formula, the text's own pattern)
    beside the probe's, its chance level from even attention, head 1.1 the best on both; a text with no repeated
    run of 3 tokens has none, and the page offers a text that repeats a phrase."""
    from minigpt.demo.head_tools.view import roles_html
    from minigpt.heads.role_scores import chance_level, induction_pattern

    text = "the cat sat on the mat. the cat sat on the mat."
    roles = call(client, "/head_roles", text=text, model="specimen")
    scores = torch.tensor(roles["induction_on_text"])
    best = divmod(int(scores.argmax()), scores.shape[1])
    assert best == (1, 1) and float(scores.max()) > 2 * roles["induction_on_text_chance"]  # 0.33, chance 0.13
    pattern = induction_pattern(roles["ids"])  # the answer's own token ids
    assert roles["repeated_queries"] == int(pattern.any(dim=-1).sum())
    assert roles["induction_on_text_chance"] == pytest.approx(chance_level(pattern))
    assert "Induction on your text" in roles_html(roles) and "on the probe" in roles_html(roles)
    plain = call(client, "/head_roles", text="abc", model="specimen")
    assert "induction_on_text" not in plain and "A text that repeats a phrase shows it" in roles_html(plain)


def test_heads_in_other_digits_are_refused_by_the_one_head_parser(client):
    assert "Cannot read the head '٣.٣'" in app_error(client, "/ablate", text="emma", heads="٣.٣")
