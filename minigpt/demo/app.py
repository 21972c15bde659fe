"""The demo's entry: the command line -> the state -> the page -> launch. `python app.py` (a clone, a Space) and
`minigpt-demo` (installed) both run `main`.

    minigpt-demo                                    # the shipped models, on http://127.0.0.1:7860
    minigpt-demo --model path/to/folder --model user/minigpt-on-the-hub   # more models in the picker
    minigpt-demo --host 0.0.0.0 --port 7860         # what a Space does (or set GRADIO_SERVER_NAME)
    minigpt-demo --device cpu                       # default auto: models and views on cuda, else mps, else cpu

The module map: docs/architecture.md. Named API endpoints (gradio_client): /names, /text (streamed), /attention,
/attention_values (exact weights of one query row or cell), /attention_export (the weights as .safetensors / .npz, the
maps as PNG / SVG) and /step; JSON answers from /next_tokens, /ablate, /importance, /head_roles, /logit_lens and
/compare; the Train tab's /train, /resume (streamed), /cancel and /download. See docs/api.md.
"""

import argparse
import inspect
import os
from pathlib import Path

# Only what the command line needs is imported here: a flag's mistake is answered at once, before the seconds of
# importing torch, transformers and Gradio that serving takes (`serve` imports them).
from minigpt.demo.core.limits import BATCHING, MAX_UPLOAD, MIN_DECODE_ROWS, SESSIONS_KEPT, STREAM


def parse_args(argv=None, prog: str = "app.py") -> argparse.Namespace:
    """The command line; `prog` names the command in its messages (app.py in a clone, minigpt-demo installed)."""
    parser = argparse.ArgumentParser(prog=prog, description="MiniGPT demo: names, text and attention maps.")
    parser.set_defaults(prog=prog)
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="FOLDER_OR_HUB_ID",
        help="another model for the picker (repeatable)",
    )
    parser.add_argument("--names-model", help="the names tab's model (default: minigpt/models/names)")
    parser.add_argument("--text-model", help="the text tab's model (default: minigpt/models/shakespeare)")
    parser.add_argument(
        "--host",
        default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
        help="address to listen on (default 127.0.0.1; a Space sets GRADIO_SERVER_NAME)",
    )
    parser.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", 7860)))
    parser.add_argument(
        "--concurrency", type=int, default=4, help="attention requests served at once (names and text: see --max-batch)"
    )
    parser.add_argument(
        "--max-batch",
        type=int,
        default=BATCHING["max_rows"],
        help="rows decoded as one batch per model: a text is a row, a name too",
    )
    parser.add_argument(
        "--max-waiting",
        type=int,
        default=BATCHING["max_waiting"],
        help="requests waiting for room in a model's batch; beyond, a 'busy' message",
    )
    parser.add_argument(
        "--min-decode-rows",
        type=int,
        choices=[1, MIN_DECODE_ROWS],
        default=BATCHING["min_decode_rows"],
        help="4 (default; raised to what this CPU's matrix kernels need, measured per model at start): "
        "a seed gives the same text, bit for bit, alone or in a crowd; 1: a lone "
        "request decodes at batch 1, faster, and its text may then differ from its text in a "
        "crowd in rare cases (a near tie between two tokens)",
    )
    parser.add_argument(
        "--sessions",
        type=int,
        default=SESSIONS_KEPT,
        help="visitors' sessions whose page state the server keeps (each API call is one; the oldest go first)",
    )
    parser.add_argument(
        "--stream-every",
        type=float,
        default=STREAM["every"],
        metavar="SECONDS",
        help="a streamed text is updated at most this often (0: no limit)",
    )
    parser.add_argument(
        "--stream-rate",
        type=float,
        default=STREAM["per_second"],
        metavar="UPDATES",
        help="streamed texts are updated at most this many times a second in all, shared by those in "
        "flight (0: no limit; with --stream-every 0, every token is sent)",
    )
    parser.add_argument(
        "--device",
        default="auto",
        help="where the models live and every view computes: auto (default: cuda if there is one, else mps, else "
        "cpu), cpu, cuda (cuda:N for the Nth GPU) or mps; training from the Train tab runs where train.py puts it",
    )
    return parser.parse_args(argv)


def resolved_device(name: str, prog: str = "app.py") -> str:
    """--device as torch names it: auto -> cuda if a CUDA GPU is there, else mps if Apple's is, else cpu; a device
    torch does not know, or one this machine does not have, refused in one line."""
    import torch  # the last check: the flags' numbers and folders are answered without it

    name = str(name).strip().lower()
    cuda, mps = torch.cuda.is_available(), torch.backends.mps.is_available()
    if name == "auto":
        return "cuda" if cuda else "mps" if mps else "cpu"
    kind, _, index = name.partition(":")
    if kind not in ("cpu", "cuda", "mps") or (index and (kind != "cuda" or not index.isdigit())):
        raise SystemExit(f"{prog}: error: --device takes auto, cpu, cuda (or cuda:N) or mps, got {name!r}.")
    if kind == "cuda" and not (cuda and int(index or 0) < torch.cuda.device_count()):
        have = f"{torch.cuda.device_count()} CUDA GPU(s)" if cuda else "no CUDA GPU"
        raise SystemExit(f"{prog}: error: --device {name}: this machine has {have}; use --device cpu or auto.")
    if kind == "mps" and not mps:
        raise SystemExit(f"{prog}: error: --device mps: this machine has no Apple GPU; use --device cpu or auto.")
    return name


