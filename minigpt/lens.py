"""MiniGPT in TransformerLens 4: an architecture adapter, so that a learner who outgrows the demo carries on with
`run_with_cache`, hook names and head ablations on the same model and the same numbers.

    from minigpt import lens
    from transformer_lens.model_bridge import TransformerBridge

    lens.register()  # or: install this project (pip install -e .), whose entry point registers it
    bridge = TransformerBridge.boot_transformers("minigpt/models/specimen", trust_remote_code=True, device="cpu")
    logits, cache = bridge.run_with_cache(tokens)
    cache["blocks.1.attn.hook_pattern"]  # (batch, heads, query, key): the demo's maps

The adapter maps MiniGPT's modules (modeling_minigpt.py) onto TransformerLens's component names: token and position
embeddings, each block's two layer norms, its attention (one fused q/k/v projection, split here into three) and its
MLP, the final norm and the LM head. TransformerLens and its dependencies are optional (requirements-interp.txt):
nothing else in the project imports this module.
"""

import torch
from transformer_lens.factories import architecture_adapter_factory
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
    module's SUPPORTED_ARCHITECTURES (and refuses one missing there), so the adapter goes into both."""
    architecture_adapter_factory.ArchitectureAdapterFactory.register_adapter(ARCHITECTURE, MiniGPTArchitectureAdapter)
    architecture_adapter_factory.SUPPORTED_ARCHITECTURES[ARCHITECTURE] = MiniGPTArchitectureAdapter
