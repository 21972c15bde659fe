"""What the tests and the benchmarks share: tiny models (in memory, and saved as folders the app serves), app.py run as
a server on 127.0.0.1 with the calls a gradio_client user makes, the browser's settings, and the checks more than one
test module makes. No test module imports another: they import from here (pytest puts tests/ on sys.path; a bench
script adds it itself). The fixtures built from these (the shared server, ...) are in conftest.py."""

import asyncio
import contextlib
import functools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parent.parent
LOWERCASE = "abcdefghijklmnopqrstuvwxyz"
PRINTABLE = "".join(chr(c) for c in range(32, 127)) + "\n"


# ---- tiny models in memory ------------------------------------------------------------------------------------------

TINY = dict(vocab_size=50, block_size=96, n_layer=2, n_head=4, n_embd=32)  # tiny_model's default shape
THREE_LAYERS = dict(vocab_size=31, block_size=24, n_layer=3, n_head=2, n_embd=16)  # the views' tests (forward pass...)


def tiny_model(implementation: str = "sdpa", seed: int = 0, *, shape: dict = TINY, **config):
    """A MiniGPTForCausalLM with random weights drawn after torch.manual_seed(seed), in eval mode, its attention set
    to `implementation` (checked). `shape`: the sizes (TINY: 2 layers x 4 heads x 32 wide, 50 tokens, a 96-token
    context); `config`: any MiniGPTConfig field, over the shape."""
    from modeling_minigpt import MiniGPTConfig, MiniGPTForCausalLM

    torch.manual_seed(seed)
    model = MiniGPTForCausalLM(MiniGPTConfig(**{**shape, **config})).eval()
    model.set_attn_implementation(implementation)
    assert model.config._attn_implementation == implementation
    return model


# ---- tiny models saved as folders (what the app serves) -------------------------------------------------------------


def char_tokenizer(characters: str, boundary: str):
    """A character-level PreTrainedTokenizerFast: one token per character, `boundary` (bos = eos) first, a pad last.
    No unknown token, so an unknown character raises, as the shipped tokenizers do."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {boundary: 0, **{c: i + 1 for i, c in enumerate(characters)}, "<pad>": len(characters) + 1}
    backend = Tokenizer(models.WordLevel(vocab))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    backend.decoder = decoders.Fuse()
    backend.add_special_tokens([boundary, "<pad>"])
    return PreTrainedTokenizerFast(tokenizer_object=backend, bos_token=boundary, eos_token=boundary, pad_token="<pad>")


LONG_CONTEXT = 1024  # tokens: the long fixture model's (conftest's long_model)


def printable_tokenizer():
    """The text fixture's tokenizer: printable ASCII and the newline, '<|endoftext|>' as the boundary."""
    return char_tokenizer(PRINTABLE, "<|endoftext|>")


def save_fixture_model(folder: Path, tokenizer, seed: int, **config) -> Path:
    """A MiniGPT with random (seeded) weights and its tokenizer, saved as a model folder."""
    from modeling_minigpt import MiniGPTConfig, MiniGPTForCausalLM

    torch.manual_seed(seed)
    ids = dict(bos_token_id=0, eos_token_id=0, pad_token_id=len(tokenizer) - 1)
    model = MiniGPTForCausalLM(MiniGPTConfig.from_preset(vocab_size=len(tokenizer), **ids, **config))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def build_fixture_models(root: Path) -> tuple[Path, Path]:
    """tiny-names: the `names` preset over a-z with '.' as the boundary; tiny-text: a 2-layer character model over
    printable ASCII with a 32-token context (short, so that generation slides past it)."""
    names = save_fixture_model(root / "tiny-names", char_tokenizer(LOWERCASE, "."), seed=0, name="names")
    text = save_fixture_model(
        root / "tiny-text",
        printable_tokenizer(),
        seed=1,
        name="shakespeare",
        block_size=32,
        n_layer=2,
        n_head=2,
        n_embd=32,
    )
    return names, text


