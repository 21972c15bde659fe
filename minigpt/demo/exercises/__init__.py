"""Exercises: questions built from the model's own numbers on a text, answered before their reveal."""
