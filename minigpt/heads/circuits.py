"""Circuits: which parts of a MiniGPT make its prediction, and how its heads compose. This module holds no code of its
own: it keeps `minigpt.heads.circuits` importable with the names it always had (`circuits.patch_path(...)` in a
notebook), each from the module where it lives:

- `attribution`: direct logit attribution (`logit_attribution`, `Attribution`);
- `patching`: activation patching of heads and of the residual stream (`patch_heads`, `patch_residual`, `Patching`);
- `paths`: path patching into one head's q, k or v: one sender (`patch_path`, `PathPatching`), every sender at once
  (`patch_paths`, `PathGrid`), a sender through an intermediate (`patch_two_step`);
- `weights`: each head's weights (`head_weights`), composition scores and their random baseline
  (`composition_scores`, `composition_baseline`);
- `token_circuits`: a head's OV and QK circuits over tokens, read through what earlier layers write
  (`effective_embedding`, `ov_circuit`, `qk_circuit`), its positional QK circuit, and the copying scores against
  their random baseline (`copying_score`, `elhage_copying_score`, `copying_baseline`, `diagonal_share`);
- `hooks`: the hooks on the calling thread that the first two register (`hooks`).
"""

from minigpt.heads.attribution import Attribution, logit_attribution
from minigpt.heads.hooks import hooks
from minigpt.heads.patching import Patching, patch_heads, patch_heads_by_position, patch_residual
from minigpt.heads.paths import PathGrid, PathPatching, patch_path, patch_paths, patch_two_step
from minigpt.heads.token_circuits import (
    copying_baseline,
    copying_score,
    diagonal_share,
    effective_embedding,
    elhage_copying_score,
    folded_unembedding,
    ov_circuit,
    positional_qk_circuit,
    qk_circuit,
)
from minigpt.heads.weights import (
    composition_baseline,
    composition_scores,
    head_weights,
)

__all__ = [
    "patch_heads_by_position",
    "qk_circuit",
    "elhage_copying_score",
    "effective_embedding",
    "diagonal_share",
    "copying_baseline",
    "Attribution",
    "Patching",
    "PathGrid",
    "PathPatching",
    "composition_baseline",
    "composition_scores",
    "copying_score",
    "head_weights",
    "hooks",
    "logit_attribution",
    "folded_unembedding",
    "ov_circuit",
    "patch_heads",
    "patch_path",
    "patch_paths",
    "patch_residual",
    "patch_two_step",
    "positional_qk_circuit",
]
