"""MiniGPT: a GPT-2-style decoder-only transformer, written to be read.

The attention sublayer follows the textbook derivation step by step: Q/K/V projections split into heads, scaled dot
products, causal mask, softmax, dropout, weighted sum, heads merged, output projection. Everything else is the plumbing
that makes it a first-class `transformers` model: `generate()`, the KV cache, left padding, `save_pretrained`,
`AutoModelForCausalLM.from_pretrained(..., trust_remote_code=True)` and `pipeline("text-generation")`.

Shapes: B batch, T new positions, S attended positions (cache + new), C width (n_embd), H heads, D head_dim = C // H.
"""

import math
from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F
from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, GenerationMixin, PreTrainedModel
from transformers import initialization as init
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer
from transformers.masking_utils import create_causal_mask
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.processing_utils import Unpack
from transformers.utils import TransformersKwargs
from transformers.utils.generic import can_return_tuple
from transformers.utils.import_utils import is_tracing
from transformers.utils.output_capturing import capture_outputs

try:  # inside a saved folder loaded with trust_remote_code, the config is a sibling module
    from .configuration_minigpt import MiniGPTConfig
except ImportError:  # imported from the repo (`python app.py`, tests)
    from configuration_minigpt import MiniGPTConfig


# ---- the model, in reading order: attention functions, attention, MLP, block, model, loss, LM head -------------------


