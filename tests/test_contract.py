"""What MiniGPT claims to `transformers` holds: every attention implementation it accepts gets a mask of its own format
and computes what eager computes, packed sequences stay apart, compile and export trace it whole, the loss honours
`shift_labels`, and the class flags are each checked by a test here or in test_modeling.py."""

import inspect
import typing

import pytest
import torch
import transformers.masking_utils as masking_utils
import transformers.modeling_flash_attention_utils as flash_utils
from torch.nn import functional as F
from transformers import AttentionInterface, CompileConfig, DataCollatorWithFlattening
from transformers.integrations.flash_attention import flash_attention_forward
from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask
from transformers.processing_utils import Unpack
from transformers.utils import TransformersKwargs
from transformers.utils.generic import find_labels

from helpers import tiny_model
from modeling_minigpt import MiniGPTAttention, MiniGPTBlock, MiniGPTForCausalLM, MiniGPTModel, next_token_loss


def prompts(*lengths: int, seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(1, 50, (n,), generator=generator) for n in lengths]


def left_padded(sequences: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T) ids padded on the left with 0, and the (B, T) attention mask."""
    width = max(len(s) for s in sequences)
    ids = torch.stack([F.pad(s, (width - len(s), 0)) for s in sequences])
    mask = torch.stack([F.pad(torch.ones(len(s), dtype=torch.long), (width - len(s), 0)) for s in sequences])
    return ids, mask


def packed(sequences: list[torch.Tensor]) -> dict[str, torch.Tensor]:
    """One row holding every sequence, positions restarting at 0, labels -100 at each start: what
    `DataCollatorWithFlattening` hands a model for padding-free training."""
    return DataCollatorWithFlattening()([{"input_ids": s.tolist()} for s in sequences])


def logits_alone(model, sequences: list[torch.Tensor]) -> list[torch.Tensor]:
    with torch.no_grad():
        return [model(s[None]).logits[0] for s in sequences]


def assert_rows_equal_alone(model, sequences, **close):
    """A left-padded batch and a packed row both give each sequence the logits it gets alone."""
    reference = logits_alone(model, sequences)
    ids, mask = left_padded(sequences)
    batch = packed(sequences)
    with torch.no_grad():
        padded_logits = model(ids, attention_mask=mask).logits
        packed_logits = model(batch["input_ids"], position_ids=batch["position_ids"]).logits[0]
    starts = torch.tensor([0] + [len(s) for s in sequences]).cumsum(0)
    for i, expected in enumerate(reference):
        torch.testing.assert_close(padded_logits[i, -len(expected) :], expected, **close)
        torch.testing.assert_close(packed_logits[starts[i] : starts[i + 1]], expected, **close)


# ----------------------------------------------------------------------------------------------------------------------
# eager and sdpa: padded and packed


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_packed_sequences_do_not_see_each_other_and_equal_padded(implementation):
    model = tiny_model(implementation, block_size=16)
    sequences = prompts(9, 16, 4, 12)  # 41 tokens in one packed row: longer than the context, no position past it
    assert_rows_equal_alone(model, sequences, atol=1e-5, rtol=0)


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_packed_training_loss_and_gradients_equal_padded(implementation):
    """Padding-free training (DataCollatorWithFlattening) gives the loss and gradients of a right-padded batch."""
    sequences = prompts(7, 3, 10)
    width = max(len(s) for s in sequences)
    ids = torch.stack([F.pad(s, (0, width - len(s))) for s in sequences])
    labels = torch.stack([F.pad(s, (0, width - len(s)), value=-100) for s in sequences])

    def loss_and_grad(batch):
        model = tiny_model(implementation, seed=1).train()
        loss = model(**batch).loss
        loss.backward()
        return loss, model.model.layers[0].attn.qkv_proj.weight.grad

    padded_loss, padded_grad = loss_and_grad(dict(input_ids=ids, labels=labels))
    packed_loss, packed_grad = loss_and_grad(packed(sequences))
    torch.testing.assert_close(packed_loss, padded_loss)
    torch.testing.assert_close(packed_grad, padded_grad, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_plain_causal_calls_skip_the_mask_builder_and_compute_what_it_would(implementation, monkeypatch):
    """A call whose mask is the plain causal one (no padding, no packing, no cache or one new token) makes no mask: the
    same logits as with the library's mask; everything else still goes to `create_causal_mask`."""
    import modeling_minigpt

    model, calls = tiny_model(implementation, block_size=32), []

    def counted_mask_builder(*args, **kwargs):
        calls.append(1)
        return masking_utils.create_causal_mask(*args, **kwargs)

    monkeypatch.setattr(modeling_minigpt, "create_causal_mask", counted_mask_builder)

    def decode(ids: torch.Tensor, mask: torch.Tensor | None, **kwargs) -> torch.Tensor:
        """The prompt, then three one-token steps on the cache; the logits of every step."""
        with torch.no_grad():
            out = model(ids[:, :-3], attention_mask=None if mask is None else mask[:, :-3], **kwargs)
            steps = [out.logits[:, -1]]
            for t in range(ids.shape[1] - 3, ids.shape[1]):
                step_mask = None if mask is None else mask[:, : t + 1]
                out = model(ids[:, t : t + 1], attention_mask=step_mask, past_key_values=out.past_key_values)
                steps.append(out.logits[:, -1])
        return torch.stack(steps)

    ids = torch.randint(1, 50, (2, 12), generator=torch.Generator().manual_seed(0))
    full = torch.ones_like(ids)
    fast = {"no mask": decode(ids, None), "full 2D mask": decode(ids, full)}
    assert calls == []  # neither the prompt nor the steps built a mask
    monkeypatch.setattr(modeling_minigpt, "is_plain_causal", lambda *args: False)  # the library for every call
    reference = decode(ids, full)
    assert len(calls) == 4
    for name, logits in fast.items():
        torch.testing.assert_close(logits, reference, atol=1e-5, rtol=0, msg=name)

    monkeypatch.undo()
    monkeypatch.setattr(modeling_minigpt, "create_causal_mask", counted_mask_builder)
    calls.clear()
    padded = full.clone()
    padded[0, :2] = 0
    decode(ids, padded)  # padding: the prompt and every step need a mask
    assert len(calls) == 4
    calls.clear()
    with torch.no_grad():
        model(ids, position_ids=torch.arange(12)[None] % 6)  # given positions may be packed sequences
    assert len(calls) == 1


