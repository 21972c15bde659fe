"""The lesson: the block step by step, with the model's real numbers on the text shown."""