def save_gpt2(folder, tokenizer, seed: int = 0, **shape):
    """A random-weight transformers GPT2LMHeadModel and a tokenizer, saved as a folder: the app converts it with
    MiniGPTForCausalLM.from_gpt2, as it would the real GPT-2 (nothing downloaded)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    ids = dict(bos_token_id=0, eos_token_id=0, pad_token_id=len(tokenizer) - 1)
    config = GPT2Config(**{"vocab_size": len(tokenizer), **shape, **ids})
    GPT2LMHeadModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


# ---- the server ----------------------------------------------------------------------------------------------------

# A deadline that only guards against a hang (a server that never starts, a stream that never answers): far above what
# the slowest machine takes, so that a slow machine is never taken for a hung one (on 2 cores at a load of 35 to 45, a
# server had not finished importing its libraries after 10 minutes). A failure that is not a hang (a server that
# exits, a stream refused) is seen at once, not at the deadline.
HANG_S = 1800.0

# Run before app.py in the server process: any connection to an address other than this machine fails loudly; and on
# SIGUSR1 the server's threads, each with the functions on its stack, are written to the file $TEST_THREADS_REPORT
# (server_threads reads them); on SIGUSR2 what it holds (tests/memory_census.py) to $TEST_MEMORY_REPORT (server_memory).
SERVER_PREAMBLE = textwrap.dedent("""
    import socket, sys
    _connect = socket.socket.connect
    def connect(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and host not in ("127.0.0.1", "::1", "localhost") and not host.startswith("/"):
            print(f"NETWORK CALL to {address}", file=sys.stderr, flush=True)
            raise OSError(f"network call to {address} blocked by the test")
        return _connect(self, address)
    socket.socket.connect = connect

    import json, os, signal, threading
    def report_threads(signum, frame):
        stacks, threads = sys._current_frames(), []
        for thread in threading.enumerate():
            frame, stack = stacks.get(thread.ident), []
            while frame is not None:
                stack.append([frame.f_code.co_filename, frame.f_code.co_qualname])
                frame = frame.f_back
            threads.append({"name": thread.name, "stack": stack})
        report = os.environ["TEST_THREADS_REPORT"]
        with open(report + ".part", "w") as out:
            json.dump(threads, out)
        os.replace(report + ".part", report)  # whole or not at all, for the test that waits for it
    signal.signal(signal.SIGUSR1, report_threads)
    def report_memory(signum, frame):
        sys.path.insert(0, os.environ["TEST_HELPERS_DIR"])
        import memory_census
        report = os.environ["TEST_MEMORY_REPORT"]
        with open(report + ".part", "w") as out:
            json.dump(memory_census.census(), out)
        os.replace(report + ".part", report)
    signal.signal(signal.SIGUSR2, report_memory)

    sys.argv = ["app.py", *sys.argv[1:]]
    import runpy
    runpy.run_path("app.py", run_name="__main__")
""")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_app(*args: str, timeout: float = HANG_S, cwd: Path = REPO):
    """app.py (of `cwd`: another checkout for a benchmark's reference) serving on 127.0.0.1 with `args`; yields
    (url, process); always stopped at the end. `timeout` guards against a server that never starts: one that exits
    fails at once."""
    port = free_port()
    report = Path(tempfile.gettempdir()) / f"minigpt-test-threads-{port}-{os.getpid()}.json"  # server_threads
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("GRADIO_SERVER_NAME", None)
    env["TEST_THREADS_REPORT"] = str(report)
    env["TEST_MEMORY_REPORT"], env["TEST_HELPERS_DIR"] = str(report.with_suffix(".memory.json")), str(REPO / "tests")
    log = tempfile.TemporaryFile("w+")  # the server's output, read back by tests and on failure; gone when closed
    process = subprocess.Popen(
        [sys.executable, "-c", SERVER_PREAMBLE, "--port", str(port), *args],
        cwd=cwd,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/"
    process.log, process.threads_report, process.memory_report = log, report, report.with_suffix(".memory.json")
    try:
        deadline = time.monotonic() + timeout
        # Serving on the port and saying so: tests may run in parallel (pytest-xdist), and a port found free here may
        # be taken by another test's server before this one binds it; this server then exits, and the port answers.
        while not (_serving(port) and f"127.0.0.1:{port}" in server_log(process)):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"app.py did not start (exit code {process.poll()}):\n{server_log(process)[-4000:]}")
            time.sleep(0.2)
        yield url, process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
        report.unlink(missing_ok=True)
        process.memory_report.unlink(missing_ok=True)


def _serving(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def server_log(process) -> str:
    """Everything the server has written so far. A server may serve more than one test (module): a test reads what it
    caused from a mark taken at its start, `server_log(process)[mark:]` with `mark = len(server_log(process))`."""
    process.log.flush()
    process.log.seek(0)
    return process.log.read()


def server_threads(process) -> list[dict]:
    """The server's threads now, asked of it (SIGUSR1: SERVER_PREAMBLE's report): each {"name": its name, "stack":
    [[file, function], ...] from the innermost frame out}. Threads the libraries start in C (torch's) are not there."""
    return asked_report(process, process.threads_report, signal.SIGUSR1)


def server_memory(process) -> dict:
    """What the server holds now, asked of it (SIGUSR2: tests/memory_census.py's census): {"caches": {name: {caches,
    entries, bytes}}, "tensor_bytes", "forward_passes", "threads", "heap": glibc's count, "gradio": sessions and
    events kept}."""
    return asked_report(process, process.memory_report, signal.SIGUSR2)


def asked_report(process, report: Path, signum: int):
    """The JSON the server writes to `report` when sent `signum` (SERVER_PREAMBLE's handlers)."""
    report.unlink(missing_ok=True)
    os.kill(process.pid, signum)
    deadline = time.monotonic() + HANG_S
    while not report.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the server did not write {report.name} (exit code {process.poll()})")
        time.sleep(0.05)
    return json.loads(report.read_text())


@contextlib.contextmanager
def training_app(root: Path):
    """app.py on the fixture models (built in root), its runs in root/runs; yields (url, process, runs folder)."""
    names, text = build_fixture_models(root)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MINIGPT_RUNS_DIR", str(root / "runs"))
        with running_app("--names-model", str(names), "--text-model", str(text)) as (url, process):
            yield url, process, root / "runs"


# ---- calls, as a gradio_client user and as the page make them ------------------------------------------------------


SPECIMEN = REPO / "minigpt" / "models" / "specimen"  # the shipped model whose induction circuit the tests measure


def written_by(model, ids) -> dict:
    """What each sender writes in a plain pass over (N, T) ids, with the tests' own hooks (not the library's): name ->
    (N, T, C) for "embed", each head "L.H" (its slice of out_proj's input through its columns of out_proj) and each
    "mlp L"; and "logits" (N, T, V)."""
    layers, D, found, handles = model.model.layers, model.config.head_dim, {}, []

    def keep(name, from_output=False):
        def hook(module, args, output=None):
            found[name] = (output if from_output else args[0]).detach()

        return hook

    handles.append(layers[0].register_forward_pre_hook(keep("embed")))
    for layer, block in enumerate(layers):
        handles.append(block.attn.out_proj.register_forward_pre_hook(keep(f"merged {layer}")))
        handles.append(block.mlp.register_forward_hook(keep(f"mlp {layer}", True)))
    with torch.no_grad():
        found["logits"] = model(ids, use_cache=False).logits
    for handle in handles:
        handle.remove()
    for layer, block in enumerate(layers):
        merged, weight = found.pop(f"merged {layer}"), block.attn.out_proj.weight
        for head in range(model.config.n_head):
            found[f"{layer}.{head}"] = merged[..., head * D : (head + 1) * D] @ weight[:, head * D : (head + 1) * D].T
    return found


TINY_RUN = dict(data="names", n_layer=1, n_head=2, n_embd=16, seed=3)  # the Train tab's tiniest runs, in tests


def gradio_client(url: str):
    """A gradio_client Client of `url` whose requests wait for the server as long as HANG_S: gradio_client sends a
    call (and reads the page's config when made) with httpx's default timeout of 5 seconds unless told otherwise, and a
    server on a busy machine may take longer to answer."""
    from gradio_client import Client

    return Client(url, verbose=False, httpx_kwargs={"timeout": HANG_S})


def visitor(server):
    """A new gradio_client Client of `server` (url first): its own session, as a second browser would have."""
    return gradio_client(server[0])


def call(client, endpoint: str, **params):
    try:
        return client.predict(**params, api_name=endpoint)
    finally:
        stream_closed(client)


def stream_closed(client, timeout: float = HANG_S) -> None:
    """Waits, after a call's answer, for the server to close the client's event stream (it does once the session has
    no event pending), so that the next call opens a stream of its own. gradio_client (2.7) hands a new call to the
    stream it believes open: when the server's close of that stream is still on its way (a loaded machine), the new
    call's answer goes to no stream and the call ends in CancelledError. A call made beside others (the stream stays
    open for them) does not wait."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with client.pending_lock:
            if not client.stream_open or client.pending_event_ids:
                return
        time.sleep(0.01)


def stream(client, **params) -> list:
    """Every partial output of /text, the last one being the final result."""
    job = client.submit(**params, api_name="/text")
    partials = list(job)
    return partials + [job.result()]


def app_error(client, endpoint: str, **params) -> str:
    """The error message the call gets (it must get one)."""
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError) as error:
        if endpoint == "/text":
            stream(client, **params)
        else:
            call(client, endpoint, **params)
    return str(error.value)


def settled_log(process, quiet: float = 0.25, timeout: float = 10.0) -> str:
    """The server's log once nothing has been added to it for `quiet` seconds (a traceback may still be on its way
    when the client has its answer)."""
    log, deadline = server_log(process), time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(quiet)
        again = server_log(process)
        if again == log:
            break
        log = again
    return log


def case_failures(cases: list[tuple[str, tuple]], check) -> list[str]:
    """check(*arguments) for every case of a table ((its name, its arguments) each); each failure as "name: message".
    A table is one test, and a failing case does not hide the cases after it."""
    found = []
    for name, arguments in cases:
        try:
            check(*arguments)
        except (Exception, pytest.fail.Exception) as failure:  # pytest.raises's "DID NOT RAISE" is no Exception
            found.append(f"{name}: {type(failure).__name__}: {failure}")
    return found


def assert_every_case(cases: list[tuple[str, tuple]], check) -> None:
    """Every case's check passes; the failures reported together, each named by its case (case_failures)."""
    failed = case_failures(cases, check)
    assert not failed, f"{len(failed)} of {len(cases)} cases failed:\n" + "\n".join(failed)


def assert_every_case_leaves_the_log_alone(process, cases: list, check, forbidden=("Traceback", "Error")) -> None:
    """Every case's check passes (the failures reported together, each named by its case), and the server's log holds
    none of `forbidden` after the table: one wait for the log to settle after the last call, instead of one after
    each (0.25 s or more a case). If the log holds one, each case is called again alone, waiting for the log after
    each, to name the cases that write it."""
    before = len(server_log(process))
    found = case_failures(cases, check)
    logged = settled_log(process)[before:]
    if any(word in logged for word in forbidden):
        writers = []
        for name, arguments in cases:
            mark = len(settled_log(process))
            with contextlib.suppress(Exception, pytest.fail.Exception):
                check(*arguments)
            alone = settled_log(process)[mark:]
            if any(word in alone for word in forbidden):
                writers.append(f"{name}: the server logged:\n{alone[-3000:]}")
        found += writers or [f"the table's calls logged (no case alone does):\n{logged[-3000:]}"]
    assert not found, f"{len(found)} of {len(cases)} cases failed:\n" + "\n".join(found)


RAW_DEFAULTS = {
    "/names": ["", 10, 1.0, 0, 1.0, -1, None],
    "/text": ["", 5, 1.0, 0, 1.0, -1, None],
    "/attention": ["emma", None],
    "/logit_attribution": ["emma", None, -1, "", ""],
    "/train": ["names", "", None, *[None] * 7, "", None, None, None],  # the form's fields (RunForm), then owner
    "/cancel": ["", None],  # name, owner
    "/resume": ["", None],
}


def raw_error(url: str, endpoint: str, *data) -> str:
    """The error message of a call made through Gradio's HTTP API with JSON that gradio_client refuses to send (a
    lone surrogate, written as the escape \\ud800; Infinity), as a visitor's own script may send it. `data`: the
    first parameters, the others left at their defaults."""
    import json

    import httpx

    # ensure_ascii (the default): a lone surrogate becomes the escape \ud800, valid JSON
    body = json.dumps({"data": [*data, *RAW_DEFAULTS[endpoint][len(data) :]]})
    posted = httpx.post(
        f"{url}gradio_api/call{endpoint}", content=body, timeout=HANG_S, headers={"Content-Type": "application/json"}
    )
    result = httpx.get(f"{url}gradio_api/call{endpoint}/{posted.json()['event_id']}", timeout=HANG_S).text
    assert "event: error" in result, result
    return result


@functools.cache
def component_id(url: str, elem_id: str) -> int:
    """The id of the component with `elem_id` on the page served at `url` (the page knows it from /config)."""
    import httpx

    config = httpx.get(f"{url}config").json()
    return next(c["id"] for c in config["components"] if c.get("props", {}).get("elem_id") == elem_id)


def page_function(http, url: str, fn_name: str, asked: dict, elem_id: str = "attention-head"):
    """A call of the enlarged maps' server function (`server.attention_row(...)` in HEAD_JS), as the page makes it."""
    body = {"data": asked, "component_id": component_id(url, elem_id), "session_hash": "test", "fn_name": fn_name}
    response = http.post(f"{url}gradio_api/component_server/", json=body)
    response.raise_for_status()
    return response.json()


# ---- the browser ----------------------------------------------------------------------------------------------------

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
needs_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).exists(),
    reason=f"Chromium is not installed at {CHROMIUM}: install it with `apt-get install -y chromium` (Debian/Ubuntu) "
    "to run the browser test (never `playwright install`).",
)


