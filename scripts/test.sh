#!/usr/bin/env bash
# Set up (scripts/setup.sh test,train,milvus), lint with ruff, and run the test suite on CPU, offline. Extra arguments
# go to pytest: `scripts/test.sh -m "not slow"` is `make test-fast`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test,train,milvus
# Debian packages the tests use: chromium for the real-browser UI test (playwright drives it; it cannot
# download its own browser here), tesseract-ocr for the optional OCR engine (RapidOCR is the fallback).
want_apt=()
command -v chromium >/dev/null 2>&1 || want_apt+=(chromium)
command -v tesseract >/dev/null 2>&1 || want_apt+=(tesseract-ocr)
if [ ${#want_apt[@]} -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "test: installing ${want_apt[*]} from Debian"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${want_apt[@]}" >/dev/null) \
    || echo "test: could not install ${want_apt[*]}; the tests that need them will be skipped"
fi
# Where chromium is installed, the browser test must run, not skip.
command -v chromium >/dev/null 2>&1 && export VIMRAG_REQUIRE_BROWSER=${VIMRAG_REQUIRE_BROWSER:-1}
# Lint first: ruff's findings (pyproject.toml [tool.ruff]) fail the run, after both checks have printed theirs.
lint=0
.venv/bin/ruff check . || lint=1
.venv/bin/ruff format --check . || lint=1
[ $lint -eq 0 ] || { echo "test: ruff found problems (.venv/bin/ruff check --fix . && .venv/bin/ruff format .)"; exit 1; }
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 GRADIO_ANALYTICS_ENABLED=False TOKENIZERS_PARALLELISM=false
set +e
# VIMRAG_TEST_WORKERS=N runs N pytest-xdist workers, a file's tests on one worker so its module fixtures (a demo
# app, a search server, a converted model) are built once; 0 runs one process. Two by default: on the 2-core box a
# clean clone's full suite took 523 s on two workers against 607 s in one process, back to back (2026-11-28; an
# earlier pair, with a one-thread fixture since removed, gave 843 s against 860 s).
.venv/bin/python -m pytest -n "${VIMRAG_TEST_WORKERS:-2}" --dist loadfile "$@"
rc=$?
set -e
# pytest exits 5 when it collected no test: that is a failure of the suite, not a pass.
[ $rc -eq 5 ] && echo "test: no tests were collected" && exit 1
exit $rc
