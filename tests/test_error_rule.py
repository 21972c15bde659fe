"""The error rule (minigpt/errors.py, minigpt/demo/core/error_rule.as_message), through the real server as an outside
client calls it: a host's broken model is the host's problem (a message naming the model, and a traceback in the server
log, on every endpoint that loads a model); a visitor's mistake gets a message and leaves the log alone, on every named
endpoint; numbers written with other scripts' digits are a visitor's mistake too."""

import itertools
import re
import time

import pytest

from helpers import (
    HANG_S,
    app_error,
    assert_every_case,
    assert_every_case_leaves_the_log_alone,
    call,
    gradio_client,
    server_log,
    settled_log,
)

BROKEN = "broken-weights"  # the picker names an extra model folder by its folder name


@pytest.fixture(scope="module")
def models(broken_models):
    """The fixture models, and a model folder whose config.json and tokenizer are good and whose weights are garbage."""
    names, text, weights, _ = broken_models
    return names, text, weights


@pytest.fixture(scope="module")
def server(broken_server):
    return broken_server


@pytest.fixture(scope="module")
def client(server):

    return gradio_client(server[0])


def api(client) -> dict:
    return client.view_api(print_info=False, return_format="dict")["named_endpoints"]


def shown(value):
    """A test id for a dict of parameters: text=5,heads=['0.1']."""
    return ",".join(f"{key}={item!r}" for key, item in value.items()) if isinstance(value, dict) else None


SERVER_PATH = re.compile(r"(?:/[\w.+-]+){2,}")  # /tmp/pytest-.../models/broken-weights, /root/..., etc.


# ---- 1: a host's broken model: a message naming it, a traceback in the log, on every endpoint that loads a model ----

LOADING_ENDPOINTS = [
    "/names",
    "/text",
    "/attention",
    "/attention_values",
    "/attention_why",
    "/attention_export",
    "/step",
    "/next_tokens",
    "/logit_lens",
    "/ablate",
    "/importance",
    "/head_roles",
    "/compare",
    "/head_metrics",
    "/head_dashboard",
    "/logit_attribution",
    "/patching",
    "/composition",
    "/head_circuit",
    "/circuit_walk",
    "/find_circuit",
    "/test_circuit",
    "/head_over_training",
    "/exercises",
    "/grade",
]


def test_the_endpoints_that_load_a_model_are_those_with_a_model_parameter(client):
    taking_a_model = [
        name for name, info in api(client).items() if any(p["parameter_name"] == "model" for p in info["parameters"])
    ]
    assert sorted(taking_a_model) == sorted(LOADING_ENDPOINTS)  # a new one is added to LOADING_ENDPOINTS too


def test_a_broken_model_is_named_to_the_client_and_its_traceback_logged(server, client, models):
    """Every endpoint of LOADING_ENDPOINTS, one call each (the failures reported together, each named by its endpoint):
    the message names the model, and the log holds the call's traceback, ending in ModelUnavailable (its last line:
    the traceback is whole when it is there). After the last call, the log holds as many as there were calls: no
    traceback came late into the next call's part."""
    process = server[1]
    line = f"ModelUnavailable: Could not load the model '{BROKEN}'"
    start = len(settled_log(process))

    def check(endpoint):
        mark = len(server_log(process))
        error = app_error(client, endpoint, model=BROKEN)
        assert f"Could not load the model '{BROKEN}'" in error, error
        assert "Traceback" not in error
        assert str(models[2].parent) not in error and not SERVER_PATH.search(error), error  # no server path
        deadline = time.monotonic() + 10
        while line not in (logged := server_log(process)[mark:]):
            assert time.monotonic() < deadline, f"no traceback logged:\n{logged[-3000:]}"
            time.sleep(0.02)
        assert "Traceback" in logged, logged[-3000:]

    assert_every_case([(endpoint, (endpoint,)) for endpoint in LOADING_ENDPOINTS], check)
    assert settled_log(process)[start:].count(line) == len(LOADING_ENDPOINTS)


def test_the_server_keeps_serving_its_good_models_after_the_broken_one(client):
    names, _ = call(client, "/names", prefix="em", count=3, seed=0)
    assert all(n.startswith("em") for n in names.split("\n"))
    assert call(client, "/attention_values", text="emma", layer=1, head="2", query=3)["query"] == 3


# ---- 2: a visitor's mistake: a message, and nothing in the log, on every named endpoint --------------------------