def eager_attention_forward(
    module: nn.Module,
    query: torch.Tensor,  # (B, H, T, D)
    key: torch.Tensor,  # (B, H, S, D)
    value: torch.Tensor,  # (B, H, S, D)
    attention_mask: torch.Tensor | None,  # (B, 1, T, S): bool (True: may attend) or additive float; None: see below
    scaling: float,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention written out, the path that returns the weights (`output_attentions`, the demo's maps)."""
    T, S = query.shape[-2], key.shape[-2]
    # Scaling the queries rather than the (T, S) scores: one pass less over the largest tensor here (T x S per head)
    scores = (query * scaling) @ key.transpose(-2, -1)  # (B, H, T, S)
    if attention_mask is None and T > 1:  # what sdpa's is_causal means: query i sees keys 0..i
        attention_mask = torch.ones(T, S, dtype=torch.bool, device=query.device).tril()  # (T, S)
    if attention_mask is not None and attention_mask.dtype == torch.bool:  # sdpa's format
        # The dtype's minimum rather than -inf: a query that may see no key at all (left padding) then gets even
        # weights instead of NaN, which the next layer's values would spread to every real token. In place: the
        # scores are ours.
        scores.masked_fill_(~attention_mask, torch.finfo(scores.dtype).min)
    elif attention_mask is not None:  # the library's eager format: 0 where allowed, the dtype's minimum where not
        scores = scores + attention_mask
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)  # each row sums to 1
    weights = F.dropout(weights, p=dropout, training=module.training)
    output = weights @ value  # (B, H, T, D)
    return output.transpose(1, 2), weights  # (B, T, H, D), as every attention interface returns it


def sdpa_attention_forward(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """The same computation as `eager_attention_forward` in PyTorch's fused kernel, without returning the weights.

    No mask means a plain causal one, which the kernel applies itself (`is_causal`) without a mask tensor; a single
    new token (a decoding step) may see every cached one.
    """
    is_causal = attention_mask is None and query.shape[-2] > 1
    output = F.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, dropout_p=dropout, is_causal=is_causal, scale=scaling
    )  # (B, H, T, D)
    return output.transpose(1, 2), None


# Our two paths; any other `attn_implementation` (flex_attention, flash_attention_2, one registered by name, ...) comes
# from the library's attention interface, with its mask made by the library for it (`create_causal_mask`).
ATTENTION_FUNCTIONS = {"eager": eager_attention_forward, "sdpa": sdpa_attention_forward}


class MiniGPTAttention(nn.Module):
    """Causal multi-head self-attention with one fused projection for Q, K and V."""

    def __init__(self, config: MiniGPTConfig, layer_idx: int):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.n_head, self.head_dim = config.n_head, config.head_dim
        self.scaling = self.head_dim**-0.5  # 1/sqrt(D), per head: not 1/sqrt(C)
        self.is_causal = True
        self.qkv_proj = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.out_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.out_proj.is_residual_projection = True
        self.resid_dropout = nn.Dropout(config.resid_dropout)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, C) -> (B, H, T, D)"""
        return x.unflatten(-1, (self.n_head, self.head_dim)).transpose(1, 2)

    def forward(
        self,
        hidden_states: torch.Tensor,  # (B, T, C)
        attention_mask: torch.Tensor | None = None,  # in the format of the attention implementation, see MiniGPTModel
        past_key_values: Cache | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        query, key, value = self.qkv_proj(hidden_states).split(self.config.n_embd, dim=-1)  # 3 x (B, T, C)
        query, key, value = self.split_heads(query), self.split_heads(key), self.split_heads(value)  # (B, H, T, D)
        if past_key_values is not None:  # append this step's keys and values to the cache; attend over all of them
            key, value = past_key_values.update(key, value, self.layer_idx)  # (B, H, S, D)

        # Attention weights are only ever materialised by the eager path, so a request for them takes it.
        implementation = "eager" if kwargs.get("output_attentions") else self.config._attn_implementation
        if implementation in ATTENTION_FUNCTIONS:
            attention: Callable = ATTENTION_FUNCTIONS[implementation]
        else:  # flex, flash, a backend registered by name: the library's attention interface
            attention = ALL_ATTENTION_FUNCTIONS.get_interface(implementation, eager_attention_forward)
        output, weights = attention(
            self,
            query,
            key,
            value,
            attention_mask,
            dropout=self.config.attention_dropout if self.training else 0.0,
            scaling=self.scaling,
            **kwargs,
        )  # output (B, T, H, D), weights (B, H, T, S) or None
        output = output.flatten(2)  # merge heads: (B, T, C)
        return self.resid_dropout(self.out_proj(output)), weights


class MiniGPTMLP(nn.Module):
    def __init__(self, config: MiniGPTConfig):
        super().__init__()
        self.fc_in = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.act = nn.GELU(approximate="tanh")  # GPT-2's "gelu_new", as one fused kernel
        self.out_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.out_proj.is_residual_projection = True
        self.dropout = nn.Dropout(config.resid_dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.out_proj(self.act(self.fc_in(x))))


class MiniGPTBlock(GradientCheckpointingLayer):
    """Pre-LayerNorm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, config: MiniGPTConfig, layer_idx: int):
        super().__init__()
        self.attn_norm = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon, bias=config.bias)
        self.attn = MiniGPTAttention(config, layer_idx)
        self.mlp_norm = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon, bias=config.bias)
        self.mlp = MiniGPTMLP(config)

    def forward(
        self, hidden_states, attention_mask=None, past_key_values=None, **kwargs: Unpack[TransformersKwargs]
    ) -> torch.Tensor:
        attn_output, _ = self.attn(self.attn_norm(hidden_states), attention_mask, past_key_values, **kwargs)
        hidden_states = hidden_states + attn_output
        return hidden_states + self.mlp(self.mlp_norm(hidden_states))


class MiniGPTPreTrainedModel(PreTrainedModel):
    config_class = MiniGPTConfig
    config: MiniGPTConfig
    base_model_prefix = "model"
    supports_gradient_checkpointing = True
    _no_split_modules = ["MiniGPTBlock"]
    _skip_keys_device_placement = ["past_key_values"]
    _supports_sdpa = True
    _supports_flash_attn = True
    _supports_flex_attn = True  # on GPUs; on a CPU refused, see check_implementation_can_serve
    _supports_attention_backend = True
    _can_compile_fullgraph = True
    # What `output_hidden_states` / `output_attentions` collect, through the library's output capturing hooks.
    _can_record_outputs = {"hidden_states": MiniGPTBlock, "attentions": MiniGPTAttention}

    def _init_weights(self, module):
        super()._init_weights(module)  # normal(0, initializer_range) linears and embeddings, unit layer norms
        if getattr(module, "is_residual_projection", False):
            # GPT-2: each residual branch's last projection is scaled by 1/sqrt(2 * n_layer), so that the residual
            # stream's variance does not grow with depth (two branches per block).
            std = self.config.initializer_range / math.sqrt(2 * self.config.n_layer)
            init.normal_(module.weight, mean=0.0, std=std)


