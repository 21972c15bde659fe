"""The library's hooks (minigpt/heads/hooks.py): a hook set in one thread leaves another thread's forward pass of the
same model, running at the same time, untouched; the hooks are gone after the block, whether it ends or raises; a
prepended hook runs first; and a hook's return value replaces the module's input ("pre") or output ("post")."""

import threading

import pytest
import torch

from helpers import tiny_model
from minigpt.heads.errors import InstrumentError
from minigpt.heads.hooks import Hook, hooks

IDS = torch.tensor([[0, 5, 9, 3, 3, 7, 1]])
WAIT = 60  # seconds a thread waits for the other before the test fails (a deadlock, not a sleep)


def logits_of(model, ids=IDS) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids, use_cache=False).logits


def no_hooks_left(model) -> bool:
    return not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())


def test_a_hook_in_one_thread_leaves_another_threads_pass_at_the_same_time_untouched():
    """Both threads stop inside their own pass (at block 0, by a barrier), so the passes overlap; thread A keeps its
    hooks registered until B's pass is over, so B runs its whole second half past A's hooks."""
    model = tiny_model()
    plain = logits_of(model)
    both_inside, b_done = threading.Barrier(2, timeout=WAIT), threading.Event()
    called_by, found = set(), {}

    def wait_for_the_other(module, args):  # each thread's own hook: both passes are inside block 0 at once
        both_inside.wait()

    meet = (model.model.layers[0], "pre", wait_for_the_other)

    def zero_output(module, args, output):  # A's hook: the final norm outputs zeros
        called_by.add(threading.get_ident())
        return torch.zeros_like(output)

    def a():
        with hooks(meet, (model.model.final_norm, "post", zero_output)):
            found["a"] = logits_of(model)
            assert b_done.wait(WAIT)  # A's hooks stay registered until B's pass has ended

    def b():
        with hooks(meet):
            found["b"] = logits_of(model)
        b_done.set()

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert set(found) == {"a", "b"}
    assert called_by == {threads[0].ident}  # A's hook ran in A's pass alone
    torch.testing.assert_close(found["a"], model.lm_head(torch.zeros(1, 1, model.config.n_embd)).expand_as(plain))
    assert torch.equal(found["b"], plain)  # B's pass ran as if no hook were there
    assert no_hooks_left(model)


def test_the_hooks_are_removed_after_the_block_and_after_an_exception():
    model = tiny_model()
    plain = logits_of(model)
    zeros = (model.model.final_norm, "post", lambda module, args, output: torch.zeros_like(output))
    with hooks(zeros, (model.model.layers[1].attn.out_proj, "pre", lambda module, args: None)):
        assert not torch.equal(logits_of(model), plain)
    assert no_hooks_left(model) and torch.equal(logits_of(model), plain)
    with pytest.raises(RuntimeError, match="inside the block"), hooks(zeros):
        raise RuntimeError("inside the block")
    assert no_hooks_left(model) and torch.equal(logits_of(model), plain)
    # A registration refused halfway: the hooks registered before it are removed too.
    with pytest.raises(InstrumentError, match="'pre' or 'post'"), hooks(zeros, (model.model.final_norm, "mid", None)):
        pass
    assert no_hooks_left(model)


def test_a_prepended_hook_runs_before_the_hooks_already_there():
    model = tiny_model()
    norm, order = model.model.final_norm, []
    handle = norm.register_forward_hook(lambda module, args, output: order.append("there"))
    try:
        with hooks(
            Hook(norm, "post", lambda module, args, output: order.append("first"), prepend=True),
            (norm, "post", lambda module, args, output: order.append("last")),
        ):
            logits_of(model)
    finally:
        handle.remove()
    assert order == ["first", "there", "last"]


def test_a_hooks_return_value_replaces_the_modules_input_or_output():
    model = tiny_model()
    norm = model.model.final_norm
    seen = {}

    def keep(module, args, output):
        seen["input"], seen["output"] = args[0], output

    halved = (norm, "pre", lambda module, args: (args[0] / 2, *args[1:]))
    with hooks(halved, (norm, "post", keep)):
        logits_of(model)
    with hooks((norm, "pre", lambda module, args: seen.update(plain=args[0]))):
        logits_of(model)
    torch.testing.assert_close(seen["input"], seen["plain"] / 2)  # the pre-hook's args replaced the input
    shifted = (norm, "post", lambda module, args, output: output + 1)
    with hooks(shifted):
        logits = logits_of(model)
    torch.testing.assert_close(logits, model.lm_head(norm(seen["plain"]) + 1))  # the post-hook's value replaced it
