"""The attention maps: every head of the text shown, one head large, the line view, the export, the chosen head over
training."""