class MiniGPTModel(MiniGPTPreTrainedModel):
    """The transformer without its language-model head: embeddings, blocks, final layer norm."""

    def __init__(self, config: MiniGPTConfig):
        super().__init__(config)
        self.token_embedding = nn.Embedding(config.vocab_size, config.n_embd)
        self.position_embedding = nn.Embedding(config.block_size, config.n_embd)
        self.dropout = nn.Dropout(config.embd_dropout)
        self.layers = nn.ModuleList(MiniGPTBlock(config, i) for i in range(config.n_layer))
        self.final_norm = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon, bias=config.bias)
        self.gradient_checkpointing = False
        self.post_init()

    def get_input_embeddings(self):
        return self.token_embedding

    def set_input_embeddings(self, value):
        self.token_embedding = value

    @capture_outputs
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,  # (B, T)
        attention_mask: torch.Tensor | None = None,  # (B, S): 1 token, 0 padding
        position_ids: torch.LongTensor | None = None,  # (B, T); restarting at 0 inside a row: packed sequences
        past_key_values: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,  # (B, T, C)
        use_cache: bool | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> BaseModelOutputWithPast:
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("Pass exactly one of input_ids or inputs_embeds.")
        if inputs_embeds is None:
            inputs_embeds = self.token_embedding(input_ids)  # (B, T, C)
        q_len, last_position, given_positions = inputs_embeds.shape[1], None, position_ids
        past_len = past_key_values.get_seq_length() if past_key_values is not None else 0
        if position_ids is None:
            position_ids = default_position_ids(attention_mask, past_len, q_len, inputs_embeds.device)
            if attention_mask is None and isinstance(past_len, int):  # known without reading the tensor
                last_position = past_len + q_len - 1
        check_positions(position_ids, self.config.block_size, last_position)
        implementation = self.config._attn_implementation
        check_implementation_can_serve(implementation, inputs_embeds.device, kwargs.get("output_attentions"))

        # The mask in the format the attention implementation takes: None for a plain causal mask (sdpa's is_causal,
        # no tensor made), a (B, 1, T, S) bool mask for sdpa and additive float for eager, a BlockMask for flex, the 2D
        # padding mask for flash. Sequences packed into one row (position_ids restarting at 0) are kept apart. It is
        # made before a fresh cache is: a call that starts without a cache may hold packed sequences, and the library
        # only looks for them when there is no cache.
        if is_plain_causal(implementation, attention_mask, given_positions, past_key_values, past_len, q_len):
            mask = None
        else:
            mask = create_causal_mask(self.config, inputs_embeds, attention_mask, past_key_values, position_ids)
        if use_cache is None:  # a training step never reuses its keys and values: don't copy them into a cache
            use_cache = self.config.use_cache and not self.training
        if use_cache and past_key_values is None and not (self.gradient_checkpointing and self.training):
            past_key_values = MiniGPTCache(self.config)

        hidden_states = self.dropout(inputs_embeds + self.position_embedding(position_ids))  # (B, T, C)
        for block in self.layers:  # position_ids go on to the attention function: flash finds packed sequences by them
            hidden_states = block(hidden_states, mask, past_key_values, position_ids=position_ids, **kwargs)
        hidden_states = self.final_norm(hidden_states)
        return BaseModelOutputWithPast(last_hidden_state=hidden_states, past_key_values=past_key_values)


def next_token_loss(logits, labels=None, num_items_in_batch=None, shift_labels=None, **kwargs):
    """Mean cross-entropy of position t's logits (B, T, V) against labels[t + 1]; -100 labels are not counted.

    The labels are shifted rather than the logits so that the big logits tensor is never copied. `shift_labels`, the
    targets already shifted (position t's at t: context parallelism shards them so), are used as they are when given.
    `num_items_in_batch` (given by `Trainer` under gradient accumulation) replaces the count of this batch's labels.
    """
    if shift_labels is None:
        shift_labels = F.pad(labels, (0, 1), value=-100)[:, 1:]  # (B, T)
    targets = shift_labels.reshape(-1).to(logits.device)  # (B * T,)
    count = num_items_in_batch if num_items_in_batch is not None else (targets != -100).sum()
    count = torch.as_tensor(count, device=logits.device).clamp(min=1)
    return F.cross_entropy(logits.float().flatten(0, 1), targets, ignore_index=-100, reduction="sum") / count