def test_positions_not_lengths_set_the_context_limit():
    model = tiny_model(block_size=16)
    with torch.no_grad():
        model(torch.randint(0, 50, (1, 20)), position_ids=torch.arange(20)[None] % 10)  # two packed 10s: fine
        with pytest.raises(ValueError, match="context length is 16 tokens, but this input reaches position 16"):
            model(torch.randint(0, 50, (1, 17)))


# ----------------------------------------------------------------------------------------------------------------------
# flex_attention


def test_flex_attention_on_a_cpu_is_refused_with_what_to_use_instead():
    """torch 2.13's compiled CPU flex kernel gives NaN for narrow heads and crashes on a tensor mask: the library's
    flex, which `_supports_flex_attn` lets a user set, is refused on a CPU before anything is compiled, with the way
    out (sdpa, eager, or the minigpt package's opt-in, tests/test_flex.py)."""
    model = tiny_model("flex_attention")
    with pytest.raises(
        ValueError,
        match=r"flex_attention does not run right on a CPU.*use sdpa or eager.*"
        r"import minigpt.flex_cpu.*set_attn_implementation\('flex_attention_cpu'\)",
    ):
        model(torch.randint(0, 50, (2, 6)), attention_mask=torch.ones(2, 6, dtype=torch.long))


def test_attention_weights_are_refused_clearly_where_only_eager_computes_them():
    with pytest.raises(ValueError, match="output_attentions=True needs the eager or sdpa attention"):
        tiny_model("flex_attention")(torch.randint(0, 50, (1, 5)), output_attentions=True)


# ----------------------------------------------------------------------------------------------------------------------
# flash attention: the library's own flash path, with a reference kernel in place of the CUDA one


def reference_flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False):
    """flash_attn_func's contract in plain PyTorch: (B, T, H, D) in and out, causal aligned bottom-right."""
    T, S = q.shape[1], k.shape[1]
    mask = torch.ones(T, S, dtype=torch.bool).tril(S - T) if causal else None
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, H, T, D)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=softmax_scale).transpose(1, 2)


def reference_flash_attn_varlen_func(
    q,
    k,
    v,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q=None,
    max_seqlen_k=None,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
):
    """flash_attn_varlen_func's contract: sequences concatenated, (total, H, D), cut at the cumulative lengths."""
    pieces = []
    for i in range(len(cu_seqlens_q) - 1):
        qs, ks, vs = (x[cu[i] : cu[i + 1]][None] for x, cu in ((q, cu_seqlens_q), (k, cu_seqlens_k), (v, cu_seqlens_k)))
        pieces.append(reference_flash_attn_func(qs, ks, vs, softmax_scale=softmax_scale, causal=causal)[0])
    return torch.cat(pieces)


