"""The library's refusals, used without the demo (issue 57): every token id, count, receiver, sender and edge a public
instrument takes is checked where it enters and refused by the library's own error (InstrumentError) with a message
that names the argument and the value and says what to pass, instead of a bare IndexError or RuntimeError, Python's
own messages, or a wrong value taken silently; the forms the docstrings give are taken alike. On the shipped
specimen (79 tokens, 2 layers of 4 heads) with six-token texts: each refusal comes before any costly pass."""

import re

import pytest
import torch

import modeling_minigpt  # noqa: F401 (registers MiniGPT with the Auto classes)
from minigpt import heads
from minigpt.heads.errors import InstrumentError

V = 79  # the specimen's vocabulary: ids 0 to 78
START = 77  # its start token
CLEAN, CORRUPTED = [START, 1, 2, 3, 1, 2], [START, 4, 5, 6, 1, 2]


def refused(call, message: str) -> None:
    with pytest.raises(InstrumentError, match=re.escape(message)):
        call()


# ---- token ids ------------------------------------------------------------------------------------------------------

# Each public instrument that takes token ids, given `ids` where it takes them, and the argument's name.
IDS_TAKERS = {
    "find_circuit (pairs)": (lambda m, ids: heads.find_circuit(m, [ids], [CORRUPTED]), "clean_ids"),
    "find_circuit (induction)": (lambda m, ids: heads.find_circuit(m, None, [ids], "induction"), "corrupted_ids"),
    "circuit_faithfulness": (
        lambda m, ids: heads.circuit_faithfulness(m, [("0.2", "1.1", "k")], [CLEAN], [ids]),
        "corrupted_ids",
    ),
    "attribution_patching": (lambda m, ids: heads.attribution_patching(m, ids, CORRUPTED), "clean_ids"),
    "estimated_patching": (lambda m, ids: heads.estimated_patching(m, CLEAN, ids), "corrupted_ids"),
    "patch_paths": (lambda m, ids: heads.patch_paths(m, ids, CORRUPTED, (1, 1)), "clean_ids"),
    "patch_path": (lambda m, ids: heads.patch_path(m, CLEAN, ids, "embed", (1, 1), "k"), "corrupted_ids"),
    "patch_two_step": (
        lambda m, ids: heads.patch_two_step(m, ids, CORRUPTED, "0.2", "mlp 0", (1, 1), "k"),
        "clean_ids",
    ),
    "patch_heads": (lambda m, ids: heads.patch_heads(m, ids, CORRUPTED), "clean_ids"),
    "patch_heads_by_position": (lambda m, ids: heads.patch_heads_by_position(m, CLEAN, ids), "corrupted_ids"),
    "patch_residual": (lambda m, ids: heads.patch_residual(m, ids, CORRUPTED), "clean_ids"),
    "patch_units": (lambda m, ids: heads.patch_units(m, ids, CORRUPTED, "output", [(0, 0)]), "clean_ids"),
    "logit_attribution": (lambda m, ids: heads.logit_attribution(m, ids), "input_ids"),
    "qk_attribution": (lambda m, ids: heads.qk_attribution(m, ids, 1, 1), "input_ids"),
    "run_forward_pass": (lambda m, ids: heads.run_forward_pass(m, ids), "input_ids"),
    "ov_circuit": (lambda m, ids: heads.ov_circuit(m, 0, 1, tokens=ids), "tokens"),  # layer 0: the bare W_E's rows
    "effective_embedding": (lambda m, ids: heads.effective_embedding(m, 1, tokens=ids), "tokens"),
    "induction_scores": (lambda m, ids: heads.induction_scores(m, torch.tensor([CLEAN, ids])), "probes"),
    "ablation_values": (lambda m, ids: heads.ablation_values(m, torch.tensor([ids, CLEAN]), "mean"), "prompts"),
    "measure": (lambda m, ids: heads.measure(m, [CLEAN, ids]), "windows[1]"),
}


@pytest.mark.parametrize("bad", [V, -1, 10**9])
@pytest.mark.parametrize("instrument", IDS_TAKERS)
def test_a_token_id_outside_the_vocabulary_is_refused_by_name_where_the_ids_enter(specimen, instrument, bad):
    """79 and 10**9 failed in the embedding as a bare IndexError; -1 did too, or (the bare W_E's rows) was read as the
    last token."""
    call, name = IDS_TAKERS[instrument]
    ids = [*CLEAN[:3], bad, *CLEAN[4:]]
    refused(lambda: call(specimen[0], ids), f"{name} holds the token id {bad} (at position 3")
    refused(lambda: call(specimen[0], ids), "give token ids 0 to 78")


