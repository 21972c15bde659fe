"""Hooks on a model's own modules for the calling thread alone: TransformerLens's `model.hooks(...)`, for any torch
module. Every instrument that reads or changes what happens inside a forward pass (the recorded pass, head ablation,
logit attribution, patching) registers its hooks here.

Why the thread: a hook torch registers acts on every forward pass of its module, whichever thread runs it, and the
demo's server runs requests in threads that share one model. One visitor's ablation would switch heads off in another
visitor's pass, and one request's recorder would record another's tensors. So each hook here first asks which thread
is running: the thread that entered the block has its passes hooked; every other thread's passes run as if no hook
were there. The hooks are removed when the block exits, by an exception too.

    with hooks((model.model.layers[0].attn.out_proj, "pre", fn), (model.model.final_norm, "post", keep)):
        model(input_ids=ids)
"""

import contextlib
import threading
from collections.abc import Callable
from typing import NamedTuple

from torch import nn

from minigpt.heads.errors import InstrumentError


class Hook(NamedTuple):
    """One hook: a (module, kind, fn) or (module, kind, fn, prepend) tuple reads as one."""

    module: nn.Module
    kind: str  # "pre": fn(module, args) before the forward, "post": fn(module, args, output) after it
    fn: Callable  # returns None (the pass goes on unchanged), or the module's new args ("pre") or output ("post")
    prepend: bool = False  # run before the module's hooks already there (torch's prepend)


def gated(fn: Callable, caller: int) -> Callable:
    """`fn` for the forward passes of thread `caller`; nothing (None: the pass unchanged) for any other thread's."""
    return lambda *args: fn(*args) if threading.get_ident() == caller else None


@contextlib.contextmanager
def hooks(*registrations):
    """Within the block, each registration's hook (a `Hook`, or the tuple it reads as) acts on the forward passes that
    the calling thread runs, and on no other thread's; all of them are removed on leaving the block, as it ends or
    raises."""
    caller, handles = threading.get_ident(), []
    try:
        for module, kind, fn, prepend in (Hook(*registration) for registration in registrations):
            if kind not in ("pre", "post"):
                raise InstrumentError(f"A hook's kind is 'pre' or 'post', not {kind!r}.")
            register = module.register_forward_pre_hook if kind == "pre" else module.register_forward_hook
            handles.append(register(gated(fn, caller), prepend=prepend))
        yield
    finally:
        for handle in handles:
            handle.remove()
