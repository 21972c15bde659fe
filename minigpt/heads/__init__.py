"""The instruments: how a MiniGPT's attention heads compute what they compute, as numbers from the model's own
modules and weights (hooks on the real modules, `output_attentions`), never from a second implementation. Torch and
transformers only: no Gradio, nothing of the demo (which is built on this, as train.py's role log is).

    from minigpt import heads
    recorded = heads.run_forward_pass(model, ids)       # one eager pass: weights, residual stream, each sublayer
    recorded.attentions[layer, head]                    # (T, T) softmax weights, as the model computed them
    heads.attention_steps(model, recorded, layer, head, query)   # one head at work, step by step, its numbers
    heads.measured_roles(model, recorded, bos_id, special, vocab_size)   # previous token, first token, self, induction
    with heads.heads_ablated(model, heads.head_mask([(1, 2)], L, H)): ...   # zero (or mean-) ablate heads
    heads.logit_lens(model, recorded, position)         # what each layer's residual stream would predict
    heads.measure(model, windows)                       # every head's metrics over a corpus (the Head Finder)
    heads.logit_attribution(model, ids)                 # each head's, MLP's, embedding's direct share of the logit
    heads.patch_heads(model, clean_ids, corrupted_ids)  # activation patching; patch_residual too
    heads.patch_paths(model, clean_ids, corrupted_ids, (1, 1))  # every sender into 1.1's q, k, v; patch_two_step
    heads.composition_scores(model, "k")                # (L, H, L, H) Q/K/V composition between heads
    heads.find_circuit(model)                           # the edges that keep induction, found by EAP-IG and checked
    heads.measure_circuit(model, "0.2 -> 1.1 k, 1.1 -> logits")  # a circuit a person states, measured as found ones
    heads.circuit_to_eap_json(found, model)             # that circuit in EAP-IG's graph JSON layout; and back
    heads.attribution_patching(model, clean_ids, corrupted_ids)  # (L, H, T) estimated, the top 3 cells exact
    heads.qk_attribution(model, ids, 1, 1, query=-1, key=9)  # why 1.1 attends there: its score as query x key parts

Modules: `recorded_pass` (the pass), `hooks` (hooks on the model's modules for the calling thread alone), `predictions`
(next-token probabilities, the sampler's, the logit lens), `ablation` (the ablation switch, what it puts in, head
importance), `role_scores` (head roles, the one definition of induction, the induction probe), `comparison` (two texts'
maps), `attribution` (direct logit attribution),
`patching` (activation and path patching), `qk_attribution` (one attention score split into query part x key part),
`weights` (per-head weights, composition, QK and OV circuits; `circuits` names these three modules' instruments in one
place, as it always did), `graph`, `circuit_tasks`, `edge_attribution`, `exact_runs` and `discovery` (the circuit
found: the graph of senders and receivers, prompt sets and their metrics, EAP and EAP-IG scores, exact runs, the
search, held-out checks and the minimal circuit; `eap_json`, a found circuit in EAP-IG's graph JSON layout and back;
`stated_circuit`, a circuit a person writes, measured as a found one), `steps` and `block_steps` (the block step by
step), `shapes` (the shape trace), `metrics` (head metrics over a corpus), `role_log` (roles at each evaluation and
weight snapshots, for training runs).
"""

from minigpt.heads.ablation import ablated_pass, ablation_values, head_importance, head_mask, heads_ablated
from minigpt.heads.attribution import Attribution, logit_attribution
from minigpt.heads.comparison import compare_attention
from minigpt.heads.discovery import Edge, FoundCircuit, circuit_faithfulness, faithfulness_curve, find_circuit
from minigpt.heads.eap_json import circuit_from_eap_json, circuit_to_eap_json
from minigpt.heads.edge_attribution import EstimatedPatching, attribution_patching, estimated_patching
from minigpt.heads.metrics import METRICS, ROLES, measure
from minigpt.heads.patching import Patching, patch_heads, patch_heads_by_position, patch_residual, patch_units
from minigpt.heads.paths import PathGrid, PathPatching, patch_path, patch_paths, patch_two_step
from minigpt.heads.predictions import logit_lens, next_token_probabilities
from minigpt.heads.prompts import OverPrompts, over_prompts, repeated_tokens, variants
from minigpt.heads.qk_attribution import QKAttribution, qk_attribution
from minigpt.heads.recorded_pass import ForwardPass, run_forward_pass, unembed
from minigpt.heads.role_log import load_snapshot, log_roles, read_roles, snapshots_of
from minigpt.heads.role_scores import (
    head_roles,
    induction_pattern,
    induction_probe,
    induction_scores,
    measured_roles,
    offset_scores,
    probed_induction,
    role_score,
    top_heads,
)
from minigpt.heads.shapes import TraceStep, trace_steps
from minigpt.heads.stated_circuit import MeasuredCircuit, PartAdds, measure_circuit
from minigpt.heads.steps import attention_steps
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
from minigpt.heads.weights import composition_baseline, composition_scores

# The public names, by what they are for
__all__ = [
    # The recorded pass
    "ForwardPass",
    "run_forward_pass",
    "unembed",
    # What the model predicts
    "logit_lens",
    "next_token_probabilities",
    # Heads switched off, and how much the model needs each
    "ablated_pass",
    "ablation_values",
    "head_importance",
    "head_mask",
    "heads_ablated",
    # Head roles: previous token, k tokens back, first token, self, same token, induction
    "head_roles",
    "induction_pattern",
    "induction_probe",
    "induction_scores",
    "measured_roles",
    "offset_scores",
    "probed_induction",
    "role_score",
    "top_heads",
    # Two texts' maps compared
    "compare_attention",
    # Every head's metrics over a corpus (the Head Finder)
    "METRICS",
    "ROLES",
    "measure",
    # Direct logit attribution
    "Attribution",
    "logit_attribution",
    # Why a head attends where it does: a score split into query part x key part
    "QKAttribution",
    "qk_attribution",
    # Activation patching
    "Patching",
    "patch_heads",
    "patch_heads_by_position",
    "patch_residual",
    "patch_units",
    # Path patching
    "PathGrid",
    "PathPatching",
    "patch_path",
    "patch_paths",
    "patch_two_step",
    # Attribution patching: patching estimated from gradients
    "EstimatedPatching",
    "attribution_patching",
    "estimated_patching",
    # The circuit found, and any circuit's faithfulness
    "Edge",
    "FoundCircuit",
    "circuit_faithfulness",
    "faithfulness_curve",
    "find_circuit",
    # The circuit found, in EAP-IG's graph JSON layout and back
    "circuit_from_eap_json",
    "circuit_to_eap_json",
    # A circuit a person states, measured as a found one
    "MeasuredCircuit",
    "PartAdds",
    "measure_circuit",
    # Circuits from the weights: composition between heads
    "composition_baseline",
    "composition_scores",
    # A head's circuits over tokens
    "copying_baseline",
    "copying_score",
    "diagonal_share",
    "effective_embedding",
    "elhage_copying_score",
    "folded_unembedding",
    "ov_circuit",
    "positional_qk_circuit",
    "qk_circuit",
    # Prompt sets, and a measurement over them
    "OverPrompts",
    "over_prompts",
    "repeated_tokens",
    "variants",
    # One head at work, step by step, and the shapes on the way
    "attention_steps",
    "TraceStep",
    "trace_steps",
    # Roles over training: the roles log and weight snapshots
    "load_snapshot",
    "log_roles",
    "read_roles",
    "snapshots_of",
]
