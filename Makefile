# Thin wrappers over scripts/ (which work without make).
.PHONY: setup demo test test-fast lint bench
setup:
	bash scripts/setup.sh test
demo:
	./scripts/demo.sh
test:
	./scripts/test.sh
# the quick loop: lint, then every test not marked slow (no subprocess, browser, conversion or trainer launch)
test-fast:
	VIMRAG_TEST_WORKERS=2 ./scripts/test.sh -m "not slow"
lint:
	.venv/bin/ruff check . && .venv/bin/ruff format --check .
bench:
	.venv/bin/python -m eval.bench_retrieval
