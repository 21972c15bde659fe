"""The Train tab: runs of train.py queued one at a time, each in its own process, their progress, the model as a zip."""
