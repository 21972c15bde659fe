"""The graph of senders and receivers and attribution patching (minigpt.heads.graph, edge_attribution): the edges of a
2 x 4 model counted by this file's own rule; every receiver reading its own copy of the stream leaves the pass as it
was; an edge's EAP and EAP-IG score is the derivative of the metric along that edge's clean - reference difference,
computed here with this file's own hooks and autograd; attribution patching of each head at each position agrees with
exact patching on the specimen (the same top cell, 1.1 at the last position of the Romeo pair) and equals it on a
model whose metric is nearly linear in the heads' outputs; with its top cells patched exactly, the largest exact cells
of every pair the docs and issue 59 use are within 25% of exact patching."""

import pytest
import torch
from torch.nn import functional as F

import modeling_minigpt  # noqa: F401 (registers MiniGPT with the Auto classes)
from helpers import tiny_model, written_by
from minigpt import heads
from minigpt.heads import circuit_tasks, edge_attribution, graph
from minigpt.heads.errors import InstrumentError
from minigpt.heads.nodes import node_name

ROMEO, ROMEO_CORRUPTED = "Romeo and Juliet, Romeo and Jul", "Romeo and Jullet, Romeo and Jul"
ZORBAK, ZORBAK_CORRUPTED = "Then Zorbak spoke. Then Zor", "Then Zoxbak spoke. Then Zor"
BEXLEY, BEXLEY_CORRUPTED = "We went to Bexley today. We went to Bex", "We went to Boxley today. We went to Bex"


def test_the_graph_of_two_layers_of_four_heads_has_110_edges():
    config = tiny_model().config  # 2 layers x 4 heads, the specimen's shape
    found = graph.graph_of(config)
    assert len(found.senders) == 1 + 2 * (4 + 1) and len(found.receivers) == 2 * (3 * 4 + 1) + 1
    # This file's rule: a receiver reads every sender of an earlier layer and the embeddings; an MLP reads its own
    # layer's heads too; the logits read everything. Layer 0's 12 head inputs read 1 sender, MLP 0 reads 5, layer 1's
    # 12 head inputs read 6, MLP 1 reads 10, the logits 11.
    assert found.total_edges == 12 * 1 + 5 + 12 * 6 + 10 + 11 == 110
    names = {found.edge_name(s, r) for s, r in found.exists.nonzero().tolist()}
    assert {("0.2", "1.1", "k"), ("mlp 0", "1.1", "v"), ("1.1", "logits", None), ("1.3", "mlp 1", None)} <= names
    assert not {("1.0", "1.1", "k"), ("mlp 1", "1.1", "q"), ("mlp 0", "0.1", "q"), ("mlp 1", "mlp 1", None)} & names


def induction_task_of(model, count=3, half=6, seed=0):
    return circuit_tasks.induction_task(model, count=count, half=half, seed=seed)


def test_every_receiver_reading_its_own_copy_leaves_the_pass_as_it_was(specimen):
    for model in (tiny_model(seed=2), specimen[0]):
        task = induction_task_of(model)
        value, gradients, logits = edge_attribution.graph_gradients(
            model, graph.graph_of(model.config), task.clean, task
        )
        with torch.no_grad():
            plain = model(task.clean, use_cache=False).logits
        # The same float32 operations, a head's q, k, v from its rows of qkv_proj alone: equal to rounding (~1e-6).
        torch.testing.assert_close(logits, plain, atol=1e-5, rtol=1e-5)
        assert value == pytest.approx(float(task.measure(plain)), abs=1e-5)
        assert gradients.shape == (len(graph.graph_of(model.config).receivers), *task.clean.shape, model.config.n_embd)
        assert all(p.grad is None for p in model.parameters())  # the model's parameters are left without gradients


