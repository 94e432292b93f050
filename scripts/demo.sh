#!/usr/bin/env bash
# Set up, index the bundled demo corpus (assets/corpus) and search it with the embedded default models.
# The Gradio web demo replaces this once it lands; for now this shows the retriever end to end.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
idx=${VIMRAG_INDEX:-vimrag-index}
.venv/bin/vimrag index assets/corpus --index "$idx"
for q in "revenue in Europe 2025" "how long does the battery last after the upgrade" "pilot application deadline"; do
  echo; echo "== vimrag search \"$q\""
  .venv/bin/vimrag search "$q" --index "$idx" -k 3
done
