"""Configuration of MiniGPT, a GPT-2-style decoder-only transformer.

Shipped next to `modeling_minigpt.py` in every saved model folder, so that
`AutoConfig.from_pretrained(folder, trust_remote_code=True)` works anywhere.
"""

from transformers import PretrainedConfig

# Named sizes used by the product. Each is a dict of config fields; `MiniGPTConfig.from_preset` applies overrides.
# What each trains with is the training side's (minigpt/presets.py): a saved model folder does not need it.
PRESETS = {
    # About makemore's transformer: characters a-z, a boundary token and a pad token.
    "names": dict(vocab_size=28, block_size=16, n_layer=4, n_head=4, n_embd=64),
    # The induction lab: two layers (the fewest an induction head needs), letters a-z like names, rows of names
    # written twice (data.builtin_repeats), up to 30 letters and the boundaries.
    "induction": dict(vocab_size=28, block_size=32, n_layer=2, n_head=4, n_embd=64),
    # The specimen: Shakespeare's characters in two layers, trained on a mixture with repeated spans (train.py
    # --repeat_fraction, --random_span_fraction) so that its heads show the textbook roles: previous token, sink,
    # induction. (vocab_size is for BPE; the preset reads characters.)
    "specimen": dict(vocab_size=1024, block_size=128, n_layer=2, n_head=4, n_embd=128),
    # Character or byte-level BPE text, a few million parameters: trains on a laptop CPU in minutes.
    "shakespeare": dict(vocab_size=4096, block_size=128, n_layer=6, n_head=6, n_embd=192),
    # GPT-2 small (124M), for GPUs and for loading OpenAI's weights with `from_gpt2`.
    "gpt2": dict(vocab_size=50257, block_size=1024, n_layer=12, n_head=12, n_embd=768),
}


class MiniGPTConfig(PretrainedConfig):
    r"""
    Args:
        vocab_size: number of tokens the model reads and predicts.
        block_size: context length, the most positions the model can attend over.
        n_layer: number of transformer blocks.
        n_head: number of attention heads per block; `n_embd` must be divisible by it.
        n_embd: width of the residual stream (each head has `n_embd // n_head` dimensions).
        embd_dropout: dropout on the sum of token and position embeddings.
        attention_dropout: dropout on the attention weights (after the softmax).
        resid_dropout: dropout on each sublayer's output before it is added to the residual stream.
        bias: whether the linear layers and layer norms have biases (GPT-2 has them).
        layer_norm_epsilon: epsilon of the layer norms.
        initializer_range: standard deviation of the normal initialisation.
    """

    model_type = "minigpt"
    keys_to_ignore_at_inference = ["past_key_values"]
    # The library-wide names resolve to ours, so generic code (Trainer, generate, pipelines) finds the sizes.
    attribute_map = {
        "hidden_size": "n_embd",
        "num_hidden_layers": "n_layer",
        "num_attention_heads": "n_head",
        "max_position_embeddings": "block_size",
    }

    vocab_size: int = 50257
    block_size: int = 1024
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    embd_dropout: float = 0.0
    attention_dropout: float = 0.0
    resid_dropout: float = 0.0
    bias: bool = True
    layer_norm_epsilon: float = 1e-5
    initializer_range: float = 0.02
    use_cache: bool = True
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None
    pad_token_id: int | None = None
    tie_word_embeddings: bool = True

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        self._check_sizes()
        # `save_pretrained` writes `auto_map` only for the saved object's own class: name all three here so that
        # a folder saved from either model class loads with AutoConfig, AutoModel and AutoModelForCausalLM.
        self.auto_map = {
            "AutoConfig": "configuration_minigpt.MiniGPTConfig",
            "AutoModel": "modeling_minigpt.MiniGPTModel",
            "AutoModelForCausalLM": "modeling_minigpt.MiniGPTForCausalLM",
        }

    def _check_sizes(self):
        for field in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
            value = getattr(self, field)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"MiniGPTConfig.{field} must be a positive integer, got {value!r}: use 1 or more.")
        if self.n_embd % self.n_head != 0:
            lower = self.n_embd - self.n_embd % self.n_head
            raise ValueError(
                f"MiniGPTConfig.n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head}) so that every head "
                f"gets n_embd // n_head dimensions: use n_embd={lower or self.n_head} or {lower + self.n_head}, "
                f"or an n_head that divides {self.n_embd}."
            )
        for field in ("embd_dropout", "attention_dropout", "resid_dropout"):
            value = getattr(self, field)
            if not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise ValueError(f"MiniGPTConfig.{field} must be in [0, 1), got {value!r}: use 0.0 for no dropout.")
        if self.layer_norm_epsilon <= 0:
            raise ValueError(f"MiniGPTConfig.layer_norm_epsilon must be positive, got {self.layer_norm_epsilon!r}.")

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @classmethod
    def from_preset(cls, name: str, **overrides) -> "MiniGPTConfig":
        """A config of a named size in `PRESETS`, any field overridden: `from_preset("names", n_layer=2)`."""
        if name not in PRESETS:
            raise ValueError(f"Unknown MiniGPT preset {name!r}: choose one of {', '.join(PRESETS)}.")
        return cls(**{**PRESETS[name], **overrides})


__all__ = ["MiniGPTConfig", "PRESETS"]
