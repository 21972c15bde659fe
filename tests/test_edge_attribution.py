"""The graph of senders and receivers and attribution patching (minigpt.heads.graph, edge_attribution): the edges of a 2
x 4 model counted by this file's own rule; every receiver reading its own copy of the stream leaves the pass as it was;
every edge's EAP and EAP-IG score is the papers' in EAP-IG's convention, against a reference written here from the
papers with this file's own hooks and autograd (the gradient at the clean run for EAP, EAP-IG's interpolation steps,
(reference - clean) . gradient, the mean over prompts); attribution patching of each head at each position agrees with
exact patching on the specimen (the same top cell, 1.1 at the last position of the Romeo pair) and equals it on a model
whose metric is nearly linear in the heads' outputs; with its top cells patched exactly, the largest exact cells of
every pair the docs and issue 59 use are within 25% of exact patching."""

import pytest
import torch
from torch.nn import functional as F

import modeling_minigpt  # noqa: F401 (registers MiniGPT with the Auto classes)
from helpers import tiny_model, written_by
from minigpt import heads
from minigpt.heads import circuit_tasks, edge_attribution, graph
from minigpt.heads.errors import InstrumentError

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


def receiver_gradient(model, ids, task, receiver, into, embeds=None) -> torch.Tensor:
    """(N, T, C) d metric / d delta at delta = 0 for a run of `ids` in which `receiver` alone reads its stream + delta
    (a head's input through its layer's attn_norm and the whole qkv_proj, that input's columns kept; an MLP's through
    mlp_norm; the logits' through final_norm); `embeds` replace the first block's input. This file's own hooks."""
    delta = torch.zeros(*ids.shape, model.config.n_embd, requires_grad=True)
    handles, C, D = [], model.config.n_embd, model.config.head_dim
    if embeds is not None:
        handles.append(model.model.layers[0].register_forward_pre_hook(lambda m, args: (embeds, *args[1:])))
    if receiver == "logits":
        module = model.model.final_norm
    elif receiver.startswith("mlp"):
        module = model.model.layers[int(receiver.split()[1])].mlp_norm
    if receiver == "logits" or receiver.startswith("mlp"):
        handles.append(module.register_forward_pre_hook(lambda m, args: (args[0] + delta,)))
    else:
        layer, head = map(int, receiver.split("."))
        block, entering = model.model.layers[layer], {}
        first = "qkv".index(into) * C + head * D
        handles.append(block.register_forward_pre_hook(lambda m, args: entering.update(x=args[0])))

        def splice(module, args, output):
            moved = F.linear(block.attn_norm(entering["x"] + delta), module.weight, module.bias)
            return torch.cat([output[..., :first], moved[..., first : first + D], output[..., first + D :]], dim=-1)

        handles.append(block.attn.qkv_proj.register_forward_hook(splice))
    try:
        metric = task.measure(model(ids, use_cache=False).logits)
        return torch.autograd.grad(metric, delta)[0]
    finally:
        for handle in handles:
            handle.remove()


def senders_before(model, layer: int) -> list[str]:
    """The embeddings and every sender of the layers before `layer`."""
    earlier = [
        [f"{before}.{head}" for head in range(model.config.n_head)] + [f"mlp {before}"] for before in range(layer)
    ]
    return ["embed"] + [name for names in earlier for name in names]


def edges_of(model) -> list[tuple[str, str, str | None]]:
    """Every edge by this file's rule (the 110-edge test's): a head reads the embeddings and every sender of an earlier
    layer, an MLP its own layer's heads too, the logits every sender."""
    edges, heads_of = [], lambda layer: [f"{layer}.{head}" for head in range(model.config.n_head)]  # noqa: E731
    for layer in range(model.config.n_layer):
        edges += [(s, h, into) for into in "qkv" for h in heads_of(layer) for s in senders_before(model, layer)]
        edges += [(s, f"mlp {layer}", None) for s in senders_before(model, layer) + heads_of(layer)]
    return edges + [(s, "logits", None) for s in senders_before(model, model.config.n_layer)]


