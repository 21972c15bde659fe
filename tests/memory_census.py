"""What a running server holds, counted from inside it (SERVER_PREAMBLE's SIGUSR2 report, read by
helpers.server_memory and bench/bench_server_memory.py): each of the demo's caches with its entries and the bytes its
entries reach, Gradio's per-session and per-event records, and glibc's own count of its heaps (mallinfo2: what it has
handed out, what it holds free, its arenas). The caches are found once among the garbage collector's objects, so the
demo needs no hook of its own; later reports walk only their entries (a report allocates little, and frees it)."""

import ctypes
import functools
import gc
import os
import sys
import tempfile
import types

import torch

# The demo's caches: class name -> the attribute holding its entries.
CACHES = {
    "ForwardPassCache": "_passes",
    "Kept": "found",
    "FoundCache": "found",
    "PerModel": "found",
    "CompositionCache": "found",
    "MetricsStore": "corpora",
    "ModelPicker": "loaded",
}
OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType, torch.nn.Module)
found: list = []  # (name, object) of each cache and of Gradio's Blocks, once found


def reached_bytes(root) -> int:
    """Bytes `root` reaches: each tensor's storage once, every other object's own size; not through classes,
    modules, functions or models (a cache's key names a model, it does not own it)."""
    seen, storages, total, stack = set(), set(), 0, [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, OPAQUE):
            continue
        seen.add(id(obj))
        if isinstance(obj, torch.Tensor):
            storage = obj.untyped_storage()
            if storage.data_ptr() not in storages:
                storages.add(storage.data_ptr())
                total += storage.nbytes()
            continue
        total += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    return total


def holders() -> list:
    """(name, object): the demo's caches (module.Class, or module.function for a functools cache) and Gradio's page."""
    import gradio

    if not found:
        for obj in gc.get_objects():
            kind = type(obj)
            if kind.__name__ in CACHES and kind.__module__.startswith("minigpt."):
                found.append((f"{kind.__module__.rpartition('.')[2]}.{kind.__name__}", obj))
            elif isinstance(obj, functools._lru_cache_wrapper) and obj.__module__.startswith("minigpt."):
                found.append((f"{obj.__module__.rpartition('.')[2]}.{obj.__qualname__}", obj))
            elif kind is gradio.Blocks:
                found.append(("gradio", obj))
    return found


def caches() -> dict:
    """name -> {"caches": instances, "entries", "bytes" (None for a functools cache, whose entries it hides)}."""
    held = {}
    for name, obj in holders():
        if name == "gradio":
            continue
        entry = held.setdefault(name, {"caches": 0, "entries": 0, "bytes": 0})
        entry["caches"] += 1
        if isinstance(obj, functools._lru_cache_wrapper):
            entry["entries"] += obj.cache_info().currsize
            entry["bytes"] = None
            continue
        entries = getattr(obj, CACHES[type(obj).__name__])
        entry["entries"] += len(entries)
        entry["bytes"] += 0 if type(obj).__name__ == "ModelPicker" else reached_bytes(dict(entries))
    return held


def gradio_records() -> dict:
    """Sessions kept (the page's state per session), and the queue's per-session and per-event records."""
    blocks = next((obj for name, obj in holders() if name == "gradio"), None)
    if blocks is None:
        return {}
    queue = blocks._queue
    records = {
        "sessions": blocks.state_holder.session_data,
        "event_sessions": queue.pending_event_ids_session,
        "message_sessions": queue.pending_messages_per_session,
        "analytics": queue.event_analytics,
    }
    return {name: {"entries": len(held), "bytes": reached_bytes(dict(held))} for name, held in records.items()}


class Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks")
    ] + [("keepcost", ctypes.c_size_t)]


def heap() -> dict:
    """glibc's count: bytes `used` (handed out, in its heaps and mapped alone), bytes `free` in its heaps (kept for
    reuse), its `arenas`; {} where the C library is not glibc."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = Mallinfo2
        info = libc.mallinfo2()
    except (OSError, AttributeError):
        return {}
    return {"used": info.uordblks + info.hblkhd, "free": info.fordblks, "arenas": arenas(libc)}


def arenas(libc) -> int:
    """glibc's arenas: the main one and one per thread that found the others busy (up to 8 per core)."""
    libc.fdopen.restype, libc.fdopen.argtypes = ctypes.c_void_p, [ctypes.c_int, ctypes.c_char_p]
    libc.malloc_info.argtypes, libc.fclose.argtypes = [ctypes.c_int, ctypes.c_void_p], [ctypes.c_void_p]
    with tempfile.TemporaryFile("w+b") as out:
        stream = libc.fdopen(os.dup(out.fileno()), b"w")
        libc.malloc_info(0, stream)
        libc.fclose(stream)
        out.seek(0)
        return out.read().count(b"<heap nr=")


def census() -> dict:
    return {"caches": caches(), "gradio": gradio_records(), "heap": heap()}
