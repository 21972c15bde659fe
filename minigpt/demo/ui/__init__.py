"""The page: one module per section (its endpoints, layout and events), composed by page.py. The only place besides
app.py that imports gradio."""
