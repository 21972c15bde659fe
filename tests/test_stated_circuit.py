"""A circuit a person states (minigpt.heads.stated_circuit), measured as a found one: heads written "0.2, 1.1" are
every edge among those heads, the embeddings, the MLPs and the logits (the list built here by hand); a path "0.2 ->
mlp 0 -> 1.1 k" is its consecutive pairs; each is measured exactly as circuit_faithfulness measures the same edges, on
the task's prompts and on the held-out sets (another seed 1000, half and twice the tokens), and what each part adds is
the faithfulness lost without it, recomputed here by circuit_faithfulness. On the shipped specimen (2 layers of 4
heads), 6 induction prompts of 8 tokens a copy."""

import pytest
from transformers import AutoModelForCausalLM

import modeling_minigpt  # noqa: F401 (registers MiniGPT with the Auto classes)
from helpers import SPECIMEN
from minigpt import heads

SMALL = dict(prompts=6, half=8, seed=3)
# The same float32 runs in another batch and order: equal to ~1e-5
CLOSE = 1e-5


@pytest.fixture(scope="module")
def specimen():
    return AutoModelForCausalLM.from_pretrained(SPECIMEN).eval()


def every_edge_among(model, stated: list[str]) -> list[tuple]:
    """Every edge among the heads `stated`, the embeddings, every MLP and the logits, by hand: a part sends to every
    head input and MLP of later layers (a head to its own layer's MLP too) and to the logits."""
    layers, n_head = model.config.n_layer, model.config.n_head
    senders = [("embed", -1, 0)]
    for layer in range(layers):
        senders += [(f"{layer}.{h}", layer, 0) for h in range(n_head) if f"{layer}.{h}" in stated]
        senders.append((f"mlp {layer}", layer, 1))
    edges = []
    for name, layer, after in senders:
        for later in range(layers):
            if later > layer:
                edges += [(name, f"{later}.{h}", i) for h in range(n_head) if f"{later}.{h}" in stated for i in "qkv"]
            if later > layer or later == layer and after == 0:
                edges.append((name, f"mlp {later}", None))
        edges.append((name, "logits", None))
    return edges


def test_heads_are_every_edge_among_them_the_embeddings_mlps_and_logits(specimen):
    measured = heads.measure_circuit(specimen, "0.2, 1.1", held_out={}, **SMALL)
    by_hand = every_edge_among(specimen, ["0.2", "1.1"])
    assert measured.form == "heads" and measured.heads == ["0.2", "1.1"] and not measured.unread
    assert sorted(measured.edges, key=str) == sorted(by_hand, key=str)
    assert measured.found_on.faithfulness == pytest.approx(
        heads.circuit_faithfulness(specimen, by_hand, **SMALL), abs=CLOSE
    )
    low, high = measured.found_on.low, measured.found_on.high
    assert low <= measured.found_on.faithfulness <= high  # the set's value lies within its prompts'
    # What a head adds: the faithfulness lost without every edge out of it
    for part in measured.parts:
        without = heads.circuit_faithfulness(specimen, [e for e in by_hand if e[0] != part.name], **SMALL)
        assert part.kind == "head" and part.without == pytest.approx(without, abs=CLOSE)
        assert part.adds == pytest.approx(measured.found_on.faithfulness - without, abs=CLOSE)
    assert [p.name for p in measured.parts] == ["0.2", "1.1"]


def test_heads_apart_by_spaces_or_commas_are_the_same_circuit(specimen):
    forms = [
        heads.measure_circuit(specimen, text, held_out={}, max_runs=0, **SMALL) for text in ("0.2, 1.1", "1.1 0.2")
    ]
    assert forms[0].edges == forms[1].edges and forms[0].found_on == forms[1].found_on


PATH = "embed -> 0.2 v -> 1.1 k -> logits; 0.2 -> mlp 0 -> 1.1k"
PATH_EDGES = [
    ("embed", "0.2", "v"), ("0.2", "1.1", "k"), ("1.1", "logits", None), ("0.2", "mlp 0", None),
    ("mlp 0", "1.1", "k"),
]  # fmt: skip


def test_a_path_is_its_consecutive_pairs_measured_on_the_held_out_sets_too(specimen):
    measured = heads.measure_circuit(specimen, PATH, **SMALL)
    assert measured.form == "edges" and sorted(measured.edges, key=str) == sorted(PATH_EDGES, key=str)
    assert measured.heads == ["0.2", "1.1"] and not measured.unread
    assert measured.found_on.faithfulness == pytest.approx(
        heads.circuit_faithfulness(specimen, PATH_EDGES, **SMALL), abs=CLOSE
    )
    sizes = {"another seed": 8, "shorter": 4, "longer": 16}
    assert [h.prompts for h in measured.held_out] == list(sizes)
    for held in measured.held_out:
        by_hand = heads.circuit_faithfulness(specimen, PATH_EDGES, prompts=6, half=sizes[held.prompts], seed=1003)
        assert held.faithfulness == pytest.approx(by_hand, abs=CLOSE) and held.length == 2 * sizes[held.prompts] + 1
    for part in measured.parts:  # each edge: the faithfulness lost without it
        rest = [e for e in PATH_EDGES if f"{e[0]} -> {e[1]}" + (f" {e[2]}" if e[2] else "") != part.name]
        assert len(rest) == len(PATH_EDGES) - 1
        assert part.without == pytest.approx(heads.circuit_faithfulness(specimen, rest, **SMALL), abs=CLOSE)
    assert measured.complete and len(measured.parts) == len(PATH_EDGES)


def test_a_part_whose_output_nothing_reads_is_named_and_the_parts_measured_stop_at_max_runs(specimen):
    measured = heads.measure_circuit(specimen, "0.2 -> 1.1 k, embed -> mlp 1", held_out={}, max_runs=1, **SMALL)
    assert measured.unread == ["1.1", "mlp 1"]  # they receive an edge of it and send none: they change nothing
    assert measured.found_on.faithfulness == pytest.approx(0.0, abs=CLOSE)  # nothing reaches the logits
    assert len(measured.parts) == 1 and not measured.complete


@pytest.mark.parametrize(
    "circuit, named",
    [
        ("1.1, 0.2, 1.1", ["0.2", "1.1"]),  # a list: each head once, in the graph's order
        ("embed -> 0.2 v -> mlp 0 -> 1.1 k", ["0.2", "1.1"]),  # a path: the heads at either end of its edges
        ("0.3 -> logits; embed -> 1.0 q", ["0.3", "1.0"]),  # a head only read into counts, as one only read
        ([("embed", "mlp 0", None), ("mlp 0", "logits", None)], []),  # edges as circuit_faithfulness takes them
    ],
)
def test_the_heads_a_circuit_names_are_those_written(specimen, circuit, named):
    """What the exercise that asks for at most N heads counts: every head written, in a list or at an edge's end."""
    from minigpt.heads.stated_circuit import stated_heads

    assert stated_heads(circuit, specimen) == named