# ---- the step view's numbers against the model's own ---------------------------------------------------------------


def captured(model, ids: list[int], layer: int) -> dict[str, torch.Tensor]:
    """The model's own tensors for one layer, read by hooks on its modules during one plain forward pass with
    `output_attentions=True`: the embedded text (block 0's input), the block's input, attn_norm's output, qkv_proj's
    input and output, out_proj's input, the sublayer's output, mlp_norm's input and output, the MLP's fc_in, GELU and
    output, the block's output, the final norm's output; and the weights and logits the model returns."""
    block, seen = model.model.layers[layer], {}

    def keep(name, from_output, index=0):
        def hook(module, args, output=None):
            value = output if from_output else args
            seen[name] = (value[index] if isinstance(value, tuple) else value)[0].detach()

        return hook

    handles = [
        model.model.layers[0].register_forward_pre_hook(keep("embedded", False)),
        block.register_forward_pre_hook(keep("block_in", False)),
        block.attn_norm.register_forward_hook(keep("attn_norm_out", True)),
        block.mlp_norm.register_forward_pre_hook(keep("mlp_norm_in", False)),
        block.mlp_norm.register_forward_hook(keep("mlp_norm_out", True)),
        block.mlp.fc_in.register_forward_hook(keep("fc_out", True)),
        block.mlp.act.register_forward_hook(keep("act_out", True)),
        block.mlp.register_forward_hook(keep("mlp_out", True)),
        block.register_forward_hook(keep("block_out", True)),
        model.model.final_norm.register_forward_hook(keep("final_out", True)),
        block.attn.qkv_proj.register_forward_pre_hook(keep("qkv_in", False)),
        block.attn.qkv_proj.register_forward_hook(keep("qkv_out", True)),
        block.attn.out_proj.register_forward_pre_hook(keep("heads", False)),
        block.attn.register_forward_hook(keep("sublayer_out", True)),
    ]
    try:
        with torch.no_grad():
            out = model(torch.tensor([ids]), output_attentions=True, use_cache=False)
    finally:
        for handle in handles:
            handle.remove()
    seen["weights"] = out.attentions[layer][0]  # (H, T, T)
    seen["logits"] = out.logits[0]  # (T, V)
    return seen


