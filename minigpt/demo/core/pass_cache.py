"""One recorded forward pass per (model, token ids), shared by every view of the demo: `ForwardPassCache` keeps the
latest passes (minigpt.heads.recorded_pass), bounded in bytes, and computes each one once even when several requests
ask for it at the same moment."""

import threading
import weakref
from collections import OrderedDict

from minigpt.demo.core.cores import CoreShare, pass_work
from minigpt.heads.recorded_pass import ForwardPass, run_forward_pass


class ForwardPassCache:
    """The latest forward passes, keyed by model and token ids, at most `max_bytes` together (least recently used
    goes first; a pass larger than the whole budget is computed and returned, not kept).

    Safe under concurrent requests: a pass being computed is awaited by every other request for it, never computed
    twice. A key holds the model object's identity and a weak reference to it, so a pass is never served for another
    model, even one later loaded at the same address.
    """

    def __init__(self, max_bytes: int = 1 << 30, cores: CoreShare | None = None):
        self.max_bytes = max_bytes
        self.cores = cores or CoreShare(cores=1)  # the server's: a lone heavy pass gets every core
        self._passes: OrderedDict[tuple, tuple[weakref.ref, ForwardPass]] = OrderedDict()
        self._pending: dict[tuple, threading.Event] = {}
        self._lock = threading.Lock()
        self.computed = 0  # passes run so far, for tests and benchmarks

    def get(self, model, input_ids: list[int]) -> ForwardPass:
        key = (id(model), tuple(input_ids))
        while True:
            with self._lock:
                hit = self._passes.get(key)
                if hit is not None and hit[0]() is model:
                    self._passes.move_to_end(key)
                    return hit[1]
                waiting = self._pending.get(key)
                if waiting is None:  # nobody computes it: this request will
                    self._pending[key] = threading.Event()
                    break
            waiting.wait()  # another request computes it; then look again (it may have failed, or been too big to keep)
        try:
            with self.cores.threads_for(pass_work(model.config, len(input_ids))):
                computed = run_forward_pass(model, input_ids)
            with self._lock:
                self.computed += 1
                self._store(key, model, computed)
            return computed
        finally:
            with self._lock:
                self._pending.pop(key).set()

    def cached(self, model, input_ids: list[int]) -> ForwardPass | None:
        """The pass if it is kept, else None (nothing computed)."""
        with self._lock:
            hit = self._passes.get((id(model), tuple(input_ids)))
            return hit[1] if hit is not None and hit[0]() is model else None

    def _store(self, key: tuple, model, computed: ForwardPass) -> None:
        if computed.nbytes > self.max_bytes:
            return
        self._passes[key] = (weakref.ref(model), computed)
        while sum(p.nbytes for _, p in self._passes.values()) > self.max_bytes:
            self._passes.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._passes.clear()