@pytest.fixture
def reference_flash(monkeypatch):
    """attn_implementation="flash_reference": the library's flash_attention_forward and flash mask (unpadding from
    the 2D mask, varlen from packed position_ids, cache offsets), with the reference kernels above instead of the
    flash-attn package, which needs CUDA. Records what the model hands the attention function."""
    name, calls = "flash_reference", []

    def recording_flash(module, query, key, value, attention_mask, **kwargs):
        calls.append(dict(mask=attention_mask, position_ids=kwargs.get("position_ids")))
        return flash_attention_forward(module, query, key, value, attention_mask, **kwargs)

    monkeypatch.setitem(AttentionInterface._global_mapping, name, recording_flash)
    monkeypatch.setitem(AttentionMaskInterface._global_mapping, name, flash_attention_mask)
    kernels = dict(
        _loaded_implementation=name,
        _flash_fn=reference_flash_attn_func,
        _flash_varlen_fn=reference_flash_attn_varlen_func,
        _flash_with_kvcache_fn=None,
        _pad_fn=flash_utils._pad_input,
        _unpad_fn=flash_utils._unpad_input,
        _process_with_kvcache_kwargs_fn=dict,
        _process_flash_kwargs_fn=flash_utils._lazy_define_process_function(reference_flash_attn_varlen_func),
    )
    for attribute, value in kernels.items():
        monkeypatch.setattr(flash_utils, attribute, value)
    return name, calls


def test_flash_path_gets_the_2d_mask_and_packed_positions_and_equals_eager(reference_flash):
    name, calls = reference_flash
    eager, flash = tiny_model("eager", block_size=16), tiny_model(name, block_size=16)
    sequences = prompts(9, 16, 4)
    ids, mask = left_padded(sequences)
    with torch.no_grad():
        flash(ids)
        assert calls[-1]["mask"] is None  # no padding: plain causal flash
        flash(ids, attention_mask=mask)
        assert torch.equal(calls[-1]["mask"], mask.bool())  # padding: the 2D mask, which flash unpads by
        batch = packed(sequences)
        flash(batch["input_ids"], position_ids=batch["position_ids"])
        assert calls[-1]["mask"] is None and torch.equal(calls[-1]["position_ids"], batch["position_ids"])
    assert_rows_equal_alone(flash, sequences, atol=1e-5, rtol=0)
    kwargs = dict(max_new_tokens=6, do_sample=False, pad_token_id=0)
    ids, mask = left_padded(sequences[::2])  # 9 and 4 tokens, + 6 new within the context of 16
    with torch.no_grad():
        assert torch.equal(
            flash.generate(ids, attention_mask=mask, **kwargs), eager.generate(ids, attention_mask=mask, **kwargs)
        )


# ----------------------------------------------------------------------------------------------------------------------
# torch.compile and torch.export


def test_compiled_fullgraph_generation_with_a_static_cache_equals_eager():
    """generate() compiles the decoding step when the cache is static; fullgraph=True makes any graph break an error.
    The backend records each graph and runs it as is (as backend="eager" would): tracing is what this proves, and
    inductor's C++ build would take a minute here. The prompts are left-padded: the 4D mask goes through the graph."""
    graphs = []

    def recording_backend(graph_module, example_inputs):
        graphs.append(graph_module)
        return graph_module.forward

    model = tiny_model("sdpa")
    ids, mask = left_padded(prompts(7, 4))
    kwargs = dict(max_new_tokens=8, min_new_tokens=8, do_sample=False, pad_token_id=0)
    compile_config = CompileConfig(fullgraph=True, backend=recording_backend, mode=None)
    compile_config._compile_all_devices = True  # generate() compiles on accelerators only unless told
    with torch.no_grad():
        expected = model.generate(ids, attention_mask=mask, **kwargs)
        compiled = model.generate(
            ids, attention_mask=mask, cache_implementation="static", compile_config=compile_config, **kwargs
        )
    assert graphs, "the decoding step was not compiled"
    assert torch.equal(compiled, expected)


def test_exported_forward_with_an_attention_mask_equals_eager():
    """torch.export traces the forward with a padding mask; the exported program then gives eager's logits for a
    different padding pattern too, so nothing about the mask's values was baked in."""
    model = tiny_model("sdpa")
    ids, mask = left_padded(prompts(7, 4, 6))
    exported = torch.export.export(model, (ids,), dict(attention_mask=mask, use_cache=False)).module()
    other_mask = mask.flip(0)
    with torch.no_grad():
        for m in (mask, other_mask):
            expected = model(ids, attention_mask=m, use_cache=False).logits
            torch.testing.assert_close(exported(ids, attention_mask=m, use_cache=False).logits, expected)