# endpoint -> [(bad params, a fragment of the expected message)]. tiny-names: 4 layers of 4 heads, a-z with '.' as
# its boundary; tiny-text: 2 layers of 2 heads over printable ASCII, a 32-token context.
MISTAKES = {
    "/names": [
        (dict(model="no-such-model"), "Unknown model 'no-such-model': choose one of"),
        (dict(count="many"), "Number of names must be a number, got 'many'"),
        (dict(prefix="Zoë"), "'ë' (LATIN SMALL LETTER E WITH DIAERESIS)"),
        (dict(seed="٣"), "Seed must be written with the digits 0-9"),
    ],
    "/text": [
        (dict(model="no-such-model"), "Unknown model 'no-such-model'"),
        (dict(prompt="hi 🙂"), "'🙂' (SLIGHTLY SMILING FACE)"),
        (dict(max_new_tokens="2.5"), "Max new tokens must be a whole number, got '2.5'"),
        (dict(top_p=1.5), "top-p must be above 0 and at most 1, got 1.5"),
    ],
    "/attention": [
        (dict(model="no-such-model"), "Unknown model 'no-such-model'"),
        (dict(text="é"), "LATIN SMALL LETTER E WITH ACUTE"),
    ],
    "/attention_values": [
        (dict(model="no-such-model"), "Unknown model 'no-such-model'"),
        (dict(layer=4), "layer must be 0 to 3, got 4"),
        (dict(head="4"), "head must be 0 to 3 or 'mean' (their average), got '4'"),
        (dict(query=5), "query must be between 0 and 4 (the text has 5 tokens"),
        (dict(key="first"), "key must be a number, got 'first'"),
        (dict(text="Emma"), "'E' (LATIN CAPITAL LETTER E)"),
    ],
    "/attention_why": [
        (dict(model="no-such-model"), "Unknown model 'no-such-model'"),
        (dict(layer=4), "layer must be 0 to 3, got 4"),
        (dict(head="mean"), "head must be 0 to 3, got 'mean'"),
        (dict(query=5), "query must be between 0 and 4 (the text has 5 tokens"),
        (dict(query=1, key=3), "key 3 comes after the query 1: it is masked"),
        (dict(text="Emma"), "'E' (LATIN CAPITAL LETTER E)"),
    ],
    "/attention_export": [
        (dict(model="no-such-model"), "Unknown model 'no-such-model'"),
        (dict(what="gif"), "what must be one of safetensors, npz, map.png, grid.png, grid.svg, got 'gif'"),
        (dict(what="map.png", layer=-1), "layer must be 0 to 3, got -1"),
        (dict(what="map.png", head="all"), "head must be 0 to 3 or 'mean'"),
    ],
    "/step": [
        (dict(model="no-such-model"), "Unknown model 'no-such-model'"),
        (dict(layer=4), "must be 0 to 3"),
        (dict(head=9), "must be 0 to 3"),
        (dict(query=99), "must be 0 to 4"),
        (dict(training="maybe"), "Training must be true or false, got 'maybe'"),
        (dict(seed=-1), "seed must be 0 or more and below 2**63, got -1"),
    ],
    "/next_tokens": [
        (dict(model="no-such-model"), "Unknown model 'no-such-model'"),
        (dict(position=99), "Position must be between 0 and 4"),
        (dict(text="em ma"), "' ' (SPACE)"),
        (dict(temperature=-1), "Temperature must be 0 or more, got -1"),
        (dict(top_p=0), "top-p must be above 0 and at most 1, got 0"),
    ],
    "/logit_lens": [
        (dict(model="no-such-model"), "Unknown model 'no-such-model'"),
        (dict(position="two"), "Position must be a number, got 'two'"),
    ],
    "/ablate": [
        (dict(model="no-such-model"), "Unknown model 'no-such-model'"),
        (dict(heads="9.9"), "There is no head 9.9"),
        (dict(heads="one"), "Cannot read the head 'one'"),
        (dict(heads="0.1", mode="half"), "The ablation mode must be 'zero', 'mean' or 'resample', got 'half'"),
        (dict(text=""), "The text is empty"),
        (dict(heads="0.1", new_tokens=5, top_p=0), "top-p must be above 0"),
    ],
    "/importance": [
        (dict(model="no-such-model"), "Unknown model 'no-such-model'"),
        (dict(mode="half"), "The ablation mode must be 'zero', 'mean' or 'resample', got 'half'"),
        (dict(text=""), "The text is empty"),
    ],
    "/head_roles": [
        (dict(model="no-such-model"), "Unknown model 'no-such-model'"),
        (dict(text=""), "The text is empty"),
    ],
    "/compare": [
        (dict(model="no-such-model"), "Unknown model 'no-such-model'"),
        (dict(other_text="Zoë"), "'Z' (LATIN CAPITAL LETTER Z)"),
        (dict(text=""), "The text is empty"),
    ],
    "/head_metrics": [
        (dict(model="no-such-model"), "Unknown model 'no-such-model'"),
        (dict(text="émile"), "LATIN SMALL LETTER E WITH ACUTE"),
    ],
    "/head_dashboard": [
        (dict(model="no-such-model"), "Unknown model 'no-such-model'"),
        (dict(layer=4), "layer must be 0 to 3, got 4"),
        (dict(head="mean"), "head must be 0 to 3, got 'mean'"),
        (dict(text="emma", map_text="Emma"), "'E' (LATIN CAPITAL LETTER E)"),
    ],
    "/logit_attribution": [
        (dict(model="no-such-model"), "Unknown model 'no-such-model'"),
        (dict(position=99), "position must be between 0 and 4"),
        (dict(token="mm"), "token must be one token of the"),
        (dict(text=""), "The text is empty"),
        (dict(prompts=17), "prompts must be 1 (the text alone) to 16"),
    ],
    "/patching": [
        (dict(model="no-such-model"), "Unknown model 'no-such-model'"),
        (dict(corrupted_text="emmas"), "both need the same number of tokens"),
        (dict(corrupted_text="emma"), "The model's top next token is the same after both texts"),
        (dict(receiver_input="x"), "receiver_input must be 'q', 'k' or 'v'"),
        (dict(part="z"), "part must be one of output, q, k, v, pattern, got 'z'"),
        (dict(prompts=0), "prompts must be 1 (the text alone) to 16"),
        (dict(receiver="1.1", sender="1.0", intermediate="mlp 0"), "The sender '1.0' comes after"),
        (dict(receiver="1.1", intermediate="mlp 0"), "A two-step path starts at a sender that writes"),
        (dict(receiver="1.1", sender="0.2", intermediate="0.1"), "writes nothing that the intermediate 0.1 reads"),
        (dict(exact_cell="head 1"), "Cannot read exact_cell 'head 1': write a head as layer.head"),
        (dict(exact_cell="9.0"), "There is no head 9.0: this model has layers 0-3"),
        (dict(exact_cell="1.1 99"), "exact_cell's position must be between 0 and"),
        (dict(exact_cell="resid 0 x"), "exact_cell's position must be a number, got 'x'"),
    ],
    "/composition": [(dict(model="no-such-model"), "Unknown model 'no-such-model'")],
    "/head_circuit": [
        (dict(model="no-such-model"), "Unknown model 'no-such-model'"),
        (dict(layer=4), "layer must be 0 to 3, got 4"),
        (dict(head="mean"), "head must be 0 to 3, got 'mean'"),
        (dict(layer=0, ablate="1.0"), "ablate must name heads of layers before 0"),
        (dict(source="weird"), "source must be 'auto', 'effective' or 'bare', got 'weird'"),
        (dict(layer=1, ablate="0.1", ablation="half"), "The ablation mode must be 'zero', 'mean' or 'resample'"),
    ],
    "/circuit_walk": [
        (dict(model="no-such-model"), "Unknown model 'no-such-model'"),
        (dict(text=""), "The text is empty"),
    ],
    "/find_circuit": [
        (dict(model="no-such-model"), "Unknown model 'no-such-model'"),
        (dict(task="colours"), "task must be 'induction' or 'text', got 'colours'"),
        (dict(ablation="zero"), "ablation must be 'mean' or 'corrupted', got 'zero'"),
        (dict(method="acdc"), "method must be 'eap-ig' or 'eap', got 'acdc'"),
        (dict(target=1.5), "target must be above 0 and at most 1"),
        (dict(prompts=99), "prompts must be 0 (as many as fit) or 1 to 64 random prompts, got 99"),
        (dict(task="text", prompts=17), "prompts must be 0 (as many as fit) or 1 to 16 prompts"),
        (dict(task="text", text=""), "The text is empty"),
        (dict(task="text", text="emma", corrupted_text="em"), "give a corrupted text of the same token count"),
        (dict(task="text", text="emma", corrupted_text="emma"), "The corrupted text is the text itself"),
        (dict(task="text", text="emma", corrupted_text="emmy", prompts=1), "ablate to the corrupted text"),
        (dict(metric="acdc"), "metric must be 'log-probability', 'logit difference' or 'kl divergence', got 'acdc'"),
        (dict(normalise="clean"), "normalise must be 'ablated' or 'corrupted', got 'clean'"),
    ],
    "/test_circuit": [
        (dict(model="no-such-model"), "Unknown model 'no-such-model'"),
        (dict(task="colours"), "task must be 'induction' or 'text', got 'colours'"),
        (dict(ablation="zero"), "ablation must be 'mean' or 'corrupted', got 'zero'"),
        (dict(circuit=""), "the circuit is empty: write heads ('0.2, 1.1': every edge among them"),
        (dict(circuit="0.2 -> 1.1"), "0.2 -> 1.1: name the input of 1.1 the edge goes into: '1.1 q', '1.1 k' or"),
        (dict(circuit="0.9"), "head must be 0 to 3 (each layer has 4 heads), got 9"),
        (dict(circuit="1.1 -> 0.2 k"), "there is no edge 1.1 -> 0.2: a part sends only to parts of later layers"),
        (dict(circuit="0.1, mlp 0"), "'mlp 0' is not a head: a list of heads names heads only"),
        (dict(task="text", text="", circuit="1.1"), "The text is empty"),
        (dict(circuit="9.9"), "head '9.9': layer must be 0 to 3 (the model has 4 layers), got 9"),
        (dict(circuit="0.2 -> -> 1.1 k"), "cannot read it as a node: write a head as 'L.H' ('1.1')"),
        (dict(circuit="0.1, " * 1000), "the circuit is 5000 characters: at most 4000"),  # heads past any graph's
    ],
    "/exercises": [
        (dict(model="no-such-model"), "Unknown model 'no-such-model'"),
        (dict(kinds="colours"), "Unknown kind 'colours': give kinds (head, number, choice, circuit) or question"),
        (dict(ids="writer-xyz"), "Cannot read the question id 'writer-xyz'"),
        (dict(text=""), "The text is empty"),
    ],
    "/grade": [
        (dict(model="no-such-model"), "Unknown model 'no-such-model'"),
        (dict(question=""), "question must be one question id"),
        (dict(question="writer-0123456789"), "writer-0123456789 is not a question of this text on the specimen model"),
        (dict(question="writer-6a46ef106c", answer="9.9"), "There is no head 9.9"),
        (dict(question="writer-6a46ef106c", answer=""), "answer is empty: pick a head"),
        (dict(question="writer-6a46ef106c", answer="1" * 100_000), "answer is 100,000 characters long"),
        (dict(question="ov_top-0123456789", answer="i"), "is not a question of this text"),
        (dict(question="circuit-0123456789", answer="0.2 -> 1.1"), "0.2 -> 1.1: name the input of 1.1 the edge goes"),
    ],
    "/head_over_training": [
        (dict(model="no-such-model"), "Unknown model 'no-such-model'"),
        (dict(model="tiny-names"), "The model 'tiny-names' has no training snapshots"),
    ],
    "/train": [
        (dict(data="wikipedia"), "data must be one of names, shakespeare, induction, text"),
        (dict(n_layer="two"), "Layers must be a number, got 'two'"),
        (dict(name="../../etc"), "is not allowed"),
        (dict(name="tiny-names"), "is taken"),
        (dict(data="text", text=""), "The text is empty"),
    ],
    "/resume": [(dict(name="no-such-run", owner="token"), "There is no run named 'no-such-run' to resume")],
    "/cancel": [(dict(name="no-such-run"), "No run named 'no-such-run' is queued or running")],
    "/download": [(dict(name="no-such-run"), "No finished model named 'no-such-run'")],
}


