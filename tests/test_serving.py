"""The continuous batch (serving.py) with a tiny random model, driven step by step: a request gives the same tokens
alone and among others (each with its own settings), rows join and leave, a cancelled request leaves at once, and a
full batch says so."""

import asyncio
import time

import pytest
import torch

from minigpt.demo.core.serving import DONE, ContinuousBatcher, Sampling, ServerBusy, rows_for_same_bits
from modeling_minigpt import MiniGPTConfig, MiniGPTForCausalLM

VOCAB, PAD, BLOCK = 40, 39, 32


@pytest.fixture(scope="module")
def model():
    torch.set_num_threads(1)  # as the server runs: one thread decodes, and the machine is shared
    torch.manual_seed(0)
    config = MiniGPTConfig.from_preset(
        "shakespeare",
        vocab_size=VOCAB,
        block_size=BLOCK,
        n_layer=2,
        n_head=2,
        n_embd=32,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=PAD,
    )
    model = MiniGPTForCausalLM(config).eval()
    model.set_attn_implementation("sdpa")  # as the demo loads it
    return model


class Client:
    """One request's events, as the batching thread delivers them."""

    def __init__(self, batcher, prompt, max_new, sampling, rows=1):
        self.events = []
        self.request = batcher.submit(prompt, max_new, sampling, self.events.append, rows)

    @property
    def done(self) -> bool:
        return DONE in self.events

    @property
    def tokens(self) -> list[list[int]]:
        new = [[] for _ in range(self.request.rows)]
        for event in self.events:
            if event is not DONE:
                for row, token in event.items():
                    new[row].append(token)
        return new


def run(batcher, clients):
    while not all(c.done or c.request.cancelled for c in clients):
        batcher.step()


def alone(model, spec, eos_id=None):
    batcher = ContinuousBatcher(model, eos_id, [PAD], background=False)
    client = Client(batcher, *spec)
    run(batcher, [client])
    return client.tokens


# (prompt, max_new, sampling, rows): greedy, top-k, top-p, top-k 1, names-like rows, a prompt that fills the context
CROWD = [
    ([0, 5, 6], 70, Sampling(1.0, 0, 1.0, seed=7), 1),  # the one we follow: past the 32-token context twice
    ([0, 1], 60, Sampling(0.0, 0, 1.0, seed=0), 1),
    ([0, 2, 3, 4], 50, Sampling(0.7, 5, 1.0, seed=1), 1),
    ([0, 9], 40, Sampling(1.3, 0, 0.8, seed=2), 1),
    ([0, 1], 45, Sampling(1.0, 1, 1.0, seed=3), 1),
    ([0], 12, Sampling(1.0, 0, 1.0, seed=4), 5),
    (list(range(1, 33)), 30, Sampling(0.9, 10, 0.95, seed=5), 1),
    ([0, 7, 7, 7], 20, Sampling(1.0, 0, 1.0, seed=6), 1),
    ([0, 3], 66, Sampling(0.5, 0, 1.0, seed=8), 1),
]
JOINS_AT_STEP = [3, 0, 0, 0, 1, 2, 5, 5, 9]  # when each one joins the running batch


@pytest.fixture(scope="module")
def crowd(model):
    batcher = ContinuousBatcher(model, None, [PAD], background=False)
    clients = [None] * len(CROWD)
    step = 0
    while not all(c is not None and c.done for c in clients):
        for i, joins in enumerate(JOINS_AT_STEP):
            if joins == step:
                clients[i] = Client(batcher, *CROWD[i])
        batcher.step()
        step += 1
    return [c.tokens for c in clients]


def test_each_request_gives_the_same_tokens_alone_and_among_eight_others(model, crowd):
    for spec, in_crowd in zip(CROWD, crowd):
        assert in_crowd == alone(model, spec), spec
    assert len(crowd[0][0]) == 70 and len(crowd[5]) == 5


def no_cache_logits(model, window: list[int]) -> torch.Tensor:
    with torch.no_grad():
        logits = model(torch.tensor([window]), use_cache=False).logits[0, -1]
    logits[PAD] = float("-inf")
    return logits


def test_each_request_follows_its_own_settings_in_the_crowd(model, crowd):
    """Checked against the model run on the whole window every step (no cache): the greedy request takes the argmax,
    top-k 5 stays within the 5 most likely tokens, top-k 1 is greedy; windows jump to their last 24 past 32 tokens."""
    for (prompt, _, sampling, _), (tokens,) in [(CROWD[i], crowd[i]) for i in (1, 2, 4)]:
        window = list(prompt)
        for token in tokens:
            logits = no_cache_logits(model, window)
            if sampling.greedy or sampling.top_k == 1:
                assert token == int(logits.argmax())
            else:
                assert token in logits.topk(sampling.top_k).indices.tolist()
            window = (window + [token])[-24:] if len(window) == BLOCK else window + [token]
    assert crowd[2] != crowd[4]  # the settings differ, and so do the texts