# ----------------------------------------------------------------------------------------------------------------------
# The loss, the kwargs, and the backend contract


def test_shift_labels_give_the_loss_and_gradient_of_labels():
    model = tiny_model().train()
    ids = torch.randint(0, 50, (3, 9))
    labels = ids.clone()
    labels[0, :3] = -100
    shift_labels = F.pad(labels, (0, 1), value=-100)[:, 1:]  # what context parallelism hands the model

    def loss_and_grad(**targets):
        model.zero_grad()
        loss = model(ids, **targets).loss
        loss.backward()
        return loss, model.model.token_embedding.weight.grad.clone()

    by_labels, by_shift = loss_and_grad(labels=labels), loss_and_grad(shift_labels=shift_labels)
    torch.testing.assert_close(by_shift[0], by_labels[0])
    torch.testing.assert_close(by_shift[1], by_labels[1])
    sharded = loss_and_grad(labels=labels.roll(1, dims=1), shift_labels=shift_labels)  # shift_labels win over labels
    torch.testing.assert_close(sharded[0], by_labels[0])
    logits = model(ids).logits
    summed = next_token_loss(logits, shift_labels=shift_labels, num_items_in_batch=1)
    torch.testing.assert_close(summed, by_labels[0] * (shift_labels != -100).sum())
    assert find_labels(MiniGPTForCausalLM) == ["labels"]  # Trainer evaluates a batch's loss when these are all given


@pytest.mark.parametrize("module", [MiniGPTForCausalLM, MiniGPTModel, MiniGPTBlock, MiniGPTAttention])
def test_forward_kwargs_are_typed_as_transformers_kwargs(module):
    """`**kwargs: Unpack[TransformersKwargs]`, as Llama: how the library and its docs see output_attentions & co."""
    annotation = typing.get_type_hints(module.forward)["kwargs"]
    assert annotation == Unpack[TransformersKwargs]
    assert {"output_attentions", "output_hidden_states", "num_items_in_batch"} <= TransformersKwargs.__optional_keys__


def test_attention_backend_contract(monkeypatch):
    """What `_supports_attention_backend` promises to TGI and vLLM: an attention function registered by name is called
    by every layer with the caller's kwargs passed all the way down, gets no mask (the backend masks by itself, here
    by the packed positions), and the logits can be sliced by a tensor of positions."""
    calls = []

    def backend_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
        calls.append((module.layer_idx, attention_mask, kwargs.get("backend_metadata")))
        same_sequence = kwargs["seq_idx"][0][:, None] == kwargs["seq_idx"][0][None, :]  # (T, T)
        causal = torch.ones_like(same_sequence).tril()
        output = F.scaled_dot_product_attention(query, key, value, attn_mask=same_sequence & causal, scale=scaling)
        return output.transpose(1, 2), None

    monkeypatch.setitem(AttentionInterface._global_mapping, "backend", backend_attention)
    model = tiny_model("backend", block_size=16)
    sequences = prompts(9, 16, 4)
    batch = DataCollatorWithFlattening(return_seq_idx=True)([{"input_ids": s.tolist()} for s in sequences])
    last_tokens = torch.tensor([8, 24, 28])  # the last token of each packed sequence
    with torch.no_grad():
        logits = model(
            batch["input_ids"],
            position_ids=batch["position_ids"],
            seq_idx=batch["seq_idx"],
            backend_metadata="passed through",
            logits_to_keep=last_tokens,
            use_cache=False,
        ).logits[0]
    assert [(layer, mask, metadata) for layer, mask, metadata in calls] == [
        (0, None, "passed through"),
        (1, None, "passed through"),
    ]
    expected = torch.stack([alone[-1] for alone in logits_alone(tiny_model("eager", block_size=16), sequences)])
    torch.testing.assert_close(logits, expected, atol=1e-5, rtol=0)


def test_device_placement_flags_name_what_the_model_has():
    """`_no_split_modules` and `_skip_keys_device_placement` act when a model is spread over several devices (none
    here): they must at least name a block class of the model and an argument of its forward."""
    model = tiny_model()
    module_classes = {type(module).__name__ for module in model.modules()}
    assert set(MiniGPTForCausalLM._no_split_modules) <= module_classes
    assert set(MiniGPTForCausalLM._skip_keys_device_placement) <= set(inspect.signature(model.forward).parameters)
