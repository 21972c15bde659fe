"""A found circuit in EAP-IG's graph JSON layout (minigpt.heads.eap_json): the names are the ones EAP-IG's
`Graph.from_model` gives (its loop written out here), the specimen's circuit comes back from the JSON text as it was
found, a graph written by hand in that layout reads to the edges it names, and what is no such graph is refused."""

import json

import pytest
from transformers import AutoModelForCausalLM

import modeling_minigpt  # noqa: F401 (registers MiniGPT with the Auto classes)
from helpers import SPECIMEN
from minigpt import heads
from minigpt.heads.discovery import Edge
from minigpt.heads.errors import InstrumentError


@pytest.fixture(scope="module")
def specimen():
    return AutoModelForCausalLM.from_pretrained(SPECIMEN).eval()


@pytest.fixture(scope="module")
def found(specimen):
    return heads.find_circuit(specimen)  # the defaults: EAP-IG, mean ablation, 20 induction prompts


def eap_ig_edge_names(n_layers: int, n_heads: int) -> list[str]:
    """The edge names of EAP-IG's Graph.from_model for a sequential model, its loop written out: every node of the
    stream so far into each head's q, k, v; into the MLP, the layer's heads too; everything into the logits."""
    stream, names = ["input"], []
    for layer in range(n_layers):
        attention = [f"a{layer}.h{head}" for head in range(n_heads)]
        names += [f"{node}->{head}<{letter}>" for node in stream for head in attention for letter in "qkv"]
        stream += attention
        names += [f"{node}->m{layer}" for node in stream]
        stream.append(f"m{layer}")
    return names + [f"{node}->logits" for node in stream]


def test_the_specimens_circuit_is_written_in_eap_igs_layout_and_read_back(specimen, found):
    data = json.loads(json.dumps(heads.circuit_to_eap_json(found, specimen)))  # through the JSON text
    assert data["cfg"] == {"n_layers": 2, "n_heads": 4, "parallel_attn_mlp": False, "d_model": 128}
    assert sorted(data["edges"]) == sorted(eap_ig_edge_names(2, 4)) and len(data["edges"]) == 110
    assert sum(entry["in_graph"] for entry in data["edges"].values()) == found.kept_edges == 22
    assert {"input->a0.h0<v>", "a1.h1->logits", "m0->a1.h1<k>"} <= {
        n for n, e in data["edges"].items() if e["in_graph"]
    }
    assert data["edges"]["a1.h1->logits"]["score"] == next(
        e.score for e in found.ranking if (e.sender, e.receiver) == ("1.1", "logits")
    )
    in_graph = {name for name, node in data["nodes"].items() if node["in_graph"]}
    assert {f"a{h.replace('.', '.h')}" for h in found.heads} == {n for n in in_graph if n.startswith("a")}
    assert set(data["nodes"]) == {"input", "logits", "m0", "m1"} | {
        f"a{layer}.h{h}" for layer in range(2) for h in range(4)
    }
    assert heads.circuit_from_eap_json(data, specimen) == found.edges  # the same edges, order and scores
    faithfulness = heads.circuit_faithfulness(specimen, heads.circuit_from_eap_json(data))
    assert faithfulness == pytest.approx(found.faithfulness, abs=1e-5)


def test_a_graph_written_by_hand_in_eap_igs_layout_reads_to_the_edges_it_names(specimen):
    data = {
        "cfg": {"n_layers": 2, "n_heads": 4, "parallel_attn_mlp": False, "d_model": 128},
        "nodes": {"input": {"in_graph": True}, "a0.h1": {"in_graph": True}, "m1": {"in_graph": True}},
        "edges": {
            "input->a0.h0<q>": {"score": -0.5, "in_graph": True},
            "a0.h1->m0": {"score": 0.25, "in_graph": True},
            "m1->logits": {"score": -1.0, "in_graph": True},
            "a0.h2->a1.h1<k>": {"score": 2.0, "in_graph": False},
        },
    }
    edges = heads.circuit_from_eap_json(data, specimen)
    assert edges == [
        Edge("mlp 1", "logits", None, -1.0),
        Edge("embed", "0.0", "q", -0.5),
        Edge("0.1", "mlp 0", None, 0.25),
    ]
    by_name = [("mlp 1", "logits", None), ("embed", "0.0", "q"), ("0.1", "mlp 0", None)]
    assert heads.circuit_faithfulness(specimen, edges, prompts=4, half=6) == heads.circuit_faithfulness(
        specimen, by_name, prompts=4, half=6
    )


def test_what_is_no_eap_ig_graph_of_the_model_is_refused(specimen):
    cfg = {"n_layers": 2, "n_heads": 4, "parallel_attn_mlp": False, "d_model": 128}
    for data, message in [
        ([], "'cfg', 'nodes' and 'edges'"),
        ({"cfg": {}, "nodes": {}, "edges": {}}, "n_layers and n_heads"),
        ({"cfg": cfg | {"parallel_attn_mlp": True}, "nodes": {}, "edges": {}}, "parallel attention"),
        ({"cfg": cfg | {"n_heads": 12}, "nodes": {}, "edges": {}}, "the model 2 of 4"),
        ({"cfg": cfg | {"n_layers": 10**6}, "nodes": {}, "edges": {}}, "at most 2,048 heads"),
        ({"cfg": cfg, "nodes": {}, "edges": {"a1.h1->a0.h0<q>": {"in_graph": True}}}, "no edge of a graph"),
        ({"cfg": cfg, "nodes": {}, "edges": {"attn1->logits": {"in_graph": True}}}, "not a node of EAP-IG"),
        ({"cfg": cfg, "nodes": {}, "edges": {"m0->logits": {"in_graph": "yes"}}}, "'in_graph': true or false"),
        ({"cfg": cfg, "nodes": {}, "edges": {"m0->logits": {"in_graph": True, "score": "big"}}}, "is a number"),
    ]:
        with pytest.raises(InstrumentError, match=message):
            heads.circuit_from_eap_json(data, specimen)
