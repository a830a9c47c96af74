#!/usr/bin/env bash
# The main job, end to end on the embedded default corpus (People's Daily, January 1998):
#   install -> fetch corpus -> vocabulary -> train a small biLM (bounded time) -> held-out
#   perplexity next to a Kneser-Ney trigram baseline -> SavedModel export -> use it with
#   TensorFlow alone.
# Usage: bash scripts/main.sh                 (MINUTES=20 of training by default)
#        MINUTES=60 RUN=runs/pd_long bash scripts/main.sh
# Running it again resumes training in RUN for another MINUTES.
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES="${MINUTES:-20}"
DATA="${DATA:-data/people_daily}"
RUN="${RUN:-runs/people_daily_small}"
ELMO=(python -m keras_elmo.cli)   # the same as the installed `keras-elmo` command
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-3}"

step() { printf '\n=== %s\n' "$*"; }

step "install"
python -m pip install --quiet --disable-pip-version-check -e .

step "corpus: People's Daily 1998-01 -> $DATA"
"${ELMO[@]}" data people-daily --out "$DATA"

step "vocabulary (tokens seen >= 3 times)"
"${ELMO[@]}" vocab --train "$DATA/train.txt" --out "$DATA/vocab.txt" --min-count 3

step "train a small biLM for $MINUTES minutes -> $RUN"
start=$(date +%s)
"${ELMO[@]}" train "$RUN" --train "$DATA/train.txt" --vocab "$DATA/vocab.txt" --size small \
    --max-minutes "$MINUTES"
echo "training wall time: $(( $(date +%s) - start )) s"

step "held-out perplexity of the biLM (full softmax)"
"${ELMO[@]}" perplexity "$RUN" --heldout "$DATA/heldout.txt"

step "held-out perplexity of a Kneser-Ney trigram on the same vocabulary, for comparison"
python benchmarks/ngram_baseline.py --train "$DATA/train.txt" --heldout "$DATA/heldout.txt" \
    --vocab "$DATA/vocab.txt"

step "export a SavedModel (version 1) -> $RUN/saved_model/1"
"${ELMO[@]}" export "$RUN" "$RUN/saved_model" --version 1 --overwrite

step "use it with TensorFlow alone"
python examples/use_saved_model.py "$RUN/saved_model/1"
