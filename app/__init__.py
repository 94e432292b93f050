"""The outermost layer: the `vimrag` command line (app/cli.py) and the Gradio web demo (app/web.py), plus the
scripts that drive the demo as users would (demo_questions, load_demo, bench_upload). Nothing imports it."""