def close(actual, expected, what: str) -> None:
    if expected is None:  # a model without biases has no layer norm shift: none returned
        assert actual is None, what
        return
    torch.testing.assert_close(torch.tensor(actual), expected.detach().float(), atol=1e-5, rtol=1e-5, msg=what)


def assert_every_number_is_the_models(numbers: dict, model, ids: list[int]) -> None:
    """Each number `steps_json` returned (eval mode) against the hooked tensors, or a formula on them (steps 2 and 4,
    which the model does not compute as such). Fails if a step holds a number this test does not check."""
    from minigpt.demo.lesson.words import NUMBERS
    from minigpt.heads.steps import NEG_INF

    layer, h, i = numbers["layer"], numbers["head"], numbers["query"]
    C, D = model.config.n_embd, model.config.n_embd // model.config.n_head
    t = captured(model, ids, layer)
    x, qkv, s = t["qkv_in"], t["qkv_out"], numbers["steps"]
    q, k, v = (qkv[:, part * C + h * D : part * C + (h + 1) * D] for part in range(3))  # (T, D) each: the head's rows
    scaled = k[: i + 1] @ q[i] / D**0.5
    z = t["heads"][i, h * D : (h + 1) * D]  # the head's output at the query
    embeddings = model.model
    block = model.model.layers[layer]
    normalised = lambda v: torch.nn.functional.layer_norm(v, (C,), eps=block.attn_norm.eps)  # noqa: E731
    probabilities = t["logits"][i].softmax(-1)
    top = probabilities.topk(len(s["probabilities"]["top_probabilities"]))
    expected = {
        "embeddings": {
            "token_i": embeddings.token_embedding.weight[ids[i]],
            "position_i": embeddings.position_embedding.weight[i],
            "sum_i": t["embedded"][i],
        },
        "inputs": {"x_i": x[i], "x_j": x[: i + 1], "residual_i": t["block_in"][i]},
        "no_weights": {
            "scores": x[: i + 1] @ x[i],
            "weights": (x[: i + 1] @ x[i]).softmax(-1),
            "output": (x[: i + 1] @ x[i]).softmax(-1) @ x[: i + 1],
        },
        "qkv": {"q_i": q[i], "k_j": k[: i + 1], "v_j": v[: i + 1]},
        "scores": {"scores": k[: i + 1] @ q[i], "scaled": k[: i + 1] @ q[i] / D**0.5},
        "softmax": {"weights": t["weights"][h, i], "exps": (scaled - scaled.max()).exp()},
        "dropout": {"weights": t["weights"][h, i]},
        "output": {
            "z_i": z,
            # Each key's part of z along z: w_j v_j . z / |z|^2 (they add up to 1: checked below).
            "shares": t["weights"][h, i, : i + 1] * (v[: i + 1] @ z) / (z @ z),
            "heads_z_i": t["heads"][i],
            "out_i": t["sublayer_out"][i],
            "next_i": t["block_in"][i] + t["sublayer_out"][i],
        },
        "multi_head": {"separate_i": t["heads"][i], "fused_i": t["heads"][i]},
        "block": {
            "attn_norm_hat": normalised(t["block_in"][i]),
            "attn_norm_scale": block.attn_norm.weight,
            "attn_norm_shift": block.attn_norm.bias,
            "attn_norm_out": t["attn_norm_out"][i],
            "middle_i": t["mlp_norm_in"][i],
            "mlp_norm_hat": normalised(t["mlp_norm_in"][i]),
            "mlp_norm_scale": block.mlp_norm.weight,
            "mlp_norm_shift": block.mlp_norm.bias,
            "mlp_norm_out": t["mlp_norm_out"][i],
            "pre_activation_i": t["fc_out"][i],
            "activation_i": t["act_out"][i],
            "mlp_out_i": t["mlp_out"][i],
            "after_i": t["block_out"][i],
        },
        "probabilities": {
            "final_i": t["final_out"][i],
            "top_logits": t["logits"][i][top.indices],
            "top_probabilities": top.values,
        },
    }
    for step, values in expected.items():
        for key, tensor in values.items():
            close(s[step][key], tensor, f"{step}.{key}")
    shares = torch.tensor(s["output"]["shares"], dtype=torch.float64)
    # They add up to 1 up to float32 rounding, which grows with the parts' sizes (one far above 1, one far below).
    assert abs(shares.sum() - 1) <= 1e-5 * max(1.0, shares.abs().sum()), "output.shares"
    masked = s["softmax"]["masked"]
    close(masked[: i + 1], expected["scores"]["scaled"], "softmax.masked")
    assert masked[i + 1 :] == [NEG_INF] * (len(ids) - i - 1)
    assert s["dropout"]["keep"] is None and not s["dropout"]["applied"]
    assert {k: tuple(r) for k, r in s["qkv"]["rows"].items()} == {
        name: (part * C + h * D, part * C + (h + 1) * D) for part, name in enumerate("qkv")
    }
    assert s["scores"]["D"] == D and s["scores"]["scale"] == pytest.approx(D**-0.5)
    assert s["multi_head"]["max_abs_difference"] <= 1e-5
    assert s["embeddings"]["token_id"] == ids[i] and s["embeddings"]["ids"] == ids
    close(s["softmax"]["exp_sum"], (scaled - scaled.max()).exp().sum(), "softmax.exp_sum")
    for norm, entering in (("attn_norm", t["block_in"][i]), ("mlp_norm", t["mlp_norm_in"][i])):
        close(s["block"][norm]["mean"], entering.mean(), f"block.{norm}.mean")
        close(s["block"][norm]["variance"], entering.var(unbiased=False), f"block.{norm}.variance")
    close(s["block"]["attention_update"], t["sublayer_out"][i].norm(), "block.attention_update")
    close(s["block"]["mlp_update"], t["mlp_out"][i].norm(), "block.mlp_update")
    neurons = t["act_out"][i].abs().topk(len(s["block"]["top_neurons"])).indices.tolist()
    assert [n for n, _ in s["block"]["top_neurons"]] == neurons
    leaving = s["probabilities"]
    assert leaving["top_ids"] == top.indices.tolist() and leaving["vocabulary"] == t["logits"].shape[-1]
    if i + 1 < len(ids):
        assert leaving["next_id"] == ids[i + 1]
        close(leaving["next_probability"], probabilities[ids[i + 1]], "probabilities.next_probability")
    checked = {(step, key) for step, values in expected.items() for key in values} | {
        ("softmax", "masked"),
        ("dropout", "keep"),
    }
    assert checked == {(step, key) for step, keys in NUMBERS.items() for key in keys}  # nothing returned unchecked