def test_every_named_endpoint_has_its_mistakes_in_the_table(client):
    named = set(api(client))
    assert not named - set(MISTAKES), f"endpoints with no mistake to try: {sorted(named - set(MISTAKES))}"
    assert not set(MISTAKES) - named, f"no such endpoint any more: {sorted(set(MISTAKES) - named)}"


def test_a_visitors_mistake_gets_a_message_and_leaves_the_log_alone(server, client):
    """Every case of MISTAKES (one test for the table: each failure is named by its endpoint and parameters)."""

    def check(endpoint, params, message):
        error = app_error(client, endpoint, **params)
        assert message in error, error
        assert "Traceback" not in error

    cases = [
        (f"{endpoint} {shown(params)}", (endpoint, params, message))
        for endpoint, table in MISTAKES.items()
        for params, message in table
    ]
    assert_every_case_leaves_the_log_alone(server[1], cases, check)


# ---- 3: numbers written with other scripts' digits ---------------------------------------------------------------

OTHER_DIGITS = ["٣", "０", "²"]  # ARABIC-INDIC DIGIT THREE, FULLWIDTH DIGIT ZERO, SUPERSCRIPT TWO: int() reads two


DIGIT_MESSAGES = [  # (endpoint, parameter, its message for a digit of another script)
    ("/attention_values", "layer", "layer must be written with the digits 0-9, got '{digit}'"),
    ("/attention_values", "head", "head must be 0 to 3 or 'mean' (their average), got '{digit}'"),
    ("/attention_values", "query", "query must be written with the digits 0-9, got '{digit}'"),
    ("/attention_values", "key", "key must be written with the digits 0-9, got '{digit}'"),
    ("/step", "layer", "Layer must be written with the digits 0-9, got '{digit}'"),
    ("/step", "head", "Head must be written with the digits 0-9, got '{digit}'"),
    ("/step", "query", "Query position must be written with the digits 0-9, got '{digit}'"),
    ("/step", "seed", "Seed must be written with the digits 0-9, got '{digit}'"),
    ("/attention_export", "layer", "layer must be written with the digits 0-9, got '{digit}'"),
    ("/attention_export", "head", "head must be 0 to 3 or 'mean' (their average), got '{digit}'"),
]


