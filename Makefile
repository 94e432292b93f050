# Thin wrappers over scripts/ (which work without make).
.PHONY: setup demo test bench
setup:
	bash scripts/setup.sh test
demo:
	./scripts/demo.sh
test:
	./scripts/test.sh
bench:
	.venv/bin/python -m eval.bench_retrieval