class MiniGPTForCausalLM(MiniGPTPreTrainedModel, GenerationMixin):
    """MiniGPT with its language-model head, tied to the token embedding (the same matrix reads and writes tokens)."""

    _tied_weights_keys = {"lm_head.weight": "model.token_embedding.weight"}

    def __init__(self, config: MiniGPTConfig):
        super().__init__(config)
        self.model = MiniGPTModel(config)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        if config.tie_word_embeddings:  # the tied head is not saved: a Trainer resume re-ties it instead of warning
            self._keys_to_ignore_on_save = {"lm_head.weight"}
        self.post_init()

    def _prepare_cache_for_generation(self, generation_config, model_kwargs, *args, **kwargs):
        """`generate()` makes a plain `DynamicCache` by default: use the appendable one, the same but faster."""
        super()._prepare_cache_for_generation(generation_config, model_kwargs, *args, **kwargs)
        if type(model_kwargs.get("past_key_values")) is DynamicCache:
            model_kwargs["past_key_values"] = MiniGPTCache(self.config)

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, new_embeddings):
        self.lm_head = new_embeddings

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        past_key_values: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,  # (B, T), -100 where no loss; shifted inside
        use_cache: bool | None = None,
        logits_to_keep: int | torch.Tensor = 0,
        **kwargs: Unpack[TransformersKwargs],
    ) -> CausalLMOutputWithPast:
        # (B, T) labels already shifted, used instead of labels (context parallelism). Not a named parameter: Trainer
        # takes every parameter named like a label for a label, and would compute no loss on batches without it.
        shift_labels = kwargs.pop("shift_labels", None)
        outputs = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_values=past_key_values,
            inputs_embeds=inputs_embeds,
            use_cache=use_cache,
            **kwargs,
        )
        hidden_states = outputs.last_hidden_state
        if isinstance(logits_to_keep, int) and logits_to_keep > 0:  # generate() needs the last position only
            hidden_states = hidden_states[:, -logits_to_keep:]
        elif isinstance(logits_to_keep, torch.Tensor):
            hidden_states = hidden_states[:, logits_to_keep]
        logits = self.lm_head(hidden_states)  # (B, T, vocab_size)

        loss = None
        if labels is not None or shift_labels is not None:  # next-token cross-entropy: t predicts labels[t + 1]
            loss = next_token_loss(logits, labels, shift_labels=shift_labels, **kwargs)
        return CausalLMOutputWithPast(
            loss=loss,
            logits=logits,
            past_key_values=outputs.past_key_values,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )

    @classmethod
    def from_gpt2(cls, source, **config_overrides) -> "MiniGPTForCausalLM":
        """An equal MiniGPT from a `transformers` GPT2LMHeadModel, or from anything its `from_pretrained` accepts."""
        from transformers import GPT2LMHeadModel

        gpt2 = source if isinstance(source, GPT2LMHeadModel) else GPT2LMHeadModel.from_pretrained(source)
        g = gpt2.config
        if g.activation_function not in ("gelu_new", "gelu_pytorch_tanh"):
            raise ValueError(f"from_gpt2 needs GPT-2's tanh GELU, not activation_function={g.activation_function!r}.")
        if g.scale_attn_by_inverse_layer_idx or g.reorder_and_upcast_attn or not g.scale_attn_weights:
            raise ValueError("from_gpt2 supports GPT-2's standard attention scaling (1/sqrt(head_dim)) only.")
        config = MiniGPTConfig(
            vocab_size=g.vocab_size,
            block_size=g.n_positions,
            n_layer=g.n_layer,
            n_head=g.n_head,
            n_embd=g.n_embd,
            embd_dropout=g.embd_pdrop,
            attention_dropout=g.attn_pdrop,
            resid_dropout=g.resid_pdrop,
            layer_norm_epsilon=g.layer_norm_epsilon,
            initializer_range=g.initializer_range,
            bos_token_id=g.bos_token_id,
            eos_token_id=g.eos_token_id,
            pad_token_id=g.pad_token_id,
            **config_overrides,
        )
        model = cls(config).to(gpt2.dtype)
        model.load_state_dict(gpt2_state_dict_to_minigpt(gpt2.state_dict()), strict=False)
        model.tie_weights()
        return model.to(gpt2.device).train(gpt2.training)