# ---- a saved folder's tokenizer loads without a question ------------------------------------------------------------

LOAD_TOKENIZER = """
import json, sys
from transformers import AutoTokenizer, PreTrainedTokenizerFast
folder, bare = sys.argv[1], sys.argv[2] == "bare"
block_size = json.loads(open(folder + "/config.json").read())["block_size"]
loaded = [AutoTokenizer.from_pretrained(folder)] if bare else [
    AutoTokenizer.from_pretrained(folder, trust_remote_code=True),  # the flag the model needs anyway
    PreTrainedTokenizerFast.from_pretrained(folder),  # no code at all
]
for tokenizer in loaded:
    assert tokenizer.model_max_length == block_size, (tokenizer.model_max_length, block_size)
    assert len(tokenizer("ab" * block_size, truncation=True)["input_ids"]) == block_size
print("OK")
"""


def load_tokenizer_in_a_fresh_process(folder, home, bare=False) -> subprocess.CompletedProcess:
    """Stdin closed (a question would get no answer), outside the repo, offline, a fresh module cache in `home`."""
    return subprocess.run(
        [sys.executable, "-c", LOAD_TOKENIZER, str(folder), "bare" if bare else "flag"],
        cwd=home,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=HANG_S,
        env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "HOME": str(home), "PYTHONPATH": ""},
    )


