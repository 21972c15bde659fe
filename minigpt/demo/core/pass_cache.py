"""One recorded forward pass per (model, token ids), shared by every view of the demo: `ForwardPassCache` keeps the
latest passes (minigpt.heads.recorded_pass), bounded in bytes, and computes each one once even when several requests
ask for it at the same moment (kept_answers)."""

import weakref

from minigpt.demo.core.cores import CoreShare, pass_work
from minigpt.demo.core.kept_answers import KeptAnswers
from minigpt.heads.recorded_pass import ForwardPass, run_forward_pass


class ForwardPassCache:
    """The latest forward passes, keyed by model and token ids, at most `max_bytes` together (least recently used
    goes first; a pass larger than the whole budget is computed and returned, not kept).

    Safe under concurrent requests: a pass being computed is awaited by every other request for it, never computed
    twice. A key holds a weak reference to the model: equal to another only while its model lives, so a pass is never
    served for another model, even one later loaded at the same address.
    """

    def __init__(self, max_bytes: int = 1 << 30, cores: CoreShare | None = None):
        self.cores = cores or CoreShare(cores=1)  # the server's: a lone heavy pass gets every core
        self.kept = KeptAnswers(max_bytes, size=lambda recorded: recorded.nbytes)

    @property
    def computed(self) -> int:
        """Passes run so far, for tests and benchmarks."""
        return self.kept.computed

    def get(self, model, input_ids: list[int]) -> ForwardPass:
        def run() -> ForwardPass:
            with self.cores.threads_for(pass_work(model.config, len(input_ids))):
                return run_forward_pass(model, input_ids)

        return self.kept.get((weakref.ref(model), tuple(input_ids)), run)

    def cached(self, model, input_ids: list[int]) -> ForwardPass | None:
        """The pass if it is kept, else None (nothing computed)."""
        return self.kept.cached((weakref.ref(model), tuple(input_ids)))

    def clear(self) -> None:
        self.kept.clear()
