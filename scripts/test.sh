#!/usr/bin/env bash
# Installs keras-elmo with its test dependencies (the `test` extra: TensorFlow,
# tensorflow-text, JAX and PyTorch on the CPU, every backend the suite runs; and Apache Beam,
# for `embed --runner`) and runs the whole test suite.
# Usage: bash scripts/test.sh [pytest arguments]     (e.g. -m "not slow" for the quick half)
# The modules run in KERAS_ELMO_TEST_WORKERS processes (2 by default: most tests drive tiny
# models from one Python thread, so a second worker uses the second core); a module stays in
# one worker, which runs its background parts and its fixtures once.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install --quiet --disable-pip-version-check -e ".[test,beam]"
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
# The environment without TensorFlow that tests/test_without_tensorflow.py runs in (keras,
# jax, torch, keras-elmo; built once, reused while pyproject.toml is unchanged).
python tests/test_without_tensorflow.py > /dev/null
exec python -m pytest -q -p no:cacheprovider \
    --numprocesses "${KERAS_ELMO_TEST_WORKERS:-2}" --dist loadfile "$@"
