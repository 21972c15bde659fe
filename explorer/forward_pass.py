"""One recorded forward pass per (model, text), shared by every view of the demo.

Every view of a text (the maps, the enlarged head, step by step, next-token probabilities, logit lens, hover values,
exports) reads the same tensors: one eager pass of the model with `output_attentions=True`, and forward hooks on the
model's own modules for what happens inside each block. `ForwardPassCache` keeps the latest passes, bounded in bytes,
and computes each one once even when several requests ask for it at the same moment.

Nothing here knows of Gradio: numbers in, tensors out, usable from a notebook.

Shapes: L layers, H heads, T tokens, C width, V vocabulary.
"""

import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field

import torch

from explorer.cores import CoreShare, pass_work


@dataclass
class ForwardPass:
    """What one eager forward pass over `input_ids` computed, read from the model's own modules."""

    input_ids: tuple[int, ...]  # (T,)
    attentions: torch.Tensor  # (L, H, T, T) float32: softmax weights, rows sum to 1, zero above the diagonal
    residual: torch.Tensor  # (L + 1, T, C): the residual stream entering block 0..L-1, then leaving block L-1
    attn_inputs: torch.Tensor  # (L, T, C): each attention sublayer's input, after its layer norm (qkv_proj's input)
    merged_heads: torch.Tensor  # (L, T, C): the heads' outputs side by side, out_proj's input
    attn_outputs: torch.Tensor  # (L, T, C): out_proj's output, what each attention sublayer adds to the residual
    _memo: dict = field(default_factory=dict, repr=False)  # derived tensors, computed once (see `logits`)

    @property
    def nbytes(self) -> int:
        tensors = (self.attentions, self.residual, self.attn_inputs, self.merged_heads, self.attn_outputs)
        return sum(t.numel() * t.element_size() for t in (*tensors, *self._memo.values()))

    def logits(self, model, position: int | None = None) -> torch.Tensor:
        """Next-token logits, (V,) at `position` or (T, V) for all: the model's final norm and head on the residual."""
        return unembed(model, self.residual[-1] if position is None else self.residual[-1, position])

    def token_losses(self, model) -> torch.Tensor:
        """(T - 1,) cross-entropy of each next token: entry t is -log p(token t + 1 | tokens <= t)."""
        if "token_losses" not in self._memo:
            logits = self.logits(model)[:-1]  # (T - 1, V)
            targets = torch.tensor(self.input_ids[1:])
            self._memo["token_losses"] = torch.nn.functional.cross_entropy(logits, targets, reduction="none")
        return self._memo["token_losses"]


def unembed(model, stream: torch.Tensor) -> torch.Tensor:
    """(..., C) points of the residual stream -> (..., V) float logits: the model's own final norm and LM head, as its
    forward applies them after the last block."""
    with torch.no_grad():
        return model.lm_head(model.model.final_norm(stream)).float()


