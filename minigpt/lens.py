"""MiniGPT in TransformerLens 4: an architecture adapter, so that a learner who outgrows the demo carries on with
`run_with_cache`, hook names and head ablations on the same model and the same numbers.

    from minigpt import lens
    from transformer_lens.model_bridge import TransformerBridge

    lens.register()  # TransformerLens 4.3's boot_transformers needs it, installed project or not (register's note)
    bridge = TransformerBridge.boot_transformers("minigpt/models/specimen", trust_remote_code=True, device="cpu")
    logits, cache = bridge.run_with_cache(tokens)
    cache["blocks.1.attn.hook_pattern"]  # (batch, heads, query, key): the demo's maps

    bridge = lens.boot(folder, device="cpu")  # the same in one call, also for a folder without a tokenizer

The adapter maps MiniGPT's modules (modeling_minigpt.py) onto TransformerLens's component names: token and position
embeddings, each block's two layer norms, its attention (one fused q/k/v projection, split here into three) and its
MLP, the final norm and the LM head. It also declares the per-head layout of the attention weights, which
TransformerLens's weight processing (`bridge.enable_compatibility_mode()`: layer norms folded, writing weights and
unembedding centred, value biases folded) needs to compute the same function. TransformerLens and its dependencies are
optional (requirements-interp.txt): nothing else in the project imports this module.
"""

from pathlib import Path

import torch
from transformer_lens.conversion_utils.conversion_steps import RearrangeTensorConversion
from transformer_lens.conversion_utils.param_processing_conversion import ParamProcessingConversion
from transformer_lens.factories import architecture_adapter_factory
from transformer_lens.model_bridge import TransformerBridge
from transformer_lens.model_bridge.architecture_adapter import ArchitectureAdapter
from transformer_lens.model_bridge.generalized_components import (
    BlockBridge,
    EmbeddingBridge,
    JointQKVAttentionBridge,
    LinearBridge,
    MLPBridge,
    NormalizationBridge,
    PosEmbedBridge,
    UnembeddingBridge,
)
from transformer_lens.model_bridge.sources import build_bridge_from_module
from transformer_lens.utilities.devices import get_device
from transformers import AutoModelForCausalLM

ARCHITECTURE = "MiniGPTForCausalLM"  # config.json's `architectures`, which TransformerLens selects adapters by


def split_qkv(attention: torch.nn.Module) -> tuple[torch.nn.Linear, torch.nn.Linear, torch.nn.Linear]:
    """MiniGPT's fused projection (an nn.Linear C -> 3C: rows 0..C-1 make q, C..2C-1 k, 2C..3C-1 v) as three
    nn.Linear C -> C, which TransformerLens hooks as q, k and v (its default split expects a transposed Conv1D)."""
    fused = attention.qkv_proj
    width = fused.in_features
    parts = []
    for rows in (slice(0, width), slice(width, 2 * width), slice(2 * width, 3 * width)):
        linear = torch.nn.Linear(width, width, bias=fused.bias is not None)
        linear.weight = torch.nn.Parameter(fused.weight[rows].detach().clone())
        if fused.bias is not None:
            linear.bias = torch.nn.Parameter(fused.bias[rows].detach().clone())
        parts.append(linear)
    return tuple(parts)