# ---- plumbing: the KV cache, positions and masks (what makes it a `transformers` model) ------------------------------


class AppendableCacheLayer(DynamicLayer):
    """A `DynamicLayer` that writes each step's keys and values into spare room of a buffer that doubles when full.

    `DynamicLayer` concatenates the whole cache every step, O(S) copying per token; this copies only the new tokens.
    `keys` / `values` stay the (B, H, S, D) tensors `DynamicLayer` exposes, here views of the buffer. When anything
    else replaces them (crop, beam reordering, batch selection), the next update notices and starts a buffer from them.
    """

    def update(self, key_states, value_states, *args, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        if self.keys is not getattr(self, "_keys_view", None):
            self._restart_buffers(key_states, value_states)
        start, end = self.length, self.length + key_states.shape[-2]
        if end > self._key_buffer.shape[-2]:
            self._grow(2 * end)
        self._key_buffer[:, :, start:end] = key_states
        self._value_buffer[:, :, start:end] = value_states
        self.length = end
        self.keys = self._keys_view = self._key_buffer[:, :, :end]
        self.values = self._value_buffer[:, :, :end]
        return self.keys, self.values

    def _restart_buffers(self, key_states, value_states):
        """New buffers holding what `keys` / `values` hold now (nothing on the first update)."""
        cached = self.keys.numel() > 0
        keys, values = (self.keys, self.values) if cached else (key_states[:, :, :0], value_states[:, :, :0])
        self.length = keys.shape[-2]
        self._key_buffer, self._value_buffer = keys, values
        self._grow(max(64, 2 * (self.length + key_states.shape[-2])))

    def _grow(self, capacity: int):
        def bigger(buffer):
            B, H, _, D = buffer.shape
            new = buffer.new_empty(B, H, capacity, D)
            new[:, :, : self.length] = buffer[:, :, : self.length]
            return new

        self._key_buffer, self._value_buffer = bigger(self._key_buffer), bigger(self._value_buffer)


class MiniGPTCache(DynamicCache):
    """The library's `DynamicCache` with appendable layers: same interface, no per-token concatenation."""

    def __init__(self, config=None, **kwargs):
        super().__init__(**kwargs)
        self.layers = []
        self.layer_class_to_replicate = AppendableCacheLayer


def default_position_ids(attention_mask: torch.Tensor | None, past_len, q_len: int, device) -> torch.Tensor:
    """Positions of the T new tokens: counted from the first real token, so left padding does not shift them."""
    if attention_mask is not None and attention_mask.dim() == 2:
        return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)[:, -q_len:]  # (B, T)
    return (torch.arange(q_len, device=device) + past_len)[None]  # (1, T); past_len is a tensor in a static cache


def check_positions(position_ids: torch.Tensor, block_size: int, last: int | None = None) -> None:
    """A clear error for a position past the context, which has no position embedding. The check is on positions, not
    on lengths: a row of packed sequences may be longer than the context, each sequence in it may not. `last`, the
    highest position when it is known without reading the tensor (counted from the cache's length), saves a read per
    step. Skipped while compiling or exporting, where reading a tensor's value would be a data-dependent branch (the
    position embedding's lookup still fails there on an index out of range)."""
    if last is None:
        if is_tracing(position_ids):
            return
        last = int(position_ids.max())
    if last >= block_size:
        raise ValueError(
            f"MiniGPT's context length is {block_size} tokens, but this input reaches position {last} (positions "
            f"count from 0). Shorten the prompt or lower max_new_tokens so that prompt + new tokens <= {block_size}."
        )


