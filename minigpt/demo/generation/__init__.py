"""The Names and Text tabs: generation through the models' continuous batches."""
