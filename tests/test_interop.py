"""Carrying on in TransformerLens and nnsight (requirements-interp.txt): the MiniGPT adapter's bridge gives the
recorded pass's patterns, residual stream and logits on a shipped model, and the two scripts in docs/ print the
numbers the demo's API gives for the same text."""

import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import torch

from helpers import REPO

pytest.importorskip("transformer_lens")
pytest.importorskip("nnsight")

TEXT = "To be, or not to be, that is the question."


@pytest.fixture(scope="module")
def bridged():
    from transformer_lens.model_bridge import TransformerBridge

    from minigpt import lens
    from minigpt.heads.recorded_pass import run_forward_pass
    from modeling_minigpt import MiniGPTForCausalLM

    folder = REPO / "minigpt" / "models" / "specimen"
    lens.register()
    bridge = TransformerBridge.boot_transformers(str(folder), trust_remote_code=True, device="cpu")
    model = MiniGPTForCausalLM.from_pretrained(folder).eval()
    return bridge, model, run_forward_pass


@pytest.mark.parametrize("ids", [[0, *range(5, 60)], [0, 40, 41, 42, 40, 41, 42, 43]])
def test_the_bridge_gives_the_recorded_pass(bridged, ids):
    bridge, model, run_forward_pass = bridged
    recorded = run_forward_pass(model, ids)
    logits, cache = bridge.run_with_cache(torch.tensor([ids]))
    L = model.config.n_layer
    patterns = torch.stack([cache[f"blocks.{layer}.attn.hook_pattern"][0] for layer in range(L)])
    torch.testing.assert_close(patterns, recorded.attentions, rtol=0, atol=1e-5)
    # The residual stream grows large (|x| ~ 70 in the specimen's last layer): within 1e-5 of its size there
    for layer in range(L):
        torch.testing.assert_close(
            cache[f"blocks.{layer}.hook_resid_pre"][0], recorded.residual[layer], rtol=1e-5, atol=1e-5
        )
    final = cache[f"blocks.{L - 1}.hook_resid_post"][0]
    torch.testing.assert_close(final, recorded.residual[L], rtol=1e-5, atol=1e-5)
    # The logits are the final norm and head on that stream: its relative error of 1e-5 reaches them as 1e-5 of their
    # own scale (float32 sums over C terms, in another order on each side), not as a fixed 1e-5 (1.16e-5 was seen).
    expected = recorded.logits(model)
    scale = expected.abs().max().item()
    torch.testing.assert_close(logits[0], expected, rtol=1e-5, atol=1e-5 * max(scale, 1.0))


