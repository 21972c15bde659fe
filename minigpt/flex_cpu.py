"""flex_attention on a CPU, opt-in: `import minigpt.flex_cpu`, then
`model.set_attn_implementation("flex_attention_cpu")`.

The library's flex path runs torch's compiled `flex_attention`, whose CPU kernel (inductor's C++ template, torch 2.13)
has three faults: NaN or drifting logits for heads under 24 dims on a CPU with vectors of fewer than 16 floats, an
aborted process on a tensor mask, and masks that read a tensor failing to build after some histories of compiles. So
MiniGPT refuses `"flex_attention"` on a CPU (`modeling_minigpt.check_implementation_can_serve`), and this module
registers a path around the three under a name of its own, with the library's attention interface and its mask
interface: the library's flex call with the heads widened (`flex_attention_forward`), and masks that read no tensor
(`flex_cpu_mask`). On other devices both are the library's own.

The model file does not import this module: a saved model folder, loaded with `trust_remote_code`, runs without the
minigpt package.
"""

from dataclasses import dataclass

import torch
from torch.nn import functional as F
from transformers import AttentionInterface, AttentionMaskInterface
from transformers.masking_utils import causal_mask_function, flex_attention_mask
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.utils.import_utils import is_tracing

NAME = "flex_attention_cpu"  # the attn_implementation this module registers

# The narrowest head torch's compiled CPU flex kernel computes right (see flex_attention_forward).
FLEX_CPU_MIN_HEAD_DIM = 32


@dataclass(frozen=True)
class FlexKeyPadding:
    """What the mask hands flex on a CPU for a padded batch (see flex_cpu_mask): the causal BlockMask, or None, and
    which keys are padding. The padding reaches the scores through one more head dimension (flex_attention_forward),
    not through the BlockMask."""

    block_mask: object  # torch.nn.attention.flex_attention.BlockMask | None
    padding: torch.Tensor  # (B, S) bool, True: a padding key