def test_other_scripts_digits_are_refused_with_a_message(server, client):
    """Each digit of OTHER_DIGITS in each parameter of DIGIT_MESSAGES (one test for the table, each failure named)."""

    def check(endpoint, parameter, message, digit):
        params = {"text": "emma", parameter: digit}
        if endpoint == "/attention_export":
            params["what"] = "map.png"  # the one export that reads the layer and head
        error = app_error(client, endpoint, **params)
        assert message.format(digit=digit) in error, error

    cases = [
        (f"{endpoint} {parameter}={digit!r}", (endpoint, parameter, message, digit))
        for digit in OTHER_DIGITS
        for endpoint, parameter, message in DIGIT_MESSAGES
    ]
    assert_every_case_leaves_the_log_alone(server[1], cases, check)


def test_a_good_call_works_after_the_other_digits(client):
    refused = {
        "/attention_values": dict(layer="٣", head="０", query="²"),
        "/step": dict(layer="٣", head="０"),
        "/attention_export": dict(what="map.png", layer="²", head="٣"),
    }
    for endpoint, params in refused.items():
        assert "must be" in app_error(client, endpoint, text="emma", **params)
    values = call(client, "/attention_values", text="emma", layer=3, head="3", query=4)
    assert values["query"] == 4 and len(values["weights"]) == 5 and sum(values["weights"]) == pytest.approx(1, abs=1e-5)
    steps = call(client, "/step", text="emma", layer="3", head="2", query="4", seed="0")
    assert steps["tokens"] == [".", "e", "m", "m", "a"] and (steps["layer"], steps["head"], steps["query"]) == (3, 2, 4)
    exported = call(client, "/attention_export", text="emma", what="map.png", layer="2", head="1")
    assert exported.endswith("attention-tiny-names-5-tokens-layer-2-head-1.png")


