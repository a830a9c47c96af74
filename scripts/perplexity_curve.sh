#!/usr/bin/env bash
# Held-out perplexity against training minutes: the main job's training cut into SEGMENTS
# resumed runs of STEP_MINUTES each (a resumed run equals an uninterrupted one; see
# tests/test_cli_train.py), with the held-out perplexity (full softmax) after each, and
# the plot next to the Kneser-Ney trigram of the same split and vocabulary.
# Usage (after `bash scripts/main.sh` made the data and vocabulary, or on its own):
#   RUN=runs/pd_curve bash scripts/perplexity_curve.sh        # 4 x 5 minutes
#   SEGMENTS=8 STEP_MINUTES=5 bash scripts/perplexity_curve.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="${DATA:-data/people_daily}"
RUN="${RUN:-runs/pd_curve}"
SEGMENTS="${SEGMENTS:-4}"
STEP_MINUTES="${STEP_MINUTES:-5}"
LOG="${LOG:-$RUN.curve.log}"
ELMO=(python -m keras_elmo.cli)
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-3}"
[ -f "$DATA/vocab.txt" ] || { "${ELMO[@]}" data people-daily --out "$DATA";
  "${ELMO[@]}" vocab --train "$DATA/train.txt" --out "$DATA/vocab.txt" --min-count 3; }
mkdir -p "$(dirname "$LOG")"
for segment in $(seq "$SEGMENTS"); do
  echo "=== segment $segment: load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$LOG"
  "${ELMO[@]}" train "$RUN" --train "$DATA/train.txt" --vocab "$DATA/vocab.txt" --size small \
      --max-minutes "$STEP_MINUTES" --heldout "$DATA/heldout.txt" 2>&1 | tee -a "$LOG"
done
python benchmarks/ngram_baseline.py --train "$DATA/train.txt" --heldout "$DATA/heldout.txt" \
    --vocab "$DATA/vocab.txt" 2>&1 | tee -a "$LOG"
python benchmarks/plot_perplexity_curve.py "$LOG" --out "${PLOT:-docs/perplexity_curve.png}"