def flex_cpu_head_width(head_dim: int, padding_column: bool) -> int:
    """The head width the CPU flex kernel gets: 32 or more, room for the padding column, a multiple of 16 if widened."""
    needed = head_dim + padding_column
    if needed >= FLEX_CPU_MIN_HEAD_DIM and needed == head_dim:
        return head_dim
    return max(FLEX_CPU_MIN_HEAD_DIM, -(-needed // 16) * 16)


def flex_attention_forward(module, query, key, value, attention_mask, scaling, **kwargs):
    """The library's flex path (compiled `flex_attention`); on a CPU, heads widened with zeros to 32 dims or more.

    Inductor's C++ flex kernel (torch 2.13) computes q @ kᵀ with a micro-kernel (`CppMicroGemmFP32Vec`, transposed B)
    whose path for heads under 24 dims, a whole number of vectors, always computes 16 keys at a time. On a CPU whose
    vectors hold fewer than 16 floats (AVX2: 8, NEON: 4), a block of keys whose length mod 16 is a whole number of
    vectors (8 keys, 24, 40, ...) ends in such a 16-wide step: keys past the block are read, and the last query's extra
    scores land on the running row maxima stored after the score buffer. The logits then drift (0.01 to 0.1) or turn
    NaN, as the memory past the keys decides (head_dim 8 and 16, on AVX2; AVX-512's 16-float vectors never take that
    step). Zeros appended to q, k and v change no score (the scale is passed as it is) and add output columns of
    zeros, cut off here; 32 dims take the kernel's general path.

    A padded batch (FlexKeyPadding) uses one appended dimension as a bias: 1 in every query, 0 in a real key and the
    dtype's minimum in a padding key (the value eager masks with), so a padding key's score is that minimum times the
    scale and its weight 0, and no mask has to read the padding (see flex_cpu_mask).
    """
    if isinstance(attention_mask, torch.Tensor) and query.device.type == "cpu":
        # The library's flex path reads a tensor mask by chained indexing in a score_mod, which torch 2.13's compiled
        # CPU kernel crashes on (double free). A 2D mask becomes a BlockMask (flex_cpu_mask), which it runs well.
        raise ValueError(
            "flex_attention on a CPU takes a 2D attention_mask (1 token, 0 padding), not a 4D tensor: torch's "
            "compiled CPU flex kernel crashes on one. Pass the 2D padding mask, or use sdpa for a custom 4D mask."
        )
    library_flex = ALL_ATTENTION_FUNCTIONS["flex_attention"]
    padding = None
    if isinstance(attention_mask, FlexKeyPadding):
        attention_mask, padding = attention_mask.block_mask, attention_mask.padding
    head_dim = query.shape[-1]
    width = head_dim if query.device.type != "cpu" else flex_cpu_head_width(head_dim, padding is not None)
    if width == head_dim:
        return library_flex(module, query, key, value, attention_mask, scaling=scaling, **kwargs)
    pad = (0, width - head_dim)
    query, key, value = F.pad(query, pad), F.pad(key, pad), F.pad(value, pad)  # (B, H, T or S, width)
    if padding is not None:
        query[..., head_dim] = 1
        key[..., head_dim] = padding[:, None, :].to(key.dtype) * torch.finfo(key.dtype).min
    output, lse = library_flex(module, query, key, value, attention_mask, scaling=scaling, **kwargs)
    return output[..., :head_dim], lse  # (B, T, H, D)


def flex_cpu_mask(
    batch_size, q_length, kv_length, q_offset, kv_offset, mask_function, attention_mask, device, **kwargs
):
    """The mask handed to flex on a CPU: one torch's compiled kernel builds whatever ran before in the process. Called
    by the library's `create_causal_mask` (the mask interface), with the sizes it read from the cache.

    Inductor's C++ flex template (torch 2.13) writes the code of the mask with its own two block-size symbols, then
    renames them by plain text replacement ("ks3" -> "cur_kvSplitSize"). A mask that reads a tensor (the padding
    mask, the ids of packed sequences) or an offset that changes between calls (the position of a decoding step)
    puts size symbols of its own into that code once dynamo compiles for dynamic shapes (from the second shape on);
    when one of them is named like the kernel's with more digits ("ks30"), it is rewritten too and the kernel fails
    to build ('cur_kvSplitSize0' was not declared), or not, as the number of symbols in the process decides. So here
    no mask reads anything: a prompt gets the causal BlockMask (offsets 0), a one-token step none (it may see every
    cached key), and padding goes into the scores (FlexKeyPadding). Packed sequences need their ids: refused. A step
    of several tokens on a cache (chunked prefill) keeps the causal mask's offset, the one risk left. Anything else
    (another device, tracing, a static cache, an odd-length mask) gets the library's mask."""
    usual = (
        torch.device(device).type == "cpu"
        and not is_tracing(attention_mask)
        # no cache or a dynamic one: the keys are the cached ones then the new ones (a static cache's offset is a
        # tensor, its length the cache's size)
        and isinstance(q_offset, int)
        and (kv_offset, kv_length) == (0, q_offset + q_length)
        and (attention_mask is None or attention_mask.shape == (batch_size, kv_length))
    )
    if not usual:
        return flex_attention_mask(
            batch_size, q_length, kv_length, q_offset, kv_offset, mask_function, attention_mask, device, **kwargs
        )
    if mask_function is not causal_mask_function:  # the library found packed sequences in the positions
        raise ValueError(
            "flex_attention on a CPU does not take packed sequences (position_ids restarting inside a row): the "
            "mask would read their ids, and torch 2.13's compiled CPU flex kernel then may fail to build "
            "('cur_kvSplitSize0' was not declared). Pad the sequences into rows instead, or use sdpa or eager."
        )
    block_mask = (
        None if q_length == 1 else flex_attention_mask(batch_size, q_length, kv_length, q_offset, device=device)
    )
    if attention_mask is None or bool(attention_mask.all()):
        return block_mask
    return FlexKeyPadding(block_mask, padding=~attention_mask.bool())  # (B, S)


AttentionInterface.register(NAME, flex_attention_forward)
AttentionMaskInterface.register(NAME, flex_cpu_mask)
