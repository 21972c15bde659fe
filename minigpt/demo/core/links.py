"""Links that reopen a view: the page's state (the top tab, model, text, the enlarged head, the lesson's query, step and
depth) as a URL query, `?tab=names&model=names&text=emma&layer=2&head=1&query=3&step=5&depth=plain`, read back when a
page opens; a part of the Circuits section (`part`, PARTS: `?part=find-circuit`); and a set of exercises for a class
(`set`, a built-in set's name; `texts`, one per line; `kinds`; `ids`, question ids). No Gradio here: a dict of the
query's strings in, the choices out, each cut to a length it may have; what does not fit the model is left to the
views' own checks, which say what to change (a model the picker does not offer never reaches its component:
maps/ui.py; the exercises' keys are checked in exercises/ui.py)."""

from minigpt.demo.core.inputs import MAX_TEXT_CHARS

LINK_KEYS = ("tab", "model", "text", "layer", "head", "query", "step", "depth", "set", "texts", "kinds", "ids", "part")
EXERCISE_KEYS = ("set", "texts", "kinds", "ids")  # a link with any of them opens the Exercises section
# A part of the Circuits section a link opens (?part=), the id of the element scrolled to: the circuit question's link
# opens "Find the circuit" (the search, and "Test your own circuit" under it).
PARTS = {"find-circuit": "found-task"}

TABS = ("names", "text", "train")  # the top tabs, by id

MAX_LINK_VALUE_CHARS = 200  # a link's other values: a model's name (a Hub id at most 96), numbers, words
LONGEST = {"text": MAX_TEXT_CHARS, "texts": MAX_TEXT_CHARS, "ids": 2000}  # ids: about a hundred questions


def read_link(params) -> dict:
    """The link's choices from the page's query parameters (a mapping of strings): only the known keys, a text cut to
    the length a text may have, and None for a key left out or empty. An empty dict: no link, the page's defaults."""
    link = {key: str(params.get(key) or "") or None for key in LINK_KEYS}
    for key, value in link.items():  # cut before anything reads them: a link may hold megabytes
        if value is not None:
            link[key] = value[: LONGEST.get(key, MAX_LINK_VALUE_CHARS)]
    return {key: value for key, value in link.items() if value is not None}


def linked_part(params) -> str | None:
    """The part of the Circuits section the link names (a key of PARTS), or None."""
    part = read_link(params).get("part")
    return part if part in PARTS else None
