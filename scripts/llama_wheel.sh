#!/usr/bin/env bash
# Install llama-cpp-python into a Python environment, building its wheel only once per machine.
#
#   bash scripts/llama_wheel.sh [PYTHON]        (default: .venv/bin/python)
#
# The registry has no prebuilt llama-cpp-python wheel for Linux, so pip compiles llama.cpp from
# source (cmake + a C/C++ compiler; about 5-6 minutes on 2 cores). This script keeps the built
# wheel in $KAG_WHEEL_CACHE (default ~/.cache/kag-wheels), keyed by version, Python tag, CPU
# architecture and build flags, and installs from there on later runs. GGML_NATIVE=OFF keeps the
# wheel portable between machines of the same architecture (no -march=native).
#
# Build tools are installed with apt-get only when missing (cmake itself also comes from the
# registry through the build's own requirements, so a C/C++ compiler is what really matters).
#
# Environment: LLAMA_CPP_VERSION (0.3.36, must match pyproject.toml), KAG_WHEEL_CACHE,
# LLAMA_CMAKE_ARGS (extra CMake flags, part of the cache key).
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${1:-.venv/bin/python}"
VERSION="${LLAMA_CPP_VERSION:-0.3.36}"
CACHE_ROOT="${KAG_WHEEL_CACHE:-${HOME:-/tmp}/.cache/kag-wheels}"
CMAKE_FLAGS="-DGGML_NATIVE=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF ${LLAMA_CMAKE_ARGS:-}"

log() { echo "llama_wheel.sh: $*" >&2; }

[[ -x "$PY" ]] || { log "no Python at $PY (create the venv first: make test does)"; exit 1; }

installed="$("$PY" -c 'import importlib.metadata as m; print(m.version("llama-cpp-python"))' 2>/dev/null || true)"
if [[ "$installed" == "$VERSION" ]] && "$PY" -c 'import llama_cpp' 2>/dev/null; then
    log "llama-cpp-python $VERSION already installed"
    exit 0
fi

pytag="$("$PY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')"
arch="$(uname -m)"
flags_hash="$(printf '%s' "$CMAKE_FLAGS" | sha256sum | cut -c1-10)"
CACHE="$CACHE_ROOT/llama-cpp-python-$VERSION-$pytag-$arch-$flags_hash"

wheel="$(ls "$CACHE"/llama_cpp_python-"$VERSION"-*.whl 2>/dev/null | head -n 1 || true)"
if [[ -z "$wheel" ]]; then
    missing=()
    command -v cmake >/dev/null 2>&1 || missing+=(cmake)
    { command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1; } || missing+=(g++)
    { command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1; } || missing+=(gcc)
    command -v make >/dev/null 2>&1 || command -v ninja >/dev/null 2>&1 || missing+=(make)
    if ((${#missing[@]})); then
        if ! command -v apt-get >/dev/null 2>&1; then
            log "missing build tools (${missing[*]}) and no apt-get: install a C/C++ compiler and cmake"
            exit 1
        fi
        SUDO=""
        [[ "$(id -u)" == "0" ]] || SUDO="sudo"
        log "installing build tools with apt-get: build-essential cmake (missing: ${missing[*]})"
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            build-essential cmake >/dev/null
    fi
    build="$(mktemp -d "${TMPDIR:-/tmp}/kag-llama-build.XXXXXX")"
    trap 'rm -rf "$build"' EXIT
    log "building llama-cpp-python $VERSION from source (about 5-6 min on 2 cores; cached afterwards)"
    started=$SECONDS
    CMAKE_ARGS="$CMAKE_FLAGS" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
        "$PY" -m pip wheel -q --no-deps --no-cache-dir -w "$build" "llama-cpp-python==$VERSION"
    built="$(ls "$build"/llama_cpp_python-"$VERSION"-*.whl | head -n 1)"
    mkdir -p "$CACHE"
    # copy then rename: a run killed halfway leaves no truncated wheel in the cache
    cp "$built" "$CACHE/.partial.whl"
    mv "$CACHE/.partial.whl" "$CACHE/$(basename "$built")"
    wheel="$CACHE/$(basename "$built")"
    log "built $(basename "$wheel") in $((SECONDS - started)) s, cached in $CACHE"
else
    log "reusing cached $wheel"
fi

"$PY" -m pip install -q "$wheel"
"$PY" -c 'import llama_cpp; print("llama_wheel.sh: llama-cpp-python", llama_cpp.__version__, "ready")' >&2
