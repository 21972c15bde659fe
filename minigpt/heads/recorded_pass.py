"""The recorded forward pass: one eager pass of the model with `output_attentions=True`, and forward hooks on the
model's own modules for what happens inside each block. Every instrument of `minigpt.heads` (and every view of the
demo: the maps, step by step, next-token probabilities, logit lens, exports) reads these tensors.

Numbers in, tensors out, usable from a notebook: `run_forward_pass(model, ids)`.

Shapes: L layers, H heads, T tokens, C width, V vocabulary.
"""

from dataclasses import dataclass, field

import torch

from minigpt.heads.hooks import Hook, hooks
from minigpt.heads.runs import as_batch


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
            targets = torch.tensor(self.input_ids[1:], device=logits.device)
            self._memo["token_losses"] = torch.nn.functional.cross_entropy(logits, targets, reduction="none")
        return self._memo["token_losses"]


def unembed(model, stream: torch.Tensor) -> torch.Tensor:
    """(..., C) points of the residual stream -> (..., V) float logits: the model's own final norm and LM head, as its
    forward applies them after the last block."""
    with torch.no_grad():
        return model.lm_head(model.model.final_norm(stream)).float()


def run_forward_pass(model, input_ids: list[int]) -> ForwardPass:
    """One eager pass of `model` (a MiniGPTForCausalLM, loaded with any attention implementation) over `input_ids`
    (a list of token ids, or a (T,) or (1, T) tensor).

    Hooks on the real modules record each block's input and output, each attention sublayer's input (after the
    norm), its merged heads and its output projection; the attention weights come from `output_attentions=True`.
    The hooks act on the calling thread's pass only (`hooks`): the server's request threads share the model.
    """
    seen: dict[str, list[torch.Tensor]] = {"block_in": [], "block_out": [], "x": [], "merged": [], "out": []}

    def record(name: str, from_output: bool):
        def hook(module, args, output=None):
            seen[name].append((output if from_output else args[0])[0].detach())  # batch row 0: (T, C)

        return hook

    input_ids = as_batch(input_ids, model.config.vocab_size, "input_ids")[0].tolist()
    config, length = model.config, len(input_ids)
    weights = torch.empty(config.n_layer, 1, config.n_head, length, length, device=model.device)

    def keep_weights(attn, args, output):
        """Each layer's weights go into their place in `weights` as the layer returns them, and the layer's own copy
        is let go: the pass holds one copy of every layer's weights, plus one layer's at a time (GPT-2 at 1,024 tokens:
        604 MB, not twice that). Prepended, so the library's `output_attentions` recorder sees the kept copy."""
        output_, layer_weights = output
        weights[attn.layer_idx].copy_(layer_weights)
        return output_, weights[attn.layer_idx]

    registrations = []
    for block in model.model.layers:
        registrations += [
            Hook(block.attn, "post", keep_weights, prepend=True),
            (block, "pre", record("block_in", from_output=False)),
            (block, "post", record("block_out", from_output=True)),
            (block.attn, "pre", record("x", from_output=False)),
            (block.attn.out_proj, "pre", record("merged", from_output=False)),
            (block.attn.out_proj, "post", record("out", from_output=True)),
        ]
    with hooks(*registrations), torch.no_grad():
        # logits_to_keep=1: the (T, V) logits are not kept (GPT-2 at 1,024 tokens: 200 MB); `logits` makes them
        # from the recorded residual stream when a view asks.
        model(
            input_ids=torch.tensor([list(input_ids)], device=model.device),
            output_attentions=True,
            use_cache=False,
            logits_to_keep=1,
        )
    return ForwardPass(
        input_ids=tuple(input_ids),
        attentions=weights[:, 0],  # (L, H, T, T)
        residual=torch.stack([seen["block_in"][0], *seen["block_out"]]),  # (L + 1, T, C)
        attn_inputs=torch.stack(seen["x"]),
        merged_heads=torch.stack(seen["merged"]),
        attn_outputs=torch.stack(seen["out"]),
    )