@pytest.mark.parametrize("ids", [[START, 1.5, 2], "abc", [[START, 1], [START]], torch.tensor([START, 1.0])])
def test_ids_that_are_not_whole_numbers_of_one_length_are_refused(specimen, ids):
    refused(lambda: heads.run_forward_pass(specimen[0], ids), "input_ids must be token ids")


# ---- counts ---------------------------------------------------------------------------------------------------------


def count_refusals(model):
    """Calls with a count an instrument cannot take, and the start of each message."""
    recorded = heads.run_forward_pass(model, CLEAN)
    pair = (CLEAN, CORRUPTED)
    return [
        (
            lambda: heads.ov_circuit(model, 1, 1, top=-1),
            "top must be 1 or more (each row's largest entries kept), got -1",
        ),
        (lambda: heads.ov_circuit(model, 1, 1, top=0), "top must be 1 or more"),
        (lambda: heads.ov_circuit(model, 1, 1, top=2.5), "top must be a whole number, got float 2.5"),
        (lambda: heads.ov_circuit(model, 1, 1, top=3, rows_per_block=0), "rows_per_block must be 1 or more"),
        (lambda: heads.patch_heads(model, *pair, batch_size=0), "batch_size must be 1 or more"),
        (lambda: heads.patch_heads(model, *pair, batch_size=-1), "batch_size must be 1 or more"),
        (lambda: heads.patch_heads_by_position(model, *pair, batch_size=0), "batch_size must be 1 or more"),
        (lambda: heads.patch_residual(model, *pair, batch_size=-1), "batch_size must be 1 or more"),
        (lambda: heads.patch_units(model, *pair, "output", [(0, 0)], batch_size=0), "batch_size must be 1 or more"),
        (
            lambda: heads.patch_paths(model, *pair, (1, 1), batch_size=0),
            "batch_size must be 1 or more (the patched runs a forward pass takes at once), got 0.",
        ),
        (
            lambda: heads.patch_paths(model, *pair, (1, 1), batch_size=-1),
            "batch_size must be 1 or more (the patched runs a forward pass takes at once), got -1.",
        ),
        (lambda: heads.patch_units(model, *pair, "output", [(0, 9)]), "units holds (0, 9), outside"),
        (lambda: heads.next_token_probabilities(model, recorded, 1, k=0), "k must be 1 or more"),
        (lambda: heads.logit_lens(model, recorded, 1, k=-1), "k must be 1 or more"),
        (lambda: heads.top_heads(torch.zeros(2, 4), k=0), "k must be 1 or more"),
        (lambda: heads.find_circuit(model, prompts=0), "prompts must be 1 or more"),
        (lambda: heads.find_circuit(model, half=1), "half must be 2 or more"),
        (lambda: heads.find_circuit(model, steps=-1), "steps must be 1 or more"),
        (lambda: heads.find_circuit(model, target="all"), "target (the faithfulness to keep) is above 0"),
        (lambda: heads.measure_circuit(model, "1.1", max_runs=-1), "max_runs must be 0 or more"),
        (lambda: heads.copying_baseline(V, 32, samples=0), "samples must be 1 or more"),
        (lambda: heads.composition_baseline(model, "k", samples=0), "samples must be 1 or more"),
        (lambda: heads.repeated_tokens([1, 2, 3], START, 0, 2), "count must be 1 or more"),
        (lambda: heads.variants([CLEAN], 0, list(range(V)), {START}), "count must be 1 or more"),
        (lambda: heads.induction_probe(list(range(V)), START, 128, 0), "probes must be 1 or more"),
    ]


def test_a_count_an_instrument_cannot_take_is_refused_by_name(specimen):
    """top -1 was a bare RuntimeError from topk; batch_size 0 Python's "range() arg 3 must not be zero", -1
    torch.cat's "expected a non-empty list"."""
    for call, message in count_refusals(specimen[0]):
        refused(call, message)


# ---- receivers, senders, heads --------------------------------------------------------------------------------------

PATH_CALLS = {
    "patch_paths": lambda m, receiver: heads.patch_paths(m, CLEAN, CORRUPTED, receiver),
    "patch_path": lambda m, receiver: heads.patch_path(m, CLEAN, CORRUPTED, "embed", receiver, "k"),
    "patch_two_step": lambda m, receiver: heads.patch_two_step(m, CLEAN, CORRUPTED, "0.2", "mlp 0", receiver, "k"),
}