def derivative_along(model, task, receiver, into, direction, embeds=None) -> float:
    """d metric / d t at t = 0 of a run of the corrupted prompts in which `receiver` alone reads its stream + t *
    direction (a head's input through its layer's attn_norm and the whole qkv_proj, that input's columns kept; an
    MLP's through mlp_norm; the logits' through final_norm); `embeds` replace the first block's input."""
    t = torch.zeros((), requires_grad=True)
    handles, C, D = [], model.config.n_embd, model.config.head_dim
    if embeds is not None:
        handles.append(model.model.layers[0].register_forward_pre_hook(lambda m, args: (embeds, *args[1:])))
    if receiver == "logits":
        module = model.model.final_norm
    elif receiver.startswith("mlp"):
        module = model.model.layers[int(receiver.split()[1])].mlp_norm
    if receiver == "logits" or receiver.startswith("mlp"):
        handles.append(module.register_forward_pre_hook(lambda m, args: (args[0] + t * direction,)))
    else:
        layer, head = map(int, receiver.split("."))
        block, entering = model.model.layers[layer], {}
        first = "qkv".index(into) * C + head * D
        handles.append(block.register_forward_pre_hook(lambda m, args: entering.update(x=args[0])))

        def splice(module, args, output):
            moved = F.linear(block.attn_norm(entering["x"] + t * direction), module.weight, module.bias)
            return torch.cat([output[..., :first], moved[..., first : first + D], output[..., first + D :]], dim=-1)

        handles.append(block.attn.qkv_proj.register_forward_hook(splice))
    try:
        metric = task.measure(model(task.corrupted, use_cache=False).logits)
        return float(torch.autograd.grad(metric, t)[0])
    finally:
        for handle in handles:
            handle.remove()


EDGES = [("0.2", "1.1", "k"), ("mlp 0", "1.1", "v"), ("embed", "0.1", "q"), ("0.3", "mlp 1", None),
         ("1.1", "logits", None), ("embed", "mlp 0", None)]  # fmt: skip


@pytest.mark.parametrize("method", ["eap", "eap-ig"])
def test_an_edges_score_is_the_metrics_derivative_along_that_edge(method):
    model = tiny_model(seed=4)
    task = induction_task_of(model, count=3, half=5, seed=2)
    the_graph = graph.graph_of(model.config)
    clean, corrupted = written_by(model, task.clean), written_by(model, task.corrupted)
    clean_out, _ = edge_attribution.recorded_outputs(model, task.clean)
    corrupted_out, _ = edge_attribution.recorded_outputs(model, task.corrupted)
    scores = edge_attribution.edge_scores(model, the_graph, task, clean_out, corrupted_out, method, steps=3)
    alphas = [0.0] if method == "eap" else [1 / 6, 3 / 6, 5 / 6]  # the midpoints of 3 steps
    for sender, receiver, into in EDGES:
        direction, way = clean[sender] - corrupted[sender], clean["embed"] - corrupted["embed"]
        along = [derivative_along(model, task, receiver, into, direction, corrupted["embed"] + a * way) for a in alphas]
        expected = sum(along) / len(alphas)
        s = [node_name(node) for node in the_graph.senders].index(sender)
        r = [the_graph.edge_name(0, r)[1:] for r in range(len(the_graph.receivers))].index((receiver, into))
        # Float32 sums over ~10^3 products in two orders: scores of ~1e-3 agree to ~1e-7.
        assert float(scores[s, r]) == pytest.approx(expected, rel=1e-3, abs=1e-6), (sender, receiver, into)
    assert float(scores[~the_graph.exists].abs().max()) == 0.0  # no edge, no score
    with pytest.raises(InstrumentError, match="'eap' or 'eap-ig'"):
        edge_attribution.edge_scores(model, the_graph, task, clean_out, corrupted_out, "acdc", 1)


def test_attribution_patching_finds_the_induction_head_where_exact_patching_does(specimen):
    """The Romeo pair: the same top cell (1.1 at the last position) and a correlation over every (layer, head,
    position) of 0.9996 (measured); the Zorbak pair: the same top cell, correlation 0.75 (the key's change is far from
    linear: 1.1's attention moves from 0.004 to 0.692)."""
    model, encode = specimen
    for (clean, corrupted), least in [((ROMEO, ROMEO_CORRUPTED), 0.99), ((ZORBAK, ZORBAK_CORRUPTED), 0.7)]:
        clean, corrupted = encode(clean), encode(corrupted)
        estimate = edge_attribution.attribution_patching(model, clean, corrupted, exact_top=0)  # first order alone
        exact = heads.patch_heads_by_position(model, clean, corrupted).effects
        assert estimate.shape == exact.shape == (2, 4, len(clean))
        T = len(clean)
        assert divmod(int(estimate.abs().argmax()), T) == divmod(int(exact.abs().argmax()), T) == (1 * 4 + 1, T - 1)
        assert float(torch.corrcoef(torch.stack([estimate.flatten(), exact.flatten()]))[0, 1]) > least
    with pytest.raises(InstrumentError, match="same number of tokens"):
        edge_attribution.attribution_patching(model, encode(ROMEO), encode(ROMEO)[:-1])
    with pytest.raises(InstrumentError, match="exact_top must be 0 or more"):
        edge_attribution.attribution_patching(model, encode(ROMEO), encode(ROMEO_CORRUPTED), exact_top=-1)