def assert_tokenizer_loads_silently(folder, home):
    """No prompt on stdout, nothing on stderr (no warning), model_max_length = the model's context."""
    done = load_tokenizer_in_a_fresh_process(folder, home)
    assert (done.returncode, done.stdout, done.stderr) == (0, "OK\n", ""), done.stdout[-2000:] + done.stderr[-2000:]


# ---- the step view's numbers as a page draws them -------------------------------------------------------------------


def flattened(value) -> list[float]:
    """A JSON number, list or list of lists as one list of floats (the string "-inf" included)."""
    return [x for v in value for x in flattened(v)] if isinstance(value, list) else [float(value)]


def numbers_drawn(page) -> dict[str, list[str]]:
    """Every number under a data key in the step view, by key (step.number, or step.part.number): their titles, the
    exact values, in page order."""
    drawn = page.eval_on_selector_all(
        "#step-view [data-key]",
        "els => els.map(e => [e.dataset.key, [...e.querySelectorAll('.n')].map(n => n.title)])",
    )
    on_page: dict[str, list[str]] = {}
    for key, titles in drawn:
        on_page.setdefault(key, []).extend(titles)
    return on_page


def assert_drawn_exactly(drawn: dict[str, list[str]], numbers: dict) -> None:
    """Each number drawn is the endpoint's, exactly (the float JSON holds), in its order."""
    for key, titles in drawn.items():
        value = numbers["steps"]
        for part in key.split("."):
            value = value[part]
        assert [float(t) for t in titles] == flattened(value), key