@pytest.mark.parametrize(
    "receiver, message",
    [
        ((1, 1, 1), "receiver (1, 1, 1): not a head: give (layer, head) such as (1, 1), or its name '1.1'."),
        ((1,), "receiver (1,): not a head"),
        ("mlp 0", "receiver 'mlp 0': not a head"),
        ("one.one", "receiver 'one.one': not a head"),
        (None, "receiver None: not a head"),
        ((1, 9), "receiver (1, 9): head must be 0 to 3 (each layer has 4 heads), got 9."),
        ("1.-1", "receiver '1.-1': not a head"),
    ],
)
@pytest.mark.parametrize("instrument", PATH_CALLS)
def test_a_receiver_that_is_not_one_of_the_models_heads_is_refused(specimen, instrument, receiver, message):
    """(1, 1, 1) was taken silently as head (1, 1) (its third number read as checked_head's name)."""
    refused(lambda: PATH_CALLS[instrument](specimen[0], receiver), message)


@pytest.mark.parametrize(
    "sender, message",
    [
        ((0, 1, 2), "sender (0, 1, 2): cannot read it as a node: write a head as 'L.H' ('1.1')"),
        (("head", 0), "sender ('head', 0): cannot read it as a node"),
        (("mlp", 0, 1), "sender ('mlp', 0, 1): cannot read it as a node"),
        (7, "sender 7: cannot read it as a node"),
        (("head", 0, -1), "sender ('head', 0, -1): head must be 0 to 3"),
    ],
)
def test_a_sender_that_is_no_node_is_refused(specimen, sender, message):
    refused(lambda: heads.patch_path(specimen[0], CLEAN, CORRUPTED, sender, (1, 1), "k"), message)
    refused(lambda: heads.patch_two_step(specimen[0], CLEAN, CORRUPTED, sender, "mlp 0", (1, 1), "k"), message)


def test_an_intermediate_a_receiver_input_or_an_ablated_head_that_cannot_be_is_refused(specimen):
    model, recorded = specimen[0], heads.run_forward_pass(specimen[0], CLEAN)
    refused(lambda: heads.patch_two_step(model, CLEAN, CORRUPTED, "0.2", (0,), (1, 1), "k"), "intermediate (0,):")
    refused(lambda: heads.patch_path(model, CLEAN, CORRUPTED, "embed", (1, 1), ["k"]), "receiver_input must be")
    refused(lambda: heads.ablated_pass(model, recorded, [(0, 1, 2)], "zero"), "heads (0, 1, 2): not a head")
    refused(lambda: heads.head_mask(["mlp 1"], 2, 4), "heads 'mlp 1': not a head")


QK_REFUSALS = {  # qk_attribution(model, CLEAN, layer, head, query, key) -> the message's start
    (2, 1, -1, None): "layer must be 0 to 1 (the model has 2 layers), got 2.",
    (-1, 1, -1, None): "layer must be 0 to 1",
    (1, 4, -1, None): "head must be 0 to 3 (each layer has 4 heads), got 4.",
    (1, -1, -1, None): "head must be 0 to 3",
    (1, 1.0, -1, None): "head must be a whole number, got float 1.0.",
    (1, 1, 6, None): "query 6 is outside the text's 6 tokens (0 to 5, or -1 for the last).",
    (1, 1, -1, 6): "key 6 is outside the text's 6 tokens",
    (1, 1, 2, 3): "key 3 comes after the query 2: a query sees the keys 0 to 2 (the causal mask).",
    (1, 1, -1, "9"): "key must be a whole number, got str '9'.",
}


@pytest.mark.parametrize("arguments", QK_REFUSALS)
def test_a_layer_head_query_or_key_that_qk_attribution_cannot_take_is_refused(specimen, arguments):
    """A negative head would be read as the last; a key after the query has no score (the causal mask)."""
    refused(lambda: heads.qk_attribution(specimen[0], CLEAN, *arguments), QK_REFUSALS[arguments])