def test_attribution_patching_equals_exact_patching_where_the_metric_is_linear():
    """A random tiny model in float64 with every out_proj's weight scaled by 0.1: each head writes so little beside
    the embeddings that the logit difference is linear in what it writes, up to the second-order remainder, which
    scales with the size of the patch (measured: 1.2e-3 of the largest effect at 0.1, 1.0e-2 at 1). Exact patching
    reads float32 logits (~1e-8 here, 2e-5 of the largest effect). 1e-2 of the largest effect leaves room for both and
    still fails a wrong sign, position or normalisation, which err by the effect itself."""
    model = tiny_model(seed=3).double()
    with torch.no_grad():
        for block in model.model.layers:
            block.attn.out_proj.weight.mul_(0.1)
            block.mlp.out_proj.weight.mul_(0.1)
    clean = torch.randint(0, 50, (12,), generator=torch.Generator().manual_seed(1)).tolist()
    corrupted = clean[:-1] + [(clean[-1] + 7) % 50]  # the last token changed: the answer changes
    estimate = edge_attribution.attribution_patching(model, clean, corrupted, exact_top=0)
    exact = heads.patch_heads_by_position(model, clean, corrupted).effects
    largest = float(exact.abs().max())
    assert largest > 1e-4  # the heads do move the answer
    torch.testing.assert_close(estimate.to(exact.dtype), exact, atol=1e-2 * largest, rtol=0)


def random_twice_pairs(start_id: int, count: int = 3) -> list[tuple[list[int], list[int]]]:
    """Random characters of the specimen's written twice, the second copy cut after 6: the corrupted text changes the
    token after the first copy's 6th, the one an induction head copies."""
    generator, pairs = torch.Generator().manual_seed(1), []
    for _ in range(count):
        half = torch.randint(4, 79, (15,), generator=generator).tolist()
        clean = [start_id, *half, *half[:6]]
        pairs.append((clean, [*clean[:7], (clean[7] + 16) % 75 + 4, *clean[8:]]))
    return pairs


def test_the_top_cells_are_within_a_quarter_of_exact_patching(specimen):
    """Issue 59's pairs (Bexley, random tokens written twice) and the docs' (Romeo with Jullet and Julaet, Zorbak):
    the 3 largest exact cells of each head at each position, estimated within 25% of exact patching (relative, the
    issue's bound). First order misses by up to 3x (Bexley: 1.1 at the last position 0.34 for 1.00, 0.0 at position
    15 0.28 for 0.98; Zorbak: 0.2 at position 9 0.03 for 0.97) but ranks those cells first, so the default patches
    its 3 largest exactly: they are then exact patching's own numbers (float32 runs of other batch sizes: ~1e-6)."""
    model, encode = specimen
    texts = [(ROMEO, ROMEO_CORRUPTED), (ROMEO, "Romeo and Julaet, Romeo and Jul"), (ZORBAK, ZORBAK_CORRUPTED),
             (BEXLEY, BEXLEY_CORRUPTED)]  # fmt: skip
    first_order_misses = 0
    for clean, corrupted in [(encode(a), encode(b)) for a, b in texts] + random_twice_pairs(encode("")[0]):
        found = edge_attribution.estimated_patching(model, clean, corrupted)
        exact = heads.patch_heads_by_position(model, clean, corrupted).effects
        top = exact.flatten().abs().topk(3).indices
        estimated, first_order, truth = (grid.flatten()[top] for grid in (found.position, found.first_order, exact))
        assert ((estimated - truth).abs() <= 0.25 * truth.abs()).all(), (clean, estimated, truth)
        first_order_misses += int(((first_order - truth).abs() > 0.25 * truth.abs()).any())
        assert len(found.exact_cells) == 3 and found.first_order.shape == exact.shape
        for cell in found.exact_cells:  # what the default patched exactly is exact patching's number
            assert float(found.position[cell]) == pytest.approx(float(exact[cell]), abs=1e-5)
    assert first_order_misses >= 4  # the check bites: first order alone fails it on Romeo, Zorbak, Bexley, random
