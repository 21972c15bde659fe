"""The page: the sections composed in the order a visitor meets them, the selection they share, the error rule on every
event and endpoint."""