def test_a_head_given_by_its_name_or_either_tuple_is_the_same_head(specimen):
    """The forms the docstrings give for a receiver: (layer, head), ("head", layer, head) and "L.H" (as the page
    names it), one path patched each: the same numbers exactly (the same runs)."""
    model = specimen[0]
    encode = specimen[1]
    clean, corrupted = encode("Then Zorbak spoke. Then Zor"), encode("Then Zoxbak spoke. Then Zor")
    found = [heads.patch_path(model, clean, corrupted, "mlp 0", r, "k") for r in [(1, 1), "1.1", ("head", 1, 1)]]
    assert found[0] == found[1] == found[2]
    masks = [heads.head_mask([h], 2, 4) for h in [(0, 2), "0.2", ("head", 0, 2), [0, 2]]]
    assert all(torch.equal(mask, masks[0]) for mask in masks) and int(masks[0].sum()) == 1 and masks[0][0, 2]


# ---- edges ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "edges, message",
    [
        (["0.2 -> 1.1 k"], "edges[0] is '0.2 -> 1.1 k': give each edge as an Edge (what find_circuit gives) or a "),
        ("0.2 1.1 k", "edges must be a list of edges, got '0.2 1.1 k': give each edge as an Edge"),
        (heads.Edge("0.2", "1.1", "k", 0.0), "edges must be a list of edges, got Edge("),
        ([("0.2", "1.1", "k"), ("0.2", "1.1")], "edges[1] is ('0.2', '1.1'): give each edge"),
        (5, "edges must be a list of edges, got 5"),
        ([("0.9", "1.1", "k")], "edges[0]'s sender '0.9': head must be 0 to 3"),
        ([("0.2", (1, 1, 1), "k")], "edges[0]'s receiver (1, 1, 1): cannot read it as a node"),
        ([("0.2", "1.1", "o")], "edges[0]: an edge into a head names its input 'q', 'k' or 'v'"),
    ],
)
def test_edges_not_in_a_documented_form_are_refused_by_name(specimen, edges, message):
    """Edges as strings said "too many values to unpack (expected 3)"."""
    refused(lambda: heads.circuit_faithfulness(specimen[0], edges, prompts=2, half=3), message)


def test_an_edge_as_an_edge_or_a_tuple_of_names_or_nodes_is_the_same_edge(specimen):
    """The documented forms of an edge: the same circuit, the same faithfulness exactly (the same exact runs)."""
    forms = [
        [heads.Edge("0.2", "1.1", "k", 0.0), heads.Edge("1.1", "logits", None, 0.0)],
        [("0.2", "1.1", "k"), ("1.1", "logits", None)],
        [(("head", 0, 2), (1, 1), "k"), ((1, 1), ("logits",), None)],
    ]
    found = [heads.circuit_faithfulness(specimen[0], edges, prompts=3, half=4) for edges in forms]
    assert found[0] == found[1] == found[2]


# ---- a circuit a person states ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "circuit, message",
    [
        ("", "the circuit is empty: write heads ('0.2, 1.1'"),
        (
            "0.2, mlp 0",
            "'mlp 0' is not a head: a list of heads names heads only ('0.2, 1.1'), the embeddings, every MLP",
        ),
        ("0.2, 1.9", "head must be 0 to 3 (each layer has 4 heads), got 9"),
        ("0.2, banana", "head 'banana': cannot read it as a head ('1.1'). In a circuit, write heads"),
        ("0.2 -> 1.1", "0.2 -> 1.1: name the input of 1.1 the edge goes into: '1.1 q', '1.1 k' or '1.1 v'."),
        ("0.2 -> mlp 0 k", "'mlp 0 k': only a head has inputs q, k and v"),
        ("1.1 -> 0.2 k", "there is no edge 1.1 -> 0.2: a part sends only to parts of later layers"),
        ("0.2 k -> 1.1 q", "begins with 0.2 k: a path's first node sends, write it without q, k or v"),
        ("logits -> 1.1 q", "logits -> 1.1: the embeddings, heads and MLPs send; heads, MLPs and the logits receive"),
        ("0.2 -> 1.1 k, 0.1", "'0.1' stands alone among edges: write either heads ('0.2, 1.1') or edges"),
        ("0.2 -> -> 1.1 k", "cannot read it as a node: write a head as 'L.H'"),
        ("0.2, " * 1000, "the circuit is 5000 characters: at most 4000."),
        (5, "edges must be a list of edges, got 5"),
    ],
)
def test_a_stated_circuit_that_cannot_be_read_is_refused_with_what_to_write(specimen, circuit, message):
    refused(lambda: heads.measure_circuit(specimen[0], circuit, prompts=2, half=3), message)