# ---- a value of the wrong type (a list, a number for a text), as a script may send it -------------------------------

WRONG_TYPES = [
    ("/attention_values", dict(layer=[1])),
    ("/attention_values", dict(head=[1])),
    ("/step", dict(training=[1])),
    ("/names", dict(model=["tiny-names"])),
    ("/importance", dict(mode=["zero"])),
    ("/attention_export", dict(what=5)),
    ("/resume", dict(name=5)),
    ("/train", dict(data=5)),
    ("/attention_values", dict(text=5)),
    ("/attention_values", dict(text=["a"])),
    ("/next_tokens", dict(text=5)),
    ("/ablate", dict(prompt=5, new_tokens=3)),
    ("/ablate", dict(heads=["0.1"])),
    ("/compare", dict(other_text=5)),
    ("/attention_export", dict(what=["map.png"])),
    ("/grade", dict(answer=["1.1"])),
    ("/grade", dict(answer={"head": "1.1"})),
    ("/grade", dict(answer=True)),
]


def test_a_value_of_the_wrong_type_is_a_visitors_mistake_too(server, client):
    """Through gradio_client, as a script calls: each case of WRONG_TYPES refused with a message naming the parameter,
    no traceback and no Python internals in the answer (one test for the table, each failure named)."""

    def check(endpoint, params):
        error = app_error(client, endpoint, **params)
        wrong = next(iter(params))  # each case names its wrong value first
        assert f"{wrong} must be" in error, error
        assert not re.search(r"has no attribute|object of type|unhashable type|not subscriptable", error), error

    cases = [(f"{endpoint} {shown(params)}", (endpoint, params)) for endpoint, params in WRONG_TYPES]
    assert_every_case_leaves_the_log_alone(server[1], cases, check, forbidden=("Traceback",))


