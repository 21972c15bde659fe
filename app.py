"""MiniGPT demo (a Hugging Face Space): generate names or text, and look at every attention head at work.

    python app.py                                   # the shipped models, on http://127.0.0.1:7860
    python app.py --model path/to/folder --model user/minigpt-on-the-hub   # more models in the picker
    python app.py --host 0.0.0.0 --port 7860        # what a Space does (or set GRADIO_SERVER_NAME)

The Space's entry point (its `app_file`). The demo itself is the `minigpt.demo` package (flags -> state -> page ->
launch in minigpt/demo/app.py; the module map: docs/architecture.md); `pip install .` gives the same as the command
`minigpt-demo`.
"""

if __name__ == "__main__":
    # Imported here, not above: each Train-tab run's process runs this file again as "__mp_main__" (multiprocessing
    # prepares a child by running the parent's script; the fork server's preload of "__main__" is dead code before
    # Python 3.13.8, CPython gh-126631), and without the import that costs nothing instead of Gradio's and the
    # demo's seconds of imports.
    from minigpt.demo.app import main

    main()
