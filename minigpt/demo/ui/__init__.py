"""The page: one module per section that lays it out and wires its events to the section's endpoints (computing
modules, minigpt/demo/<section>.py) and views (minigpt/demo/views/), composed by page.py. The only place that imports
gradio; its internals in gradio_internals.py alone."""
