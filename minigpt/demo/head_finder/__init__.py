"""The Head Finder: every head of a model measured over a corpus, and one head's dashboard."""
