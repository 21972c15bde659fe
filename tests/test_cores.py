"""The cores shared between requests (minigpt/demo/core/cores.py): a heavy computation alone runs on every core, any
other keeps its thread's count, and the count is given back after."""

import threading

import torch

from helpers import THREE_LAYERS, tiny_model
from minigpt.demo.core.cores import HEAVY_WORK, CoreShare, pass_work


def test_a_heavy_computation_alone_gets_every_core_and_gives_them_back():
    share = CoreShare(cores=3)
    before = torch.get_num_threads()
    with share.threads_for(HEAVY_WORK) as threads:
        assert threads == 3 and torch.get_num_threads() == 3
    assert torch.get_num_threads() == before
    with share.threads_for(HEAVY_WORK / 10) as threads:  # light: as it was
        assert threads == before and torch.get_num_threads() == before


def test_a_computation_beside_another_or_beside_decoding_keeps_its_count():
    share = CoreShare(cores=3)
    before = torch.get_num_threads()
    inside, release, seen = threading.Event(), threading.Event(), []

    def first():
        with share.threads_for(HEAVY_WORK):
            inside.set()
            release.wait(10)

    worker = threading.Thread(target=first)
    worker.start()
    inside.wait(10)
    with share.threads_for(HEAVY_WORK) as threads:  # the second in flight: one core each, no oversubscription
        seen.append((threads, torch.get_num_threads()))
    release.set()
    worker.join()
    assert seen == [(before, before)] and share.in_flight == 0

    decoding = CoreShare(cores=3, busy=lambda: True)
    with decoding.threads_for(HEAVY_WORK) as threads:
        assert threads == before


def test_pass_work_counts_the_weights_and_the_two_attention_products():
    model = tiny_model("sdpa", shape=THREE_LAYERS)
    config = model.config
    C, T = config.n_embd, 24
    # per layer: q, k, v, out (4 C^2) and the MLP's two (8 C^2) a token; q k^T and weights v: T^2 C each
    assert pass_work(config, T) == config.n_layer * (12 * C * C * T + 2 * T * T * C)
    blocks = sum(p.numel() for name, p in model.named_parameters() if ".layers." in name and p.dim() == 2)
    assert blocks * T == config.n_layer * 12 * C * C * T  # the weight matrices' multiply-adds, counted from the model
