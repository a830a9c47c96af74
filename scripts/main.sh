#!/usr/bin/env bash
# The main job, end to end on the embedded default corpus (People's Daily, January 1998):
#   install -> fetch corpus -> vocabulary -> train a small biLM (bounded time; held-out
#   perplexity every EVAL_EVERY steps) -> held-out perplexity next to a Kneser-Ney trigram
#   baseline -> the curve of both (RUN.main.log, RUN.curve.png) -> SavedModel export -> use
#   it with TensorFlow alone.
# Usage: bash scripts/main.sh                 (MINUTES=20 of training by default)
#        MINUTES=60 RUN=runs/pd_long bash scripts/main.sh
# Running it again resumes training in RUN for another MINUTES.
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES="${MINUTES:-20}"
DATA="${DATA:-data/people_daily}"
RUN="${RUN:-runs/people_daily_small}"
EVAL_EVERY="${EVAL_EVERY:-3000}"   # steps between held-out evaluations (0: none)
LOG="$RUN.main.log"
ELMO=(python -m keras_elmo.cli)   # the same as the installed `keras-elmo` command
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-3}"

step() { printf '\n=== %s\n' "$*"; }

step "install"
python -m pip install --quiet --disable-pip-version-check -e ".[examples]"   # + matplotlib

step "corpus: People's Daily 1998-01 -> $DATA"
"${ELMO[@]}" data people-daily --out "$DATA"

step "vocabulary (tokens seen >= 3 times)"
"${ELMO[@]}" vocab --train "$DATA/train.txt" --out "$DATA/vocab.txt" --min-count 3

mkdir -p "$(dirname "$RUN")"
step "train a small biLM for $MINUTES minutes -> $RUN (log: $LOG)" | tee "$LOG"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$LOG"
start=$(date +%s)
# The held-out evaluations (all sentences, every EVAL_EVERY steps) count in the minutes.
"${ELMO[@]}" train "$RUN" --train "$DATA/train.txt" --vocab "$DATA/vocab.txt" --size small \
    --max-minutes "$MINUTES" --heldout "$DATA/heldout.txt" --eval-every "$EVAL_EVERY" \
    --eval-sentences 0 2>&1 | tee -a "$LOG"
echo "training wall time: $(( $(date +%s) - start )) s; load: $(cut -d' ' -f1-3 /proc/loadavg)" \
    | tee -a "$LOG"

# (train --heldout ends with the held-out perplexity of the final model, full softmax; the
# same as `keras-elmo perplexity "$RUN" --heldout "$DATA/heldout.txt"`)

step "held-out perplexity of a Kneser-Ney trigram on the same vocabulary, for comparison"
python benchmarks/ngram_baseline.py --train "$DATA/train.txt" --heldout "$DATA/heldout.txt" \
    --vocab "$DATA/vocab.txt" 2>&1 | tee -a "$LOG"

step "held-out perplexity against training minutes -> $RUN.curve.png"
python benchmarks/plot_perplexity_curve.py "$LOG" --labels "main job" --out "$RUN.curve.png"

step "export a SavedModel (version 1) -> $RUN/saved_model/1"
"${ELMO[@]}" export "$RUN" "$RUN/saved_model" --version 1 --overwrite

step "use it with TensorFlow alone"
python examples/use_saved_model.py "$RUN/saved_model/1"
