"""Circuits: which parts of a MiniGPT make its prediction, and how its heads compose. This module holds no code of its
own: it keeps `minigpt.heads.circuits` importable with the names it always had (`circuits.patch_path(...)` in a
notebook), each from the module where it lives:

- `attribution`: direct logit attribution (`logit_attribution`, `Attribution`);
- `patching`: activation patching of heads and of the residual stream (`patch_heads`, `patch_residual`, `Patching`)
  and path patching into one head's q, k or v (`patch_path`, `PathPatching`);
- `weights`: each head's weights (`head_weights`), composition scores and their random baseline
  (`composition_scores`, `composition_baseline`), the OV and positional QK circuits (`ov_circuit`,
  `positional_qk_circuit`) and the copying score (`copying_score`);
- `hooks`: the hooks on the calling thread that the first two register (`hooks`).
"""

from minigpt.heads.attribution import Attribution, logit_attribution
from minigpt.heads.hooks import hooks
from minigpt.heads.patching import Patching, PathPatching, patch_heads, patch_path, patch_residual
from minigpt.heads.weights import (
    composition_baseline,
    composition_scores,
    copying_score,
    head_weights,
    ov_circuit,
    positional_qk_circuit,
)

__all__ = [
    "Attribution",
    "Patching",
    "PathPatching",
    "composition_baseline",
    "composition_scores",
    "copying_score",
    "head_weights",
    "hooks",
    "logit_attribution",
    "ov_circuit",
    "patch_heads",
    "patch_path",
    "patch_residual",
    "positional_qk_circuit",
]