def test_the_adapter_is_registered_by_one_call_and_declared_as_an_entry_point():
    from transformer_lens.factories.architecture_adapter_factory import ArchitectureAdapterFactory

    from minigpt import lens

    lens.register()
    assert ArchitectureAdapterFactory._adapters["MiniGPTForCausalLM"] is lens.MiniGPTArchitectureAdapter
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]
    module, name = declared["transformer_lens.architectures"]["MiniGPTForCausalLM"].split(":")
    assert getattr(importlib.import_module(module), name) is lens.MiniGPTArchitectureAdapter


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """This tree as `pip install .` installs it, into a folder of its own (PYTHONPATH), with its dist-info and so the
    `transformer_lens.architectures` entry point. Built from a copy: a build in the clone would leave a
    minigpt.egg-info there, which declares the entry point to every later test run from the clone. (~4 s)"""
    root = tmp_path_factory.mktemp("installed")
    source = root / "source"
    shutil.copytree(REPO / "minigpt", source / "minigpt", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "modeling_minigpt.py", "configuration_minigpt.py"):
        shutil.copy(REPO / name, source / name)
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index", "--target"]
    done = subprocess.run([*pip, str(root / "site"), str(source)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return root / "site"


# The docs/ scripts as the tests run them: {run: (script, its arguments, where it runs: "outside", a working folder
# outside the clone, or "installed", the installed package's parent, where the docstring's relative folder is)}.
SCRIPT_RUNS = {
    "transformer_lens": ("transformer_lens_heads.py", (), "outside"),
    "nnsight": ("nnsight_heads.py", (), "outside"),
    "nnsight by path": ("nnsight_heads.py", ("minigpt/models/names", "emma", "1.2"), "installed"),
    "nnsight by name": ("nnsight_heads.py", ("names", "emma", "1.2"), "outside"),
}

# Runs each script as `python script.py ...` would, in a process of its own: forked from one that has imported the
# libraries the scripts import (torch, transformers, TransformerLens, nnsight; ~10 s an interpreter on 2 cores) and
# nothing else, minigpt not among them: the script's own imports and everything after are its process's alone
# (TransformerLens reads its entry points at a process's first boot, in the script). Prints each run's exit code.
FORKED_RUNS = """
import atexit, json, os, runpy, sys, traceback
import torch, transformers, nnsight, transformer_lens.model_bridge
runs, children = json.loads(sys.argv[1]), {}
for name, run in runs.items():
    sys.stdout.flush(), sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        for fd, output in ((1, run["stdout"]), (2, run["stderr"])):
            os.dup2(os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
        os.chdir(run["where"])
        sys.argv, sys.path[0], code = [run["script"], *run["arguments"]], os.path.dirname(run["script"]), 0
        try:
            runpy.run_path(run["script"], run_name="__main__")
        except SystemExit as stop:
            code = stop.code
        except BaseException:
            traceback.print_exc()
            code = 1
        if code is not None and not isinstance(code, int):  # sys.exit("message"), as python prints it
            print(code, file=sys.stderr)
            code = 1
        atexit._run_exitfuncs()
        sys.stdout.flush(), sys.stderr.flush()
        os._exit(code or 0)
    children[name] = pid
print(json.dumps({name: os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for name, pid in children.items()}))
"""


@pytest.fixture(scope="module")
def printed(installed, tmp_path_factory) -> dict[str, str]:
    """What each run of SCRIPT_RUNS printed: each docs/ script copied into a working folder (a fresh one outside the
    clone, or the installed package's parent) as a learner saves it, run there with the installed copy as its only
    minigpt and every warning shown each time (-W always). Each must end with exit code 0, and no boot of the
    installed copy may say that the adapter "attempted to override a native adapter" (register's note)."""
    runs = {}
    for name, (script, arguments, where) in SCRIPT_RUNS.items():
        folder = tmp_path_factory.mktemp("outside") if where == "outside" else installed
        shutil.copy(REPO / "docs" / script, folder / script)
        logs = tmp_path_factory.mktemp("printed")
        runs[name] = dict(script=str(folder / script), arguments=arguments, where=str(folder))
        runs[name] |= dict(stdout=str(logs / "stdout"), stderr=str(logs / "stderr"))
    env = {**os.environ, "PYTHONPATH": str(installed)}
    command = [sys.executable, "-W", "always", "-c", FORKED_RUNS, json.dumps(runs)]
    done = subprocess.run(command, cwd=tmp_path_factory.mktemp("driver"), env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    codes, outputs = json.loads(done.stdout.splitlines()[-1]), {}
    for name, run in runs.items():
        stderr = Path(run["stderr"]).read_text()
        assert codes[name] == 0, f"{name}: exit code {codes[name]}\n{stderr[-3000:]}"
        assert "override a native adapter" not in stderr, name
        outputs[name] = Path(run["stdout"]).read_text()
    return outputs


@pytest.fixture(scope="module")
def insights():
    from minigpt.demo.core.state import DemoState
    from minigpt.demo.head_tools.endpoints import Insights

    return Insights(DemoState.configure(training=False))


def test_the_transformer_lens_script_prints_the_apis_roles_and_ablation(insights, installed, printed):
    """Run outside the clone with minigpt installed, it finds the installed specimen (it looked for
    minigpt/models/specimen in the working folder: "OSError: Repo id must be in the form ...")."""
    printed = printed["transformer_lens"]
    assert printed.startswith(f"{installed / 'minigpt' / 'models' / 'specimen'}, ")
    roles = insights.head_roles(TEXT, "specimen")
    for layer, head, previous, first, itself in re.findall(
        r"^(\d)\.(\d) +([\d.]+) +([\d.]+) +([\d.]+)$", printed, re.M
    ):
        layer, head = int(layer), int(head)
        assert float(previous) == pytest.approx(roles["previous_token"][layer][head], abs=1e-4)
        assert float(first) == pytest.approx(roles["first_token"][layer][head], abs=1e-4)
        assert float(itself) == pytest.approx(roles["self"][layer][head], abs=1e-4)
    assert len(re.findall(r"^\d\.\d ", printed, re.M)) == 8  # every head of the specimen's 2 x 4
    plain = float(re.search(r"^mean loss: ([\d.]+)$", printed, re.M)[1])
    for heads in ("0.2", "1.1"):
        answer = insights.ablate(TEXT, "specimen", heads, "zero")
        assert plain == pytest.approx(answer["total_before"], abs=1e-4)
        zeroed = float(re.search(rf"^head {heads} zeroed: mean loss ([\d.]+)$", printed, re.M)[1])
        assert zeroed == pytest.approx(answer["total_after"], abs=1e-4)


def check_nnsight_output(printed: str, insights, model: str, text: str, head: str) -> None:
    """The script's weights row (the last query's) and its losses are the API's: printed to 4 decimals, within 1e-4."""
    view = insights.state.text_view(model, text)
    last = len(view.ids) - 1
    weights = [float(w) for w in printed.splitlines()[2].split()]
    layer, index = map(int, head.split("."))
    assert weights == pytest.approx(view.recorded.attentions[layer, index, last].tolist(), abs=1e-4)
    assert len(weights) == len(view.ids)
    answer = insights.ablate(text, model, head, "zero")
    plain, zeroed = map(float, re.search(rf"mean loss ([\d.]+); head {head} zeroed: ([\d.]+)", printed).groups())
    assert (plain, zeroed) == (
        pytest.approx(answer["total_before"], abs=1e-4),
        pytest.approx(answer["total_after"], abs=1e-4),
    )


def test_the_nnsight_script_prints_the_apis_weights_and_ablation(insights, installed, printed):
    printed = printed["nnsight"]
    assert printed.startswith(f"{installed / 'minigpt' / 'models' / 'specimen'}, ")
    check_nnsight_output(printed, insights, "specimen", TEXT, "0.2")


def test_the_scripts_model_is_a_folder_or_a_shipped_models_name(insights, installed, printed):
    """The docstring's relative folder (run where it is relative to: the installed package's parent) and the shipped
    model's name (run anywhere) are the same model."""
    by_path, by_name = printed["nnsight by path"], printed["nnsight by name"]
    assert by_path.startswith("minigpt/models/names, 5 tokens")
    assert by_name.startswith(f"{installed / 'minigpt' / 'models' / 'names'}, 5 tokens")
    assert by_path.splitlines()[1:] == by_name.splitlines()[1:]
    check_nnsight_output(by_name, insights, "names", "emma", "1.2")


def test_after_register_an_installed_copy_boots_without_the_override_warning(installed, monkeypatch):
    """TransformerLens reads the `transformer_lens.architectures` entry points once, at its first boot, and warns of
    one whose name its table already holds: with register() filling the table first, every boot of an installed copy
    warned that MiniGPT's adapter "attempted to override a native adapter". Here the installed copy's dist-info
    declares the entry point to this process, and TransformerLens's table is as a fresh process has it."""
    import warnings
    from importlib.metadata import entry_points

    from transformer_lens.factories import architecture_adapter_factory as tl
    from transformer_lens.model_bridge import TransformerBridge

    from minigpt import lens

    monkeypatch.syspath_prepend(str(installed))
    assert [point.value for point in entry_points(group="transformer_lens.architectures")] == [
        "minigpt.lens:MiniGPTArchitectureAdapter"
    ]
    fresh = {name: adapter for name, adapter in tl.SUPPORTED_ARCHITECTURES.items() if name != lens.ARCHITECTURE}
    monkeypatch.setattr(tl, "SUPPORTED_ARCHITECTURES", fresh)
    monkeypatch.setattr(tl.ArchitectureAdapterFactory, "_adapters", dict(fresh))
    monkeypatch.setattr(tl.ArchitectureAdapterFactory, "_entry_points_discovered", False)

    def override_warnings(action) -> list[str]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            action()
        return [str(warning.message) for warning in caught if "override a native adapter" in str(warning.message)]

    def boot():
        specimen = REPO / "minigpt" / "models" / "specimen"
        TransformerBridge.boot_transformers(str(specimen), trust_remote_code=True, device="cpu")

    assert override_warnings(lambda: (lens.register(), boot())) == []
    assert tl.ArchitectureAdapterFactory._adapters[lens.ARCHITECTURE] is lens.MiniGPTArchitectureAdapter
    # The order before: the name in the table (register's) when TransformerLens reads the entry points warns.
    monkeypatch.setattr(tl.ArchitectureAdapterFactory, "_entry_points_discovered", False)
    assert len(override_warnings(tl.ArchitectureAdapterFactory.discover_entry_points)) == 1


# ---- TransformerLens's weight processing (enable_compatibility_mode) ------------------------------------------------

ROMEO = "Romeo and Juliet, Romeo and Jul"  # head 1.1 (induction) completes "Jul" -> "i" on the specimen


def specimen_ids(text: str) -> list[int]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(REPO / "minigpt" / "models" / "specimen")
    return [tokenizer.bos_token_id, *tokenizer.encode(text, add_special_tokens=False)]


@pytest.fixture(scope="module")
def compatible(bridged):
    """A second bridge of the specimen, processed as HookedTransformer's users get it (layer norms folded, writing
    weights and unembedding centred, value biases folded): processing is one-way, the `bridged` one stays raw."""
    from transformer_lens.model_bridge import TransformerBridge

    _, model, _ = bridged
    bridge = TransformerBridge.boot_transformers(
        str(REPO / "minigpt" / "models" / "specimen"), trust_remote_code=True, device="cpu"
    )
    bridge.enable_compatibility_mode(disable_warnings=True)
    return bridge, model


def log_probability_tolerance(logits: torch.Tensor, C: int) -> float:
    """Folding and centring rewrite every weight in float32 (one rounding each, relative u = 2^-24), and the processed
    forward sums its dot products of C terms in another order than the model's: the two differ by a relative error of
    order C * u (7.6e-6 for C = 128: the 1e-5 the raw bridge's test above allows). The centred unembedding shifts each
    row of logits by a constant (up to 2.1 on the specimen), which log_softmax removes, so log-probabilities are what
    compare. Each is a logit less a logsumexp, both off by C * u of the larger of the logits and the log-probabilities
    (whose own magnitude sets the rounding floor when the logits are small), so twice that bounds their difference."""
    scale = max(logits.abs().max().item(), logits.log_softmax(-1).abs().max().item())
    return 2 * C * torch.finfo(torch.float32).eps / 2 * scale


def test_compatibility_mode_computes_the_models_function(compatible):
    bridge, model = compatible
    ids = specimen_ids(ROMEO)
    with torch.no_grad():
        own = model(torch.tensor([ids]), output_attentions=True, use_cache=False)
    logits, cache = bridge.run_with_cache(torch.tensor([ids]))
    tolerance = log_probability_tolerance(own.logits, model.config.n_embd)  # 5.1e-4 (1.3e-5 seen; 13.6 misprocessed)
    torch.testing.assert_close(logits[0].log_softmax(-1), own.logits[0].log_softmax(-1), rtol=0, atol=tolerance)
    # The weights are probabilities (at most 1): an error of C * u of them is ~1e-5, as for the raw bridge (8.6e-7 seen)
    for layer in range(model.config.n_layer):
        torch.testing.assert_close(
            cache[f"blocks.{layer}.attn.hook_pattern"][0], own.attentions[layer][0], rtol=0, atol=1e-5
        )


def test_head_logit_attribution_under_compatibility_mode(compatible):
    """TransformerLens's direct logit attribution (stack_head_results + logit_attrs) on the processed bridge: the parts
    add up to its logit, head 1.1 contributes the most to the top token, and each head's part is what the model's own
    per-head outputs give under TransformerLens's definitions."""
    from helpers import captured

    bridge, model = compatible
    ids = specimen_ids(ROMEO)
    logits, cache = bridge.run_with_cache(torch.tensor([ids]))
    top = int(logits[0, -1].argmax())
    stack, labels = cache.stack_head_results(layer=-1, incl_remainder=True, pos_slice=-1, return_labels=True)
    attributions = cache.logit_attrs(stack, tokens=top, pos_slice=-1)[:, 0]  # L * H heads, then the remainder
    # The logit as TransformerLens defines it: its unembedding is centred, so the model's logit less its row's mean,
    # and b_U (the final norm's shift, folded in) is outside the stack.
    own = captured(model, ids, model.config.n_layer - 1)
    centred_logit = own["logits"][-1, top] - own["logits"][-1].mean()
    torch.testing.assert_close(logits[0, -1, top], centred_logit, rtol=0, atol=1e-4)
    torch.testing.assert_close(attributions.sum() + bridge.unembed.b_U[top], logits[0, -1, top], rtol=0, atol=1e-4)
    heads = attributions[:-1]
    assert labels[int(heads.argmax())] == "L1H1" and heads.max() > 2  # 2.68; -0.21 with the weights misprocessed

    # Independently, from the model's own tensors. A head's result is its z (out_proj's input, its D columns) through
    # its columns of out_proj, less what every position's value holds whatever the token (b_V and the norm's shift
    # through W_V: fold_value_biases moves it into b_O, the remainder). The final norm is applied as TransformerLens
    # does to a part of the stream: centred, divided by the whole stream's scale; its gain goes into the direction,
    # the unembedding row less the mean row (center_unembed).
    C, H = model.config.n_embd, model.config.n_head
    D = C // H
    final = model.model.final_norm
    stream = own["block_out"][-1]  # what enters the final norm at the last position
    scale = (stream.var(unbiased=False) + final.eps).sqrt()
    W_U = model.lm_head.weight
    direction = final.weight * (W_U[top] - W_U.mean(0))
    expected = []
    for layer in range(model.config.n_layer):
        block = model.model.layers[layer]
        z = captured(model, ids, layer)["heads"][-1]
        qkv, norm = block.attn.qkv_proj, block.attn_norm
        for h in range(H):
            rows = slice(2 * C + h * D, 2 * C + (h + 1) * D)
            constant = qkv.weight[rows] @ norm.bias + qkv.bias[rows]
            result = block.attn.out_proj.weight[:, h * D : (h + 1) * D] @ (z[h * D : (h + 1) * D] - constant)
            expected.append((result - result.mean()) / scale @ direction)
    torch.testing.assert_close(heads, torch.stack(expected).detach(), rtol=0, atol=1e-4)


def composition_formula(model, mode: str, processed: bool) -> torch.Tensor:
    """TransformerLens's composition score (utils.composition_scores) from the model's weights: ||A B||_F / (||A||_F
    ||B||_F), A = W_V W_O of the earlier head (x @ W_V @ W_O is what it writes), B = W_Q W_K^T of the later head for Q,
    its transpose W_K W_Q^T for K, the later head's own W_V W_O for V; shape (layer, head, layer, head) as
    all_composition_scores (zero unless the first layer is the earlier). `processed`: as enable_compatibility_mode
    leaves them: each attn norm's gain folded into W_Q, W_K, W_V (scaling their d_model rows), these centred over
    d_model, W_O centred over d_model."""
    C, H, L = model.config.n_embd, model.config.n_head, model.config.n_layer
    D = C // H
    W = {}
    for layer, block in enumerate(model.model.layers):
        qkv = block.attn.qkv_proj.weight.detach()  # (3C, C): q, k, v rows
        out = block.attn.out_proj.weight.detach()  # (C, C)
        for h in range(H):
            q, k, v = (qkv[part * C + h * D : part * C + (h + 1) * D].T for part in range(3))  # (C, D) each
            o = out[:, h * D : (h + 1) * D].T  # (D, C)
            if processed:
                gain = block.attn_norm.weight.detach()[:, None]
                q, k, v = ((gain * w) - (gain * w).mean(0) for w in (q, k, v))
                o = o - o.mean(-1, keepdim=True)
            W[layer, h] = dict(OV=v @ o, QK=q @ k.T)
    scores = torch.zeros(L, H, L, H)
    for (l1, h1), earlier in W.items():
        for (l2, h2), later in W.items():
            if l1 >= l2:
                continue
            A = earlier["OV"]
            B = {"Q": later["QK"], "K": later["QK"].T, "V": later["OV"]}[mode]
            scores[l1, h1, l2, h2] = (A @ B).norm() / (A.norm() * B.norm())
    return scores


@pytest.mark.parametrize("mode", ["Q", "K", "V"])
def test_composition_scores_are_the_formula_on_the_weights(bridged, compatible, mode):
    """On the raw bridge all_composition_scores uses the model's weights; under compatibility mode the folded and
    centred ones (0.2 -> 1.1 K-composition 0.131 raw, 0.137 processed on the shipped specimen; a flat ~0.085
    everywhere with the weights misprocessed)."""
    raw, model, _ = bridged
    processed, _ = compatible
    for bridge, folded in ((raw, False), (processed, True)):
        scores = bridge.all_composition_scores(mode).scores.detach()
        torch.testing.assert_close(scores, composition_formula(model, mode, folded), rtol=1e-4, atol=1e-6)


def test_compatibility_mode_on_a_bias_free_model(tmp_path):
    """No linear or norm biases (config.bias=False): the processing's optional-bias paths, with norm gains far from 1
    so that folding them matters."""
    from transformer_lens.model_bridge import TransformerBridge

    from helpers import LOWERCASE, char_tokenizer, save_fixture_model
    from modeling_minigpt import MiniGPTForCausalLM

    folder = save_fixture_model(
        tmp_path / "bias-free",
        char_tokenizer(LOWERCASE, "."),
        3,
        name="names",
        bias=False,
        n_layer=2,
        n_embd=16,
        n_head=2,
        block_size=16,
    )
    model = MiniGPTForCausalLM.from_pretrained(folder).eval()
    torch.manual_seed(0)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name:
                parameter.add_(torch.randn_like(parameter))
    model.save_pretrained(folder)
    bridge = TransformerBridge.boot_transformers(str(folder), trust_remote_code=True, device="cpu")
    bridge.enable_compatibility_mode(disable_warnings=True)
    ids = torch.tensor([[0, 3, 4, 5, 3, 4, 5, 9, 3]])
    with torch.no_grad():
        own = model(ids, output_attentions=True, use_cache=False)
    logits, cache = bridge.run_with_cache(ids)
    tolerance = log_probability_tolerance(own.logits, model.config.n_embd)  # 7.1e-6 (5e-7 seen; 0.07 misprocessed)
    torch.testing.assert_close(logits[0].log_softmax(-1), own.logits[0].log_softmax(-1), rtol=0, atol=tolerance)
    for layer in range(model.config.n_layer):
        torch.testing.assert_close(
            cache[f"blocks.{layer}.attn.hook_pattern"][0], own.attentions[layer][0], rtol=0, atol=1e-5
        )


# ---- a folder without a tokenizer ----------------------------------------------------------------------------------


def test_a_folder_without_a_tokenizer_boots_as_a_bridge_on_token_ids(tmp_path):
    """lens.boot takes it (boot_transformers alone fails): a bridge without a tokenizer, whose every hook's value is
    the tokenizer-booted bridge's of the same weights; and with a saved tokenizer passed, one with it."""
    from transformer_lens.model_bridge import TransformerBridge
    from transformers import AutoTokenizer

    from helpers import LOWERCASE, char_tokenizer, save_fixture_model
    from minigpt import lens

    shape = dict(name="names", n_layer=2, n_embd=16, n_head=2, block_size=16)
    folder = save_fixture_model(tmp_path / "with-tokenizer", char_tokenizer(LOWERCASE, "."), 3, **shape)
    bare = shutil.copytree(folder, tmp_path / "bare", ignore=shutil.ignore_patterns("tokenizer*", "special_tokens*"))
    lens.register()
    with pytest.raises(ValueError, match="Couldn't instantiate the backend tokenizer"):
        TransformerBridge.boot_transformers(str(bare), trust_remote_code=True, device="cpu")

    bridge = lens.boot(bare, device="cpu")
    assert bridge.tokenizer is None
    ids = torch.tensor([[0, 3, 4, 5, 3, 4, 5, 9, 3]])
    logits, cache = bridge.run_with_cache(ids)
    reference = TransformerBridge.boot_transformers(str(folder), trust_remote_code=True, device="cpu")
    expected_logits, expected = reference.run_with_cache(ids)
    assert sorted(cache.keys()) == sorted(expected.keys())
    # The same weights through the same bridge code, in one process: bit for bit (0 seen over all 173 hooks).
    for name in expected.keys():
        torch.testing.assert_close(cache[name], expected[name], rtol=0, atol=0, msg=name)
    torch.testing.assert_close(logits, expected_logits, rtol=0, atol=0)
    with pytest.raises(AssertionError, match="without a tokenizer"):
        bridge.to_tokens("emma")
    with pytest.raises(TypeError, match="has no tokenizer"):
        lens.boot(bare, device="cpu", n_ctx=8)

    # TransformerLens 4.3 reloads a passed tokenizer from where it was loaded (name_or_path): a saved one.
    told = lens.boot(bare, device="cpu", tokenizer=AutoTokenizer.from_pretrained(folder))
    assert told.to_str_tokens("emma")[-4:] == list("emma")
    torch.testing.assert_close(told(ids), expected_logits, rtol=0, atol=0)
