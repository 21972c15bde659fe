"""The views: the endpoints' JSON (and the maps' images) turned into HTML and image files, with their JavaScript and
CSS as real files. No model and no Gradio here."""
