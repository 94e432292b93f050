"""The outermost layer: the `vimrag` command line (and, later, the Gradio demo). Nothing imports it."""
