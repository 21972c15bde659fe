"""The demo's engine: what the page computes, draws and serves around the textbook files at the top level."""
