"""The agent loop, its tools, action protocols and policy backends (built in a later issue)."""