def reference_scores(model, task, ablation, method, steps=5) -> dict:
    """Every edge's score from the papers, written here: (reference_s - clean_s) . d metric / d input_r summed over
    positions and prompts, / the number of prompts (EAP-IG's `scores /= total_items`); the gradient at the clean run
    (EAP, Syed et al. 2023) or averaged over the runs on embeddings reference + k / steps (clean - reference), k = 0 ..
    steps - 1 (EAP-IG's inputs variant, Hanna et al. 2024, as its code takes them). The reference: the corrupted run's
    outputs, or each sender's mean over the prompts at each position."""
    clean = written_by(model, task.clean)
    if ablation == "corrupted":
        reference = written_by(model, task.corrupted)
    else:
        reference = {name: out.mean(0, keepdim=True) for name, out in clean.items() if name != "logits"}
    start = reference["embed"].expand_as(clean["embed"])
    alphas = [k / steps for k in range(steps)]  # EAP-IG's; EAP: the clean run itself
    scores, gradients = {}, {}
    for sender, receiver, into in edges_of(model):
        if (receiver, into) not in gradients:
            along = [None] if method == "eap" else [start + a * (clean["embed"] - start) for a in alphas]
            runs = [receiver_gradient(model, task.clean, task, receiver, into, embeds) for embeds in along]
            gradients[receiver, into] = sum(runs) / len(runs)
        difference = reference[sender] - clean[sender]
        product = (difference * gradients[receiver, into]).sum().detach()  # written_by's head outputs carry a graph
        scores[sender, receiver, into] = float(product) / len(task.clean)
    return scores


def library_scores(model, task, ablation, method, steps=5) -> dict:
    the_graph = graph.graph_of(model.config)
    clean_out, _ = edge_attribution.recorded_outputs(model, task.clean)
    if ablation == "corrupted":
        reference_out = edge_attribution.recorded_outputs(model, task.corrupted)[0]
    else:
        reference_out = clean_out.mean(dim=1, keepdim=True)
    scores = edge_attribution.edge_scores(model, the_graph, task, clean_out, reference_out, method, steps)
    assert float(scores[~the_graph.exists].abs().max()) == 0.0  # no edge, no score
    return {the_graph.edge_name(s, r): float(scores[s, r]) for s, r in the_graph.exists.nonzero().tolist()}


def spearman(a: list[float], b: list[float]) -> float:
    ranks = [torch.tensor(x).argsort().argsort().double() for x in (a, b)]
    return float(torch.corrcoef(torch.stack(ranks))[0, 1])


@pytest.mark.parametrize("method", ["eap", "eap-ig"])
@pytest.mark.parametrize("ablation", ["mean", "corrupted"])
def test_every_edges_score_is_the_papers_on_a_random_model(method, ablation):
    model = tiny_model(seed=4)
    task = induction_task_of(model, count=3, half=5, seed=2)
    expected = reference_scores(model, task, ablation, method, steps=3)
    found = library_scores(model, task, ablation, method, steps=3)
    assert found.keys() == expected.keys() and len(found) == 110
    largest = max(abs(v) for v in expected.values())
    # Float32 sums over 3 x 11 x 32 products in two orders: within 1e-5 of the largest score.
    for edge, value in expected.items():
        assert found[edge] == pytest.approx(value, rel=1e-3, abs=1e-5 * largest), edge
    with pytest.raises(InstrumentError, match="'eap' or 'eap-ig'"):
        library_scores(model, task, ablation, "acdc")


@pytest.mark.parametrize("ablation", ["mean", "corrupted"])
def test_on_the_specimen_eap_and_eap_ig_are_the_papers_in_eap_igs_convention(specimen, ablation):
    """The default task (20 prompts of 20 random tokens written twice, seed 0). EAP (the gradient at the clean run)
    ranks the edges by size as the reference does (Spearman >= 0.98; measured 1.0000), and both methods' scores are the
    reference's in value and sign (measured: within 3.5e-7 of the largest score, every sign the same). The induction
    head's edge into the logits scores negative: ablating it lowers the metric (measured -0.074 with mean ablation,
    EAP-IG)."""
    model = specimen[0]
    task = circuit_tasks.induction_task(model)
    for method in ("eap", "eap-ig"):
        expected, found = reference_scores(model, task, ablation, method), library_scores(model, task, ablation, method)
        edges = list(expected)
        assert spearman([abs(found[e]) for e in edges], [abs(expected[e]) for e in edges]) >= 0.98
        largest = max(abs(v) for v in expected.values())
        # Float32 sums over 20 x 41 x 128 products in two orders: within 1e-5 of the largest score (3.5e-7 measured).
        for edge in edges:
            assert found[edge] == pytest.approx(expected[edge], rel=1e-3, abs=1e-5 * largest), (method, edge)
        assert found["1.1", "logits", None] < 0 and expected["1.1", "logits", None] < 0


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