def not_a_model_source(source: str) -> str | None:
    """What is wrong with a --model (or --names-model, --text-model) that can only be a local path, else None: a path
    that does not exist, or a file (taken for a Hub id, it was offered in the picker under its server path)."""
    from minigpt.tokenization import missing_local_path  # a second of imports: only for a flag that names a model

    if missing_local_path(source):
        return "does not exist"
    path = Path(source).expanduser()
    return "is a file, not a folder" if path.exists() and not path.is_dir() else None


def check_flags(args: argparse.Namespace) -> None:
    """The command line's numbers and folders, each refused in one line when out of range or missing (else the server
    would start and hang, or end in a traceback). Nothing is loaded or started before these checks."""
    bounds = [("--port", args.port, 1, 65535), ("--concurrency", args.concurrency, 1, None)]
    bounds += [("--max-batch", args.max_batch, 1, None), ("--max-waiting", args.max_waiting, 0, None)]
    bounds += [("--sessions", args.sessions, 1, None)]
    for flag, value, low, high in bounds:
        if value < low or (high is not None and value > high):
            allowed = f"{low} to {high}" if high is not None else f"{low} or more"
            raise SystemExit(f"{args.prog}: error: {flag} takes {allowed}, got {value}.")
    if not 0 <= args.stream_every <= 1 or args.stream_rate < 0:
        raise SystemExit(f"{args.prog}: error: --stream-every takes 0 to 1 second, --stream-rate 0 or more updates.")
    given = [("--model", source) for source in args.model]
    given += [("--names-model", args.names_model), ("--text-model", args.text_model)]
    for flag, source in given:
        if source and (wrong := not_a_model_source(source)):
            raise SystemExit(
                f"{args.prog}: error: {flag} {source} {wrong}: give a model's folder (the one that holds its "
                "config.json) or a Hub id (owner/name)."
            )
    args.device = resolved_device(args.device, args.prog)


def without_self_check(launch) -> dict:
    """launch's option that skips Gradio's check that the started server answers on its own address: one HEAD request
    with a 3-second timeout, not retried after a timeout, and the server stops with "When localhost is not accessible,
    a shareable link must be created" when it times out. A busy machine answers later than that: the server stopped
    as it started (on 2 cores at a load of 30). The check is for notebooks and proxies that hide localhost; this server
    binds the address it is told and prints it. (`_frontend`, a private option, gates that check alone in Gradio 6.31;
    a Gradio without it keeps the check.)"""
    return {"_frontend": False} if "_frontend" in inspect.signature(launch).parameters else {}


def main(argv=None, prog: str = "app.py") -> None:
    args = parse_args(argv, prog)
    check_flags(args)
    serve(args)


def serve(args: argparse.Namespace) -> None:
    """The checked command line -> the allocator set -> state -> page -> launch."""
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # before gradio is imported: no network calls at start
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    import torch

    from minigpt.demo.core.allocator import give_freed_memory_back
    from minigpt.demo.core.error_rule import raw_call_middleware, route_errors
    from minigpt.demo.core.gradio_internals import session_events_bounded
    from minigpt.demo.core.models import ModelUnavailable
    from minigpt.demo.core.state import DemoState
    from minigpt.demo.page.ui import CSS, THEME, build_demo

    give_freed_memory_back()
    # One thread per request: the models are small, and a request runs on whichever worker thread the server picks;
    # each such thread would start its own team of intra-op threads, and idle teams spin on the cores (10x slower).
    torch.set_num_threads(1)
    batching = dict(max_rows=args.max_batch, max_waiting=args.max_waiting, min_decode_rows=args.min_decode_rows)
    stream = dict(every=args.stream_every, per_second=args.stream_rate)
    state = DemoState.configure(args.model, args.names_model, args.text_model, batching, stream, device=args.device)
    for default in {state.names_default, state.text_default}:  # loaded before serving: the first request is as fast
        try:
            state.picker.get(default)
        except ModelUnavailable as error:  # a broken default model: one line, not a traceback
            raise SystemExit(f"{args.prog}: error: {error} ({state.picker.sources[default]})") from None
    demo = build_demo(state)
    # api_open=False (as on a Space, where Gradio sets it): a queued function runs through the queue only, within
    # --concurrency; Gradio's /gradio_api/run/NAME ran it at once, beside the queue, for anyone who asked.
    demo.queue(default_concurrency_limit=args.concurrency, api_open=False)
    session_events_bounded(demo)
    try:
        demo.launch(
            **without_self_check(demo.launch),
            server_name=args.host,
            server_port=args.port,
            share=False,
            theme=THEME,
            css=CSS,
            ssr_mode=False,
            show_error=True,  # an unexpected error's message (its traceback goes to the log) reaches the page and API
            max_file_size=MAX_UPLOAD,  # the Train tab's text file, the only upload (core/limits.py)
            state_session_capacity=args.sessions,
            app_kwargs={
                "exception_handlers": route_errors(),  # the unqueued route's errors, by the error rule
                "middleware": raw_call_middleware(demo),  # raw REST calls: a bounded body, the defaults filled
            },
        )
    except OSError as error:  # a port in use, an address this machine does not have
        raise SystemExit(f"{args.prog}: error: cannot listen on {args.host}:{args.port}: {error}") from None


def command() -> None:
    """`minigpt-demo`, the command `pip install` makes: the same flags as `python app.py`."""
    main(prog="minigpt-demo")


if __name__ == "__main__":
    main()