def test_a_request_that_ends_early_leaves_and_the_others_go_on_unchanged(model):
    for seed in range(20):  # a sampled request whose third token differs from the first two: that is its end token
        ending = ([0, 1], 40, Sampling(1.0, 0, 1.0, seed), 1)
        first = alone(model, ending)[0]
        if first[2] not in first[:2]:
            break
    eos = first[2]
    candidates = [([0, 4], 30, Sampling(1.0, 5, 1.0, seed), 1) for seed in range(10, 40)]
    others = [spec for spec in candidates if len(alone(model, spec, eos)[0]) > 10][:2]  # alone, they go on longer
    batcher = ContinuousBatcher(model, eos, [PAD], background=False)
    clients = [Client(batcher, *spec) for spec in [ending, *others]]
    batcher.step()  # each row: its prompt's token, then one decoded token
    assert len(batcher.rows) == 3
    batcher.step()  # the third token ends the first request: it leaves the batch at once
    assert clients[0].done and clients[0].tokens == [first[:3]] and len(batcher.rows) == 2
    run(batcher, clients)
    assert [c.tokens for c in clients[1:]] == [alone(model, spec, eos) for spec in others]


def test_a_cancelled_request_leaves_at_the_next_step(model):
    specs = [([0, 3], 50, Sampling(1.0, 0, 1.0, s), 1) for s in range(3)]
    batcher = ContinuousBatcher(model, None, [PAD], background=False)
    clients = [Client(batcher, *spec) for spec in specs]
    waiting = Client(batcher, [0], 50, Sampling(1.0, 0, 1.0, 9))
    waiting.request.cancel()  # gone before it joined: it never runs
    for _ in range(3):
        batcher.step()
    clients[1].request.cancel()
    seen = clients[1].tokens
    batcher.step()
    assert len(batcher.rows) == 2 and clients[1].tokens == seen  # no token computed for it after the cancel
    assert waiting.events == []
    run(batcher, [clients[0], clients[2]])
    assert [clients[0].tokens, clients[2].tokens] == [alone(model, specs[0]), alone(model, specs[2])]


def test_closing_a_stream_frees_its_row(model):
    batcher = ContinuousBatcher(model, None, [PAD])  # the background thread, as the server runs it
    stream = batcher.stream([0, 1], 100_000, Sampling(1.0, 0, 1.0, seed=0))
    assert [next(stream) for _ in range(3)]
    request = batcher.rows[0].request
    stream.close()  # what the server does when a client goes
    deadline = time.monotonic() + 10
    while batcher.rows and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not batcher.rows and request.cancelled and request.steps < 100_000


def test_paced_streams_gather_steps_into_fewer_updates_and_end_at_once(model):
    """astream's pacing, as the server streams texts: at most one update every `every` seconds per stream, or
    `per_second` updates a second shared by the streams in flight; the first step goes out at once, the steps between
    are gathered, the tokens are those of a stream of every step, and the end is sent when it comes (not when the
    next update is due)."""
    batcher = ContinuousBatcher(model, None, [PAD])  # the background thread, as the server runs it
    specs = [([0, 5, 6], 40, Sampling(1.0, 0, 1.0, seed=3)), ([0, 2], 30, Sampling(0.8, 5, 1.0, seed=4))]

    async def together(**pace) -> list[list[list[dict[int, int]]]]:
        async def updates(spec):
            return [steps async for steps in batcher.astream(*spec, **pace)]

        return await asyncio.gather(*(updates(spec) for spec in specs))

    tokens = lambda updates: [step[0] for steps in updates for step in steps]
    each = [tokens(updates) for updates in asyncio.run(together())]
    assert each == [batcher.generate(*spec)[0] for spec in specs] and [len(t) for t in each] == [40, 30]
    for pace in (dict(every=60.0), dict(per_second=2 / 60)):  # the next update due in 60 s (two streams share 2/min)
        start = time.monotonic()
        paced = asyncio.run(together(**pace))
        assert time.monotonic() - start < 30, pace  # the ends did not wait for the next update
        assert all(len(updates) <= 2 for updates in paced), pace  # the first step(s) at once, then all the rest
        assert [tokens(updates) for updates in paced] == each, pace
    assert batcher.streams == 0


def test_the_cache_doubles_as_requests_join_one_by_one_up_to_the_batch_limit(model):
    """Each growth copies the whole cache: requests arriving one at a time must not copy it once each."""
    batcher = ContinuousBatcher(model, None, [PAD], max_rows=20, background=False)
    capacities = []
    for seed in range(20):
        Client(batcher, [0, 1], 3, Sampling(1.0, 0, 1.0, seed))
        batcher._admit()
        capacities.append(batcher.cache.keys.shape[1])
    floor = batcher.min_decode_rows  # the first reservation: 4, or more where this CPU needs it (rows_for_same_bits)
    doubling = [floor * 2**k for k in range(8) if floor * 2**k < 20]
    assert sorted(set(capacities)) == doubling + [20]


