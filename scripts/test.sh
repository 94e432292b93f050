#!/usr/bin/env bash
# Set up (scripts/setup.sh test) and run the test suite on CPU, offline. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
# Tesseract is optional (OCR falls back to RapidOCR); install it when we can, so its path is tested too.
if ! command -v tesseract >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tesseract-ocr >/dev/null) \
    || echo "test: could not install tesseract-ocr; its tests will be skipped"
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 GRADIO_ANALYTICS_ENABLED=False TOKENIZERS_PARALLELISM=false
set +e
.venv/bin/python -m pytest "$@"
rc=$?
set -e
# pytest exits 5 when it collected no test: that is a failure of the suite, not a pass.
[ $rc -eq 5 ] && echo "test: no tests were collected" && exit 1
exit $rc
