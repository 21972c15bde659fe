"""Configuration of MiniGPT, a GPT-2-style decoder-only transformer.

Shipped next to `modeling_minigpt.py` in every saved model folder, so that
`AutoConfig.from_pretrained(folder, trust_remote_code=True)` works anywhere.
"""

from transformers import PretrainedConfig

# Named sizes used by the product. Each is a dict of config fields; `MiniGPTConfig.from_preset` applies overrides.
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

# What each preset trains with: train.py's defaults for the Trainer's flags (and dropout); a flag given on its command
# line wins. Kept here beside the sizes, so that the demo reads them without importing the Trainer.
TRAINING_PRESETS = {
    "names": dict(  # tuned with bench/bench_quality.py: big steps at a high rate; a batch is 80 rows of packed names
        output_dir="runs/names",
        max_steps=6000,
        per_device_train_batch_size=80,
        learning_rate=6e-3,
        dropout=0.1,
        warmup_steps=100,
        weight_decay=0.1,
        adam_beta2=0.99,
        eval_steps=500,
        save_steps=500,
        logging_steps=100,
        per_device_eval_batch_size=500,
    ),
    "induction": dict(  # tuned with bench/bench_specimens.py: an induction head in a few minutes on 2 CPU cores
        output_dir="runs/induction",
        max_steps=8000,
        per_device_train_batch_size=32,
        learning_rate=3e-3,
        warmup_steps=100,
        weight_decay=0.0,
        adam_beta2=0.98,
        eval_steps=1000,
        save_steps=1000,
        logging_steps=100,
        per_device_eval_batch_size=500,
    ),
    "specimen": dict(  # chosen by the sweep in the README (bench/bench_specimens.py measures the roles)
        output_dir="runs/specimen",
        tokenizer="char",
        repeat_fraction=1.0,
        random_span_fraction=0.25,
        boundary_first=True,
        max_steps=8000,
        per_device_train_batch_size=16,
        learning_rate=3e-3,
        warmup_steps=100,
        weight_decay=0.1,
        adam_beta2=0.99,
        eval_steps=1000,
        save_steps=1000,
        logging_steps=100,
        per_device_eval_batch_size=64,
    ),
    "shakespeare": dict(
        output_dir="runs/shakespeare",
        max_steps=3000,
        per_device_train_batch_size=16,
        learning_rate=1e-3,
        warmup_steps=100,
        weight_decay=0.1,
        adam_beta2=0.99,
        eval_steps=250,
        save_steps=500,
        logging_steps=50,
        per_device_eval_batch_size=64,
    ),
    "gpt2": dict(  # nanoGPT's GPT-2 recipe: about 0.5M tokens a step with 8 GPUs (12 x 1024 x 5 x 8)
        output_dir="runs/gpt2",
        max_steps=600_000,
        per_device_train_batch_size=12,
        gradient_accumulation_steps=5,
        learning_rate=6e-4,
        warmup_steps=2000,
        weight_decay=0.1,
        adam_beta2=0.95,
        eval_steps=1000,
        save_steps=1000,
        logging_steps=10,
        per_device_eval_batch_size=16,
    ),
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