def test_a_full_batch_and_waiting_line_give_a_busy_message(model):
    batcher = ContinuousBatcher(model, None, [PAD], max_rows=2, max_waiting=1, background=False)
    spec = ([0, 1], 10, Sampling(1.0, 0, 1.0, 0))
    Client(batcher, *spec), Client(batcher, *spec)
    batcher.step()  # both decode: the batch is full
    Client(batcher, *spec)  # waits for a row
    with pytest.raises(ServerBusy, match=r"The server is busy \(requests in progress: 2, waiting: 1\)\. Try again"):
        Client(batcher, *spec)
    with pytest.raises(ValueError, match="at most 2 rows"):
        Client(batcher, [0], 10, spec[2], rows=3)


def test_rows_for_same_bits_is_the_fewest_rows_from_which_a_linear_layer_keeps_each_rows_bits(model):
    """The floor's measure, checked against the definition on every linear layer: from that many rows up to the
    limit, a batch's rows have the bits they have in the largest batch; one row fewer, some layer differs."""
    floor, limit = rows_for_same_bits(model, 40), 40
    layers = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    x = {layer: torch.randn(limit, layer.in_features) for layer in layers}
    with torch.no_grad():
        same = lambda rows: all(torch.equal(layer(x[layer][:rows]), layer(x[layer])[:rows]) for layer in layers)
        assert all(same(rows) for rows in range(floor, limit + 1))
        assert floor == 1 or not same(floor - 1)
    # Measured on the shapes alone: a hook of the model's (an ablation, as the ablated generation runs under) changes
    # nothing, and the second measure of the same shapes is the first's.
    from minigpt.heads.ablation import head_mask, heads_ablated

    with heads_ablated(model, head_mask([(model.config.n_layer - 1, 0)], model.config.n_layer, model.config.n_head)):
        assert rows_for_same_bits(model, 40) == floor


def test_a_decoding_row_computes_the_same_bits_in_any_batch(model):
    """The ground of the guarantee: the logits of a row do not depend on the other rows (its own slots and shapes),
    bit for bit, whether the batch has 1 (filled up to 4), 2, 4, 9 or 33 rows and wherever the row sits in it."""
    torch.manual_seed(1)
    prompts = [torch.randint(1, PAD, (int(n),)).tolist() for n in torch.randint(1, BLOCK, (33,))]

    def decode_logits(order: list[int]) -> dict[int, torch.Tensor]:
        batcher = ContinuousBatcher(model, None, [PAD], max_rows=40, background=False)
        for i in order:
            batcher.submit(prompts[i], 5, Sampling(0.0, 0, 1.0, 0), lambda event: None)
        with torch.no_grad():
            batcher._admit()
            batcher._prefill(batcher.rows)
            logits = batcher._decode()
        return {i: logits[k] for k, i in enumerate(order)}

    everyone = decode_logits(list(range(33)))
    for order in ([5], [2, 7], [0, 1, 2, 3], [8, 3, 0, 5, 1, 7, 2, 6, 4], list(range(32, -1, -1))):
        for i, row_logits in decode_logits(order).items():
            assert torch.equal(row_logits, everyone[i]), (order, i)


def test_a_minimum_of_one_row_decodes_a_lone_request_at_batch_1_and_fills_nothing(model, monkeypatch):
    """app.py --min-decode-rows 1: a lone request's steps are 1-row forwards (the default fills them up to 4 rows);
    with others in the batch every row decodes together as before, and greedy tokens follow the model's argmax."""
    batch_sizes = []
    forward = model.forward
    monkeypatch.setattr(
        model, "forward", lambda **kwargs: batch_sizes.append(len(kwargs["input_ids"])) or forward(**kwargs)
    )
    spec = ([0, 5, 6], 6, Sampling(0.0, 0, 1.0, seed=0))
    for min_rows in (1, 4):
        batcher = ContinuousBatcher(model, None, [PAD], background=False, min_decode_rows=min_rows)
        expected = 1 if min_rows == 1 else max(4, rows_for_same_bits(model, batcher.max_rows))
        assert batcher.min_decode_rows == expected
        batch_sizes.clear()
        client = Client(batcher, *spec)
        run(batcher, [client])
        assert batch_sizes == [1] + [expected] * 5  # the prompt alone, then 5 decoding steps
    with torch.no_grad():  # greedy: each token is the argmax of the model's logits for the text before it
        ids = torch.tensor([spec[0] + client.tokens[0]])
        assert forward(input_ids=ids).logits[0, len(spec[0]) - 1 : -1].argmax(-1).tolist() == client.tokens[0]
    two = ContinuousBatcher(model, None, [PAD], background=False, min_decode_rows=1)
    batch_sizes.clear()
    clients = [Client(two, *spec), Client(two, [0, 1], 6, Sampling(0.0, 0, 1.0, seed=0))]
    run(two, clients)
    assert max(batch_sizes) == 2 and clients[0].tokens == client.tokens