# ---- a value of the wrong JSON type, for every parameter of every named endpoint (the REST route, as a script sends) -

WRONG_VALUES = {"text": "x", "a number": 5, "a list": ["x"], "an object": {"x": 1}, "true": True}
EXPECTED_WORDS = {"str": "text", "int": "a whole number", "float": "a number", "bool": "true or false"}


def declared(client) -> list[tuple[str, list[tuple[str, str, object]]]]:
    """Each named endpoint and its parameters: (name, kind, default)."""
    from minigpt.demo.core.error_rule import declared_kind

    return [
        (
            name,
            [
                (p["parameter_name"], declared_kind(p["python_type"]["type"]), p.get("parameter_default"))
                for p in info["parameters"]
            ],
        )
        for name, info in sorted(api(client).items())
    ]


def wrong_for(kind: str | None) -> dict:
    """The JSON values of another type than `kind` (a number typed as text is a number's right type)."""
    if kind is None:
        return {}
    right = {
        "str": {"text"},
        "int": {"text", "a number"},
        "float": {"text", "a number"},
        "bool": {"text", "true", "a number"},
    }[kind]
    return {label: value for label, value in WRONG_VALUES.items() if label not in right}


def rest_call(url: str, endpoint: str, data: list) -> str:
    """The final SSE event of one call through Gradio's REST route (event: complete or event: error, with its data)."""
    import httpx

    with httpx.Client(timeout=HANG_S) as http:
        event = http.post(f"{url}gradio_api/call{endpoint}", json={"data": data}).json()["event_id"]
        body = http.get(f"{url}gradio_api/call{endpoint}/{event}").text
    return body.strip().split("\n\n")[-1]


def test_every_parameter_of_every_endpoint_refuses_a_wrong_type_by_name(server, client):
    """Every parameter refuses a JSON type it cannot be, and every kind of parameter (text, whole number, number,
    true/false) refuses each type it cannot be: an error naming the parameter and the type it wants; nothing in the
    log; then good calls still work. (Each parameter gets the wrong types in turn, one a call; the first parameter of
    each kind gets them all: the same check, a third of the calls.)"""
    from concurrent.futures import ThreadPoolExecutor

    url, process = server
    before = len(settled_log(process))
    calls, turn = [], itertools.count()  # (endpoint, parameter, label of the wrong value, its kind, the values sent)
    kinds_seen = set()
    for endpoint, parameters in declared(client):
        defaults = [default for _, _, default in parameters]
        for position, (name, kind, _) in enumerate(parameters):
            wrong = list(wrong_for(kind).items())
            if wrong and kind in kinds_seen:
                wrong = [wrong[next(turn) % len(wrong)]]
            kinds_seen.add(kind)
            for label, value in wrong:
                calls.append((endpoint, name, label, kind, defaults[:position] + [value] + defaults[position + 1 :]))
    assert len(calls) > 60 and {c[1] for c in calls} >= {"text", "layer", "head", "seed"}
    # Eight at a time, as independent visitors would send them, taking the endpoints in turn (an endpoint serves one
    # call at a time: eight calls of one endpoint would wait for each other): each refusal checked on its own answer.
    by_endpoint = {}
    for c in calls:
        by_endpoint.setdefault(c[0], []).append(c)
    calls = [c for turn in itertools.zip_longest(*by_endpoint.values()) for c in turn if c is not None]
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda c: rest_call(url, c[0], c[4]), calls))
    for (endpoint, name, label, kind, _), answer in zip(calls, answers):
        assert answer.startswith("event: error"), (endpoint, name, label, answer[:300])
        assert f"{name} must be {EXPECTED_WORDS[kind]}, got {label}" in answer, (endpoint, name, answer[:300])
    logged = settled_log(process)[before:]
    assert "Traceback" not in logged, logged[-3000:]
    names, _ = call(client, "/names", prefix="em", count=3, seed=0)
    assert all(n.startswith("em") for n in names.split("\n"))
    assert call(client, "/attention_values", text="emma", layer=1, head="2", query=3)["query"] == 3
