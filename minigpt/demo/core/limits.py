"""The server's default limits, the command line's defaults (minigpt.demo.app reads them before anything heavy is
imported, so that a flag's mistake is answered at once): plain numbers, nothing imported. The state and the batcher
read them too."""

MIN_DECODE_ROWS = 4  # the least floor; raised where this CPU rounds a row differently in bigger batches (serving.py)
# Per model: rows decoding at once (a name is a row), requests waiting, the smallest decoding batch (see serving.py).
BATCHING = dict(max_rows=128, max_waiting=64, min_decode_rows=MIN_DECODE_ROWS)
# A streamed text is updated at most every `every` seconds, and all texts together at most `per_second` times a second
# (the first token and the end go out at once): 25 updates a second read as smooth, and each update costs the server
# more than a decoding step of the shipped model (see serving.ContinuousBatcher.astream).
STREAM = dict(every=0.04, per_second=250.0)
# Gradio keeps each session's copy of the page's configuration (about 0.4 MB of this page's; every API call is a new
# session) until this many newer sessions push it out: 500 bound that memory near 200 MB (Gradio's default: 10,000).
SESSIONS_KEPT = 500
# The Train tab's pasted or uploaded text (an upload's size is read from the disk before its text).
MAX_TEXT_BYTES = 1_000_000
# Gradio's upload route is open to anyone: it refuses bigger files outright. The Train tab's text file is the only
# upload; room above its own limit so that a file a little too big gets the tab's message, which names the limit.
MAX_UPLOAD = 4 * MAX_TEXT_BYTES
