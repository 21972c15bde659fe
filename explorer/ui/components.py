"""Small pieces every section uses."""

import gradio as gr


def unchecked(component):
    """`component`'s value reaches the handler as sent: an API client may send any value, and the handler checks it
    with a message naming the parameter (Gradio's own range and choice checks would not name it, and would print a
    traceback in the server log). Set on the instance: a subclass would make Gradio write a .pyi file beside
    its module."""
    component.preprocess = lambda payload: payload
    return component


def notes_markdown(notes: list[str]) -> str:
    return "\n".join(f"- {note}" for note in notes)


def session(request: gr.Request | None) -> str | None:
    return request.session_hash if request else None