def open_head_tools(page) -> None:
    """Unfold the page's head tools (folded under the lesson, as a newcomer first meets the page)."""
    page.locator("#head-tools").get_by_text("Head tools").first.click()


_CHROMIUM = {}  # "playwright", "browser", "loop": one Chromium for every browser test of this process


def shared_chromium():
    """The Chromium every browser test of this process (a pytest-xdist worker) shares: launching one costs seconds on
    a busy 2-core machine, and a page in a context of its own is as fresh as a new browser (no cookies, storage or
    cache carried over). Call it with Playwright's loop marked running (`browsers_loop`)."""
    from playwright.sync_api import sync_playwright

    if _CHROMIUM and not _CHROMIUM["browser"].is_connected():  # it crashed: the next page gets a new one
        stop_chromium()
    if not _CHROMIUM:
        playwright = sync_playwright().start()
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        _CHROMIUM.update(playwright=playwright, browser=browser, loop=asyncio._get_running_loop())
    return _CHROMIUM["browser"]


@contextlib.contextmanager
def browsers_loop():
    """Playwright's event loop marked running in this thread for the block, and not outside it. Playwright's sync API
    marks its loop running from its start to its stop (each call resumes the loop in a greenlet of this thread), and
    asyncio.run() refuses to run beside a running loop: with one Chromium for the whole run, a test that calls
    asyncio.run() (test_serving, test_app_train, ...) after a browser test in the same worker would fail. Nothing runs
    on the loop between Playwright's calls, so it is marked running only while a page is open (chromium_page)."""
    before = asyncio._get_running_loop()
    if _CHROMIUM:
        asyncio._set_running_loop(_CHROMIUM["loop"])
    try:
        yield
    finally:
        asyncio._set_running_loop(before)


def stop_chromium() -> None:
    """Closes the shared Chromium, if one was launched (conftest.py: at the end of the run; and on a crash)."""
    if _CHROMIUM:
        chromium = dict(_CHROMIUM)
        _CHROMIUM.clear()
        asyncio._set_running_loop(chromium["loop"])  # its calls run the loop
        try:
            with contextlib.suppress(Exception):  # a crashed browser has nothing left to close
                chromium["browser"].close()
            chromium["playwright"].stop()
        finally:
            asyncio._set_running_loop(None)  # closed now: a new Playwright makes a loop of its own


@contextlib.contextmanager
def chromium_page(width: int = 1280, height: int = 1000, **options):
    """A fresh page of Debian's Chromium driven by Playwright (a browser context of its own in this process's
    Chromium; `options`: new_context's, e.g. is_mobile), with 90 s timeouts for actions and expectations on a busy
    2-core machine (they only matter when something is wrong); closed after."""
    from playwright.sync_api import expect

    expect.set_options(timeout=90_000)
    with browsers_loop():
        context = shared_chromium().new_context(viewport={"width": width, "height": height}, **options)
        try:
            page = context.new_page()
            page.set_default_timeout(90_000)
            yield page
        finally:
            context.close()