def is_plain_causal(implementation: str, attention_mask, position_ids, past_key_values, past_len, q_len: int) -> bool:
    """Whether the mask is the plain causal one, which our eager and sdpa paths apply without a mask tensor (None): no
    padding, no packed sequences, and either no cached tokens or one new token (which may see every cached one).

    `create_causal_mask` reaches the same answer for sdpa, but only after some 25 small tensor operations: at small
    shapes, a tenth of a decoding step. A full 2D mask (generate() passes one) is read once here. The library's own
    paths take everything else: padding, packing, static caches, flex, flash, and anything being compiled."""
    if implementation not in ATTENTION_FUNCTIONS or is_tracing(attention_mask):
        return False
    if past_key_values is not None and type(past_key_values) not in (MiniGPTCache, DynamicCache):
        return False  # a static cache's keys include empty slots, which only a mask hides
    if q_len > 1 and (past_len != 0 or position_ids is not None):  # given positions may restart: packed sequences
        return False
    return attention_mask is None or (attention_mask.dim() == 2 and bool(attention_mask.all()))


def check_implementation_can_serve(implementation: str, device: torch.device, output_attentions: bool | None) -> None:
    """Clear errors for what an attention implementation cannot do, instead of wrong numbers or a crashed process."""
    if output_attentions and implementation not in ATTENTION_FUNCTIONS:
        raise ValueError(
            f"output_attentions=True needs the eager or sdpa attention (the weights come from the eager path), not "
            f"{implementation}: call model.set_attn_implementation('sdpa') first."
        )
    if implementation == "flex_attention" and device.type == "cpu":
        # torch 2.13's compiled CPU flex kernel (inductor's C++ template) gives NaN for heads under 24 dims on AVX2,
        # aborts the process on a tensor mask, and may fail to build a mask that reads a tensor. The minigpt package
        # has a path around all three, opt-in, which a saved model folder cannot import by itself.
        raise ValueError(
            "flex_attention does not run right on a CPU (torch's compiled CPU flex kernel: NaN for narrow heads, a "
            "crash on a tensor mask): use sdpa or eager, or, with the minigpt package installed, `import "
            "minigpt.flex_cpu` and call model.set_attn_implementation('flex_attention_cpu')."
        )


# ---- GPT-2's weights, and registration with the Auto classes ---------------------------------------------------------


def gpt2_state_dict_to_minigpt(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Renames GPT-2's weights to MiniGPT's. GPT-2 stores its projections as Conv1D, (in, out): transpose them."""
    renames = {
        "wte": "token_embedding",
        "wpe": "position_embedding",
        "ln_f": "final_norm",
        "h": "layers",
        "ln_1": "attn_norm",
        "ln_2": "mlp_norm",
        "c_attn": "qkv_proj",
        "c_fc": "fc_in",
        "c_proj": "out_proj",
    }
    converted = {}
    for name, tensor in state.items():
        if name.startswith("lm_head") or name.endswith((".attn.bias", ".attn.masked_bias")):
            continue  # the head is tied; GPT-2's old causal-mask buffers are not weights
        parts = [renames.get(part, part) for part in name.removeprefix("transformer.").split(".")]
        if parts[-1] == "weight" and parts[-2] in ("qkv_proj", "fc_in", "out_proj"):
            tensor = tensor.t()
        converted["model." + ".".join(parts)] = tensor
    return converted


# Registration, so that the Auto classes know MiniGPT once this file is imported, and so that `save_pretrained` copies
# this file and the config's into the folder with an `auto_map` (ready for the Hub and `trust_remote_code=True`).
AutoConfig.register("minigpt", MiniGPTConfig, exist_ok=True)
AutoModel.register(MiniGPTConfig, MiniGPTModel, exist_ok=True)
AutoModelForCausalLM.register(MiniGPTConfig, MiniGPTForCausalLM, exist_ok=True)
MiniGPTConfig.register_for_auto_class()
MiniGPTModel.register_for_auto_class("AutoModel")
MiniGPTForCausalLM.register_for_auto_class("AutoModelForCausalLM")

__all__ = ["MiniGPTConfig", "MiniGPTModel", "MiniGPTForCausalLM", "MiniGPTPreTrainedModel", "MiniGPTAttention"]
