#!/usr/bin/env bash
# `make test`: start a real Neo4j, run lint, types and the whole suite, always stop Neo4j.
# Neo4j tests never skip here: KAG_REQUIRE_NEO4J=1 turns an unreachable server into a failure.
# The documentation is tested by pytest too (tests/docs): every ```python block of README.md and docs/
# runs (those marked neo4j against this server), and the site is built once in strict mode (warnings
# are errors), as `make docs` builds it.
set -euo pipefail
cd "$(dirname "$0")/.."
NEO4J="bash deploy/neo4j/neo4j.sh"

$NEO4J start
trap '$NEO4J stop >/dev/null 2>&1 || true' EXIT
# shellcheck disable=SC1091
source .neo4j/env
export KAG_REQUIRE_NEO4J=1

status=0
.venv/bin/ruff check kag tests benchmarks scripts || status=1
.venv/bin/ruff format --check kag tests benchmarks scripts || status=1
.venv/bin/mypy || status=1
# the slowest tests are named in every run, so a CI that grows slow says where
.venv/bin/pytest -p no:cacheprovider --durations=25 "$@" || status=$?
if [[ $status -ne 0 ]]; then
    echo "make test: FAILED (status $status)" >&2
    $NEO4J status >/dev/null 2>&1 || { echo "--- Neo4j log ---" >&2; $NEO4J log 100 >&2 || true; }
fi
exit $status