class MiniGPTArchitectureAdapter(ArchitectureAdapter):
    """Where each TransformerLens component lives in a MiniGPTForCausalLM."""

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        self.cfg.normalization_type = "LN"  # layer norms with a bias (config.bias), as GPT-2
        self.cfg.positional_embedding_type = "standard"  # learned absolute positions, added to the tokens'
        self.cfg.final_rms = False
        self.cfg.gated_mlp = False  # fc_in, GELU, out_proj
        self.cfg.attn_only = False
        # The per-head layout of the attention weights: TransformerLens's weight processing (enable_compatibility_mode:
        # fold the norms, centre the writing weights, fold the value biases) converts each weight with these before its
        # arithmetic and back after it. Without them it was handed the nn.Linear tensors as they are, (out, in) =
        # (n_heads * d_head, d_model) for q/k/v and (d_model, n_heads * d_head) for o, and as these are square
        # (d_model = n_heads * d_head in every MiniGPT) nothing failed: arithmetic written for [n_heads, d_model,
        # d_head] and [n_heads, d_head, d_model] landed on the other axis. Each norm's gain scaled q/k/v's output rows
        # and its shift was summed over them, the centring averaged over the outputs, the result (broadcast to
        # [1, d_model, d_model]) was flattened back transposed, W_O was centred over its input and b_V folded through
        # its rows: logits off by up to 11 and patterns by up to 0.98 on the specimen, head 1.1's logit attribution
        # -0.21 instead of 2.27, composition scores all near the 1/sqrt(d_model) of unrelated matrices. The raw bridge
        # runs the weights unchanged and never showed it. The MLP, embeddings and unembedding need no entry: the
        # processing reads their layouts from their shapes (checked, also with vocab_size = n_embd).
        heads = dict(n=self.cfg.n_heads)
        self.weight_processing_conversions = {
            **{
                f"blocks.{{i}}.attn.{part}.weight": ParamProcessingConversion(
                    RearrangeTensorConversion("(n h) m -> n m h", **heads)  # nn.Linear (out, in) -> per head (in, out)
                )
                for part in "qkv"
            },
            **{
                f"blocks.{{i}}.attn.{part}.bias": ParamProcessingConversion(
                    RearrangeTensorConversion("(n h) -> n h", **heads)
                )
                for part in "qkv"
            },
            # out_proj: nn.Linear (d_model, n_heads * d_head) -> per head (d_head, d_model)
            "blocks.{i}.attn.o.weight": ParamProcessingConversion(
                RearrangeTensorConversion("m (n h) -> n h m", **heads)
            ),
        }
        self.component_mapping = {
            "embed": EmbeddingBridge(name="model.token_embedding"),
            "pos_embed": PosEmbedBridge(name="model.position_embedding"),
            "blocks": BlockBridge(
                name="model.layers",
                submodules={
                    "ln1": NormalizationBridge(name="attn_norm", config=self.cfg),
                    "ln2": NormalizationBridge(name="mlp_norm", config=self.cfg),
                    "attn": JointQKVAttentionBridge(
                        name="attn",
                        config=self.cfg,
                        split_qkv_matrix=split_qkv,
                        submodules={"qkv": LinearBridge(name="qkv_proj"), "o": LinearBridge(name="out_proj")},
                    ),
                    "mlp": MLPBridge(
                        name="mlp", submodules={"in": LinearBridge(name="fc_in"), "out": LinearBridge(name="out_proj")}
                    ),
                },
            ),
            "ln_final": NormalizationBridge(name="model.final_norm", config=self.cfg),
            "unembed": UnembeddingBridge(name="lm_head"),
        }


def register() -> None:
    """Makes `TransformerBridge.boot_transformers` take MiniGPT folders. TransformerLens 4.3's
    `register_adapter` fills the factory's table, but `boot_transformers` first looks the architecture up in the
    module's SUPPORTED_ARCHITECTURES (and refuses one missing there), so the adapter goes into both.

    An installed copy also declares the adapter as a `transformer_lens.architectures` entry point (pyproject.toml),
    which TransformerLens reads into the same table once, at its first boot, warning of a name already there that the
    entry point "attempted to override a native adapter": with the table filled here first, every boot of an
    installed copy warned so of this very adapter. So the entry points are read first: the installed one fills the
    name quietly, and the line after sets it again, as it does where no entry point names it (a clone)."""
    factory = architecture_adapter_factory.ArchitectureAdapterFactory
    factory.discover_entry_points()  # once per process: a later call returns at once
    factory.register_adapter(ARCHITECTURE, MiniGPTArchitectureAdapter)
    architecture_adapter_factory.SUPPORTED_ARCHITECTURES[ARCHITECTURE] = MiniGPTArchitectureAdapter


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")  # either: the folder has a tokenizer of its own


def boot(folder: str | Path, device: str | None = None, **options) -> TransformerBridge:
    """A bridge of any MiniGPT folder: `TransformerBridge.boot_transformers(folder, trust_remote_code=True, ...)`,
    with the adapter registered. A folder without a tokenizer (a model saved without one) boots too, as a bridge
    without a tokenizer: it takes token ids (`run_with_cache(ids)`, `run_with_hooks`, `generate(ids)`), and its text
    methods say "Cannot use to_tokens without a tokenizer". `boot_transformers` cannot give one: unless passed
    `tokenizer=`, it loads the folder's and fails ("Couldn't instantiate the backend tokenizer"). So such a folder's
    model is loaded as `boot_transformers` loads it (eager attention, float32 unless `dtype=`, on `device`) and
    bridged by TransformerLens's `build_bridge_from_module`, whose tokenizer is optional. `options`: any of
    boot_transformers's (with a tokenizer); `dtype` only (without)."""
    register()
    path = Path(folder)
    own = not path.is_dir() or any((path / name).exists() for name in TOKENIZER_FILES)  # a Hub id: as it is
    if own or options.get("tokenizer") is not None:
        return TransformerBridge.boot_transformers(str(folder), trust_remote_code=True, device=device, **options)
    options.pop("tokenizer", None)
    dtype = options.pop("dtype", torch.float32)
    if options:
        raise TypeError(f"{folder} has no tokenizer: boot takes device and dtype for it, not {sorted(options)}")
    model = AutoModelForCausalLM.from_pretrained(path, trust_remote_code=True, dtype=dtype, attn_implementation="eager")
    model = model.to(device or get_device()).eval()
    return build_bridge_from_module(model, ARCHITECTURE, hf_config=model.config, model_name=str(folder))
