"""One rule for errors, for the page and the API alike.

A `VisitorError` is the visitor's mistake (a bad value, a text the model cannot read, a name that is taken) or an
answer they act on (the server is busy): its message is shown to them and nothing reaches the server's log. Every
other exception (a bug, a host's broken model folder) is the host's: its message is shown too, and its traceback
goes to the log. Nothing here knows Gradio: the UI turns a VisitorError into a message without a traceback. The
library's `InstrumentError` (a layer, head, position or token an instrument cannot take) counts as one: the demo hands
the instruments what the visitor sent.
"""

from minigpt.heads.errors import InstrumentError, shortened  # noqa: F401 (the demo's, too)


class VisitorError(ValueError):
    """The visitor's mistake: the message says what to change. (A ValueError, so that code which catches bad values
    keeps doing so.)"""


VISITORS_MISTAKES = (VisitorError, InstrumentError)  # what the error rule shows without a traceback
