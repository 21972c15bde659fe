"""The views: the endpoints' JSON (and the maps' images) turned into HTML, with their JavaScript and CSS as real
files. No model and no Gradio here."""
