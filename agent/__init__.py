"""The agent: the loop (loop.py) that turns a question into typed events (events.py), the protocols that
build each turn's context and run its tool call (protocols/), parsing and checking the model's calls
(actions.py, validate.py, rejections.py), the tools and media rules (toolbox.py, tools.py, media.py), and the
policy backends that write the calls (backends/)."""