def run_forward_pass(model, input_ids: list[int]) -> ForwardPass:
    """One eager pass of `model` (a MiniGPTForCausalLM, loaded with any attention implementation) over `input_ids`.

    Hooks on the real modules record each block's input and output, each attention sublayer's input (after the
    norm), its merged heads and its output projection; the attention weights come from `output_attentions=True`.
    The server runs requests in threads that share the model: the hooks record the calling thread's pass only.
    """
    blocks = model.model.layers
    caller = threading.get_ident()
    seen: dict[str, list[torch.Tensor]] = {"block_in": [], "block_out": [], "x": [], "merged": [], "out": []}

    def record(name: str, from_output: bool):
        def hook(module, args, output=None):
            if threading.get_ident() == caller:
                seen[name].append((output if from_output else args[0])[0].detach())  # batch row 0: (T, C)

        return hook

    handles = []
    for block in blocks:
        handles += [
            block.register_forward_pre_hook(record("block_in", from_output=False)),
            block.register_forward_hook(record("block_out", from_output=True)),
            block.attn.register_forward_pre_hook(record("x", from_output=False)),
            block.attn.out_proj.register_forward_pre_hook(record("merged", from_output=False)),
            block.attn.out_proj.register_forward_hook(record("out", from_output=True)),
        ]
    config, length = model.config, len(input_ids)
    # Each layer's eager attention writes its weights straight into their place here (weights_out): no stacking or
    # converting copy afterwards (GPT-2 at 1,024 tokens: 604 MB written once).
    weights = torch.empty(config.n_layer, 1, config.n_head, length, length, device=model.device)
    try:
        with torch.no_grad():
            # logits_to_keep=1: the (T, V) logits are not kept (GPT-2 at 1,024 tokens: 200 MB); `logits` makes them
            # from the recorded residual stream when a view asks.
            model(
                input_ids=torch.tensor([list(input_ids)], device=model.device),
                output_attentions=True,
                use_cache=False,
                logits_to_keep=1,
                weights_out=weights,
            )
    finally:
        for handle in handles:
            handle.remove()
    return ForwardPass(
        input_ids=tuple(input_ids),
        attentions=weights[:, 0],  # (L, H, T, T)
        residual=torch.stack([seen["block_in"][0], *seen["block_out"]]),  # (L + 1, T, C)
        attn_inputs=torch.stack(seen["x"]),
        merged_heads=torch.stack(seen["merged"]),
        attn_outputs=torch.stack(seen["out"]),
    )


class ForwardPassCache:
    """The latest forward passes, keyed by model and token ids, at most `max_bytes` together (least recently used
    goes first; a pass larger than the whole budget is computed and returned, not kept).

    Safe under concurrent requests: a pass being computed is awaited by every other request for it, never computed
    twice. A key holds the model object's identity and a weak reference to it, so a pass is never served for another
    model, even one later loaded at the same address.
    """

    def __init__(self, max_bytes: int = 1 << 30, cores: CoreShare | None = None):
        self.max_bytes = max_bytes
        self.cores = cores or CoreShare(cores=1)  # the server's: a lone heavy pass gets every core
        self._passes: OrderedDict[tuple, tuple[weakref.ref, ForwardPass]] = OrderedDict()
        self._pending: dict[tuple, threading.Event] = {}
        self._lock = threading.Lock()
        self.computed = 0  # passes run so far, for tests and benchmarks

    def get(self, model, input_ids: list[int]) -> ForwardPass:
        key = (id(model), tuple(input_ids))
        while True:
            with self._lock:
                hit = self._passes.get(key)
                if hit is not None and hit[0]() is model:
                    self._passes.move_to_end(key)
                    return hit[1]
                waiting = self._pending.get(key)
                if waiting is None:  # nobody computes it: this request will
                    self._pending[key] = threading.Event()
                    break
            waiting.wait()  # another request computes it; then look again (it may have failed, or been too big to keep)
        try:
            with self.cores.threads_for(pass_work(model.config, len(input_ids))):
                computed = run_forward_pass(model, input_ids)
            with self._lock:
                self.computed += 1
                self._store(key, model, computed)
            return computed
        finally:
            with self._lock:
                self._pending.pop(key).set()

    def cached(self, model, input_ids: list[int]) -> ForwardPass | None:
        """The pass if it is kept, else None (nothing computed)."""
        with self._lock:
            hit = self._passes.get((id(model), tuple(input_ids)))
            return hit[1] if hit is not None and hit[0]() is model else None

    def _store(self, key: tuple, model, computed: ForwardPass) -> None:
        if computed.nbytes > self.max_bytes:
            return
        self._passes[key] = (weakref.ref(model), computed)
        while sum(p.nbytes for _, p in self._passes.values()) > self.max_bytes:
            self._passes.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._passes.clear()


__all__ = ["ForwardPass", "ForwardPassCache", "run_forward_pass"]
