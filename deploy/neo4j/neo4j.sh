#!/usr/bin/env bash
# Neo4j 5.26 Community without Docker: jars from Maven Central, run with plain `java`.
#
#   deploy/neo4j/neo4j.sh install   # copy jars to .neo4j/lib (cached), write conf, set initial password
#   deploy/neo4j/neo4j.sh start     # start in the background, wait until Bolt answers RETURN 1
#                                   # (past KAG_NEO4J_START_TIMEOUT while a recovery makes progress)
#   deploy/neo4j/neo4j.sh stop      # TERM (up to 30 s), then KILL
#   deploy/neo4j/neo4j.sh status    # exit 0 running+answering, 1 running but not answering, 3 stopped
#   deploy/neo4j/neo4j.sh log [N]   # last N (200) lines of console.log and debug.log
#   deploy/neo4j/neo4j.sh env       # print export NEO4J_URI=... lines (also written to .neo4j/env)
#   deploy/neo4j/neo4j.sh reset     # stop and delete the database files (next start re-initialises)
#
# Environment: KAG_NEO4J_BOLT_PORT (the port this instance last used, else 7687), KAG_NEO4J_PASSWORD
# (kag-test-password), KAG_NEO4J_START_TIMEOUT (120: how long a start may go without progress),
# KAG_NEO4J_RECOVERY_TIMEOUT (1800: the longest start, while the server keeps logging or writing
# its files, e.g. recovering after a crash), KAG_NEO4J_STOP_TIMEOUT (30), KAG_NEO4J_HEAP (512m),
# KAG_NEO4J_PAGECACHE (256m), KAG_NEO4J_JAVA_OPTS (extra JVM flags), JAVA_HOME, MVN (mvn),
# KAG_NEO4J_APOC (0; 1 copies APOC core KAG_NEO4J_APOC_VERSION (5.26.19, same 5.26 line) from Maven
# into the plugins directory on install/start: benchmarks against peers that need APOC; kag does not).
# Everything at runtime lives under <repo>/.neo4j/ (gitignored).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
POM="$SCRIPT_DIR/pom.xml"
BASE="${KAG_NEO4J_DIR:-$ROOT/.neo4j}"   # a second instance: KAG_NEO4J_DIR=... KAG_NEO4J_BOLT_PORT=...
LIB="$BASE/lib"
STAMP="$LIB/.kag-complete"
NHOME="$BASE/home"
CONF_DIR="$NHOME/conf"
DATA_DIR="$NHOME/data"
LOGS_DIR="$NHOME/logs"
RUN_DIR="$NHOME/run"
PID_FILE="$RUN_DIR/neo4j.pid"
PORT_FILE="$RUN_DIR/neo4j.port"     # Bolt port of the running server
CONSOLE_LOG="$LOGS_DIR/console.log"
DEBUG_LOG="$LOGS_DIR/debug.log"
PW_RECORD="$BASE/initial-password"   # password the system database was initialised with
ENV_FILE="$BASE/env"
LAST_PORT_FILE="$BASE/bolt.port"    # the port of the last start: a restart after a crash reuses it

LAST_PORT=""
[[ -f "$LAST_PORT_FILE" ]] && LAST_PORT="$(tr -dc '0-9' <"$LAST_PORT_FILE")"
PORT="${KAG_NEO4J_BOLT_PORT:-${LAST_PORT:-7687}}"
HEAP="${KAG_NEO4J_HEAP:-512m}"
PAGECACHE="${KAG_NEO4J_PAGECACHE:-256m}"
START_TIMEOUT="${KAG_NEO4J_START_TIMEOUT:-120}"
RECOVERY_TIMEOUT="${KAG_NEO4J_RECOVERY_TIMEOUT:-1800}"
STOP_TIMEOUT="${KAG_NEO4J_STOP_TIMEOUT:-30}"
APOC="${KAG_NEO4J_APOC:-0}"
APOC_VERSION="${KAG_NEO4J_APOC_VERSION:-5.26.19}"
MVN="${MVN:-mvn}"
NEO4J_USER_NAME="neo4j"

if [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]]; then
    JAVA="$JAVA_HOME/bin/java"
else
    JAVA="java"
fi

# JVM flags from the stock Neo4j 5.26 conf/neo4j.conf (server.jvm.additional), minus
# -XX:+AlwaysPreTouch (it would commit the whole heap up front). The --add-opens are required
# on Java 17/21 (page cache / direct buffers, Netty); without java.nio the page cache falls
# back to a slow mode and native vector index population can stall.
JAVA_FLAGS=(
    "-Xms$HEAP" "-Xmx$HEAP"
    -XX:+UseG1GC
    -XX:-OmitStackTraceInFastThrow
    -XX:+UnlockExperimentalVMOptions
    -XX:+TrustFinalNonStaticFields
    -XX:+DisableExplicitGC
    -XX:+ExitOnOutOfMemoryError
    -Djdk.nio.maxCachedBufferSize=1024
    -Dio.netty.tryReflectionSetAccessible=true
    -Djdk.tls.ephemeralDHKeySize=2048
    -Djdk.tls.rejectClientInitiatedRenegotiation=true
    -XX:+UnlockDiagnosticVMOptions
    -XX:+DebugNonSafepoints
    --add-opens=java.base/java.nio=ALL-UNNAMED
    --add-opens=java.base/java.io=ALL-UNNAMED
    --add-opens=java.base/sun.nio.ch=ALL-UNNAMED
    --enable-native-access=ALL-UNNAMED
    -Dlog4j2.disable.jmx=true
    -Dlog4j.layout.jsonTemplate.maxStringLength=32768
    -Dfile.encoding=UTF-8
)
if [[ -n "${KAG_NEO4J_JAVA_OPTS:-}" ]]; then
    # shellcheck disable=SC2206  # word splitting intended
    JAVA_FLAGS+=(${KAG_NEO4J_JAVA_OPTS})
fi

log() { printf '[neo4j.sh] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

python_bin() {
    if [[ -x "$ROOT/.venv/bin/python" ]] && "$ROOT/.venv/bin/python" -c 'import neo4j' 2>/dev/null; then
        echo "$ROOT/.venv/bin/python"
    elif command -v python3 >/dev/null 2>&1 && python3 -c 'import neo4j' 2>/dev/null; then
        echo "python3"
    else
        die "no Python with the 'neo4j' driver (tried $ROOT/.venv/bin/python and python3); pip install neo4j"
    fi
}

jar_count() { local f n=0; for f in "$1"/*.jar; do [[ -e "$f" ]] && n=$((n + 1)); done; echo "$n"; }

neo4j_version() {
    local f
    for f in "$LIB"/neo4j-[0-9]*.jar; do
        [[ -e "$f" ]] || continue
        f="${f##*/neo4j-}"
        echo "${f%.jar}"
        return 0
    done
    echo "unknown"
}

pom_hash() { sha256sum "$POM" | cut -d' ' -f1; }

lib_complete() { [[ -f "$STAMP" && "$(cat "$STAMP")" == "$(pom_hash)" ]]; }

check_java() {
    command -v "$JAVA" >/dev/null 2>&1 || die "java not found (set JAVA_HOME or put Java 17/21 on PATH)"
    local v major
    v="$("$JAVA" -version 2>&1 | awk -F'"' '/version/ {print $2; exit}')"
    major="${v%%.*}"
    [[ "$major" =~ ^[0-9]+$ ]] || die "cannot parse Java version from: $("$JAVA" -version 2>&1 | head -1)"
    (( major >= 17 )) || die "Neo4j 5.26 needs Java 17 or 21, found $v ($JAVA)"
}

effective_password() {
    if [[ -f "$PW_RECORD" ]]; then
        cat "$PW_RECORD"
    else
        printf '%s' "${KAG_NEO4J_PASSWORD:-kag-test-password}"
    fi
}

warn_password_mismatch() {
    if [[ -f "$PW_RECORD" && -n "${KAG_NEO4J_PASSWORD:-}" && "$KAG_NEO4J_PASSWORD" != "$(cat "$PW_RECORD")" ]]; then
        log "WARNING: KAG_NEO4J_PASSWORD differs from the password the database was initialised with;"
        log "         using the recorded one ($PW_RECORD). Run '$0 reset' to re-initialise."
    fi
}

write_conf() {
    mkdir -p "$CONF_DIR" "$DATA_DIR" "$LOGS_DIR" "$RUN_DIR" "$NHOME/plugins" "$NHOME/import"
    cat >"$CONF_DIR/neo4j.conf.tmp" <<EOF
# Generated by deploy/neo4j/neo4j.sh - edits are overwritten on install/start.
server.config.strict_validation.enabled=true
server.directories.data=$DATA_DIR
server.directories.logs=$LOGS_DIR
server.directories.run=$RUN_DIR
server.directories.plugins=$NHOME/plugins
server.directories.import=$NHOME/import
server.directories.lib=$LIB
server.default_listen_address=127.0.0.1
server.default_advertised_address=127.0.0.1
server.bolt.enabled=true
server.bolt.listen_address=127.0.0.1:$PORT
server.bolt.advertised_address=127.0.0.1:$PORT
server.bolt.tls_level=DISABLED
server.http.enabled=false
server.https.enabled=false
server.memory.heap.initial_size=$HEAP
server.memory.heap.max_size=$HEAP
server.memory.pagecache.size=$PAGECACHE
db.tx_log.rotation.retention_policy=2 files
db.tx_log.rotation.size=16M
dbms.usage_report.enabled=false
dbms.security.auth_enabled=true
# Test server: never lock the account after failed logins (tests provoke AuthError on purpose).
dbms.security.auth_max_failed_attempts=0
# Internal (declared, so strict validation accepts them): shorten the two 5 s Bolt waits on shutdown.
internal.server.bolt.thread_pool_shutdown_wait_time=1s
internal.server.bolt.connection_shutdown_wait_time=1s
EOF
    mv -f "$CONF_DIR/neo4j.conf.tmp" "$CONF_DIR/neo4j.conf"
}

install_lib() {
    if lib_complete; then
        log "jars already in $LIB ($(jar_count "$LIB") jars, pom unchanged)"
        return 0
    fi
    command -v "$MVN" >/dev/null 2>&1 || die "mvn not found (install Maven 3.8+ or set MVN)"
    local tmp="$BASE/lib.tmp" out="$BASE/mvn-install.log"
    mkdir -p "$BASE"
    rm -rf "$tmp"
    log "copying Neo4j jars from Maven into $LIB ..."
    if ! "$MVN" -B -q -f "$POM" dependency:copy-dependencies -DoutputDirectory="$tmp" \
            </dev/null >"$out" 2>&1; then
        cat "$out" >&2
        rm -rf "$tmp"
        die "mvn dependency:copy-dependencies failed (output above, also in $out)"
    fi
    ls "$tmp"/neo4j-[0-9]*.jar >/dev/null 2>&1 || { cat "$out" >&2; die "mvn produced no neo4j jar in $tmp"; }
    pom_hash >"$tmp/.kag-complete"
    rm -rf "$LIB"
    mv "$tmp" "$LIB"
    log "installed $(jar_count "$LIB") jars (Neo4j $(neo4j_version))"
}

# Opt-in (KAG_NEO4J_APOC=1): APOC core from Maven Central into plugins/, for peer benchmarks.
# apoc-core needs apoc-common and a few libraries; jars the server's lib/ already has are skipped.
install_apoc() {
    [[ "$APOC" == "1" ]] || return 0
    [[ -f "$NHOME/plugins/apoc-core-$APOC_VERSION.jar" ]] && return 0
    command -v "$MVN" >/dev/null 2>&1 || die "mvn not found (install Maven 3.8+ or set MVN)"
    local tmp="$BASE/apoc.tmp" out="$BASE/mvn-apoc.log" a f
    rm -rf "$tmp"
    mkdir -p "$tmp/jars" "$NHOME/plugins"
    {
        echo '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        echo '<groupId>kag.deploy</groupId><artifactId>kag-neo4j-apoc</artifactId><version>1</version>'
        echo '<packaging>pom</packaging><dependencies>'
        for a in apoc-core apoc-common; do
            echo "<dependency><groupId>org.neo4j.procedure</groupId><artifactId>$a</artifactId><version>$APOC_VERSION</version></dependency>"
        done
        echo '</dependencies></project>'
    } >"$tmp/pom.xml"
    if ! "$MVN" -B -q -f "$tmp/pom.xml" dependency:copy-dependencies -DincludeScope=runtime \
            -DoutputDirectory="$tmp/jars" </dev/null >"$out" 2>&1; then
        cat "$out" >&2
        rm -rf "$tmp"
        die "mvn could not copy APOC core $APOC_VERSION (output above, also in $out)"
    fi
    for f in "$tmp"/jars/*.jar; do
        a="$(basename "$f")"
        compgen -G "$LIB/${a%-[0-9]*.jar}-[0-9]*.jar" >/dev/null || cp "$f" "$NHOME/plugins/"
    done
    rm -rf "$tmp"
    log "APOC core $APOC_VERSION in $NHOME/plugins"
}

system_db_initialised() { [[ -d "$DATA_DIR/databases/system" ]]; }

set_initial_password() {
    if system_db_initialised; then
        [[ -f "$PW_RECORD" ]] || log "WARNING: database exists but $PW_RECORD is missing; password unknown to this script"
        return 0
    fi
    local pw out="$BASE/set-initial-password.log"
    pw="${KAG_NEO4J_PASSWORD:-kag-test-password}"
    (( ${#pw} >= 8 )) || die "KAG_NEO4J_PASSWORD must be at least 8 characters (Neo4j minimum)"
    # Same thing `neo4j-admin dbms set-initial-password` does: writes data/dbms/auth.ini, which
    # the server consumes when it creates the system database on first start.
    if ! NEO4J_HOME="$NHOME" NEO4J_CONF="$CONF_DIR" "$JAVA" "${JAVA_FLAGS[@]}" -Xms64m -Xmx256m \
            -cp "$LIB/*" org.neo4j.cli.AdminTool dbms set-initial-password "$pw" \
            </dev/null >"$out" 2>&1; then
        cat "$out" >&2
        die "neo4j-admin dbms set-initial-password failed (output above)"
    fi
    printf '%s' "$pw" >"$PW_RECORD"
    chmod 600 "$PW_RECORD"
    log "initial password set for user '$NEO4J_USER_NAME'"
}

write_env() {
    local pw
    pw="$(effective_password)"
    {
        printf 'export NEO4J_URI=%q\n' "neo4j://127.0.0.1:$PORT"
        printf 'export NEO4J_USERNAME=%q\n' "$NEO4J_USER_NAME"
        printf 'export NEO4J_USER=%q\n' "$NEO4J_USER_NAME"  # the older name, still read
        printf 'export NEO4J_PASSWORD=%q\n' "$pw"
        printf 'export NEO4J_DATABASE=%q\n' "neo4j"
    } >"$ENV_FILE.tmp"
    mv -f "$ENV_FILE.tmp" "$ENV_FILE"
}

read_pid() {
    [[ -f "$PID_FILE" ]] || return 1
    local pid
    pid="$(tr -dc '0-9' <"$PID_FILE")"
    [[ -n "$pid" ]] || return 1
    echo "$pid"
}

# While our server runs, use the port it was started with (not the current env var).
adopt_running_port() {
    local pid p
    if pid="$(read_pid)" && pid_alive "$pid" && [[ -f "$PORT_FILE" ]]; then
        p="$(tr -dc '0-9' <"$PORT_FILE")"
        if [[ -n "$p" && "$p" != "$PORT" ]]; then
            [[ -n "${KAG_NEO4J_BOLT_PORT:-}" ]] && log "WARNING: server is running on port $p, ignoring KAG_NEO4J_BOLT_PORT=$KAG_NEO4J_BOLT_PORT"
            PORT="$p"
        fi
    fi
}

# Alive and really our server (guards against a recycled pid).
pid_alive() {
    local pid="$1"
    kill -0 "$pid" 2>/dev/null || return 1
    [[ -r "/proc/$pid/cmdline" ]] || return 0
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'org.neo4j.server.CommunityEntryPoint'
}

# bolt_wait PID TIMEOUT -> 0 ready, 2 process died, 3 timeout, 4 auth failure
bolt_wait() {
    local pid="$1" timeout="$2" py
    py="$(python_bin)"
    NEO4J_PW="$(effective_password)" "$py" - "$pid" "$timeout" "neo4j://127.0.0.1:$PORT" "$NEO4J_USER_NAME" <<'PY'
import os, sys, time
import logging
logging.getLogger("neo4j").setLevel(logging.CRITICAL)
from neo4j import GraphDatabase
from neo4j.exceptions import AuthError

pid, timeout, uri, user = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]
pw = os.environ["NEO4J_PW"]
deadline = time.monotonic() + timeout

def alive() -> bool:
    if pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # zombie?
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True

last = "no attempt"
while True:
    if not alive():
        print(f"server process {pid} exited ({last})", file=sys.stderr)
        sys.exit(2)
    try:
        with GraphDatabase.driver(uri, auth=(user, pw), connection_timeout=3,
                                  max_transaction_retry_time=0) as d:
            recs, _, _ = d.execute_query("RETURN 1 AS ok", database_="neo4j")
            if recs and recs[0]["ok"] == 1:
                sys.exit(0)
    except AuthError as e:
        print(f"Bolt answers but authentication failed: {e}", file=sys.stderr)
        sys.exit(4)
    except Exception as e:  # not up yet
        last = f"{type(e).__name__}: {e}"
    if time.monotonic() >= deadline:
        print(f"timed out after {timeout:.0f}s; last error: {last}", file=sys.stderr)
        sys.exit(3)
    time.sleep(0.5)
PY
}

# What changes while a starting server works (recovery, index population): its logs and data files.
progress_mark() {
    local f size=0
    for f in "$DEBUG_LOG" "$CONSOLE_LOG"; do
        [[ -f "$f" ]] && size=$((size + $(stat -c '%s' "$f")))
    done
    printf '%s:%s' "$size" "$(du -sb "$DATA_DIR" 2>/dev/null | cut -f1)"
}

# wait_ready PID -> as bolt_wait. Waits START_TIMEOUT, then on while each interval shows progress
# (a crash recovery of a large store can take minutes), up to RECOVERY_TIMEOUT in all.
wait_ready() {
    local pid="$1" waited=0 chunk=10 rc before after err="$BASE/bolt-wait.err"
    before="$(progress_mark)"
    while :; do
        rc=0
        bolt_wait "$pid" "$chunk" 2>"$err" || rc=$?
        if (( rc != 3 )); then
            (( rc == 0 )) || cat "$err" >&2
            return "$rc"
        fi
        waited=$((waited + chunk))
        after="$(progress_mark)"
        if (( waited >= START_TIMEOUT )); then
            if [[ "$after" == "$before" ]] || (( waited >= RECOVERY_TIMEOUT )); then
                cat "$err" >&2
                log "no Bolt answer after ${waited}s and no progress in the last ${chunk}s (or over ${RECOVERY_TIMEOUT}s)"
                return 3
            fi
            log "Bolt not answering after ${waited}s; the server is still working (recovery?), waiting on"
        fi
        before="$after"
    done
}

port_in_use() {
    local py
    py="$(python_bin)"
    "$py" - "$PORT" <<'PY'
import socket, sys
s = socket.socket()
s.settimeout(1)
sys.exit(0 if s.connect_ex(("127.0.0.1", int(sys.argv[1]))) == 0 else 1)
PY
}

show_logs() {
    local n="${1:-200}" f
    for f in "$CONSOLE_LOG" "$DEBUG_LOG"; do
        if [[ -f "$f" ]]; then
            printf '===== last %s lines of %s =====\n' "$n" "$f"
            tail -n "$n" "$f"
        else
            printf '===== %s (missing) =====\n' "$f"
        fi
    done
}

cmd_install() {
    check_java
    install_lib
    write_conf
    install_apoc
    set_initial_password
    write_env
    log "ready to start: $0 start"
}

cmd_start() {
    check_java
    local pid rc t0 t1
    adopt_running_port
    if pid="$(read_pid)" && pid_alive "$pid"; then
        if bolt_wait "$pid" 0 2>/dev/null; then
            write_env
            log "already running (pid $pid, bolt://127.0.0.1:$PORT)"
            return 0
        fi
        log "process $pid is alive but Bolt does not answer yet; waiting"
    else
        rm -f "$PID_FILE" "$PORT_FILE"
        lib_complete || install_lib
        write_conf
        install_apoc
        set_initial_password
        warn_password_mismatch
        if port_in_use; then
            die "port 127.0.0.1:$PORT is already in use by another process (set KAG_NEO4J_BOLT_PORT)"
        fi
        [[ -f "$CONSOLE_LOG" ]] && mv -f "$CONSOLE_LOG" "$CONSOLE_LOG.1"
        log "starting Neo4j $(neo4j_version) (heap $HEAP, page cache $PAGECACHE) ..."
        # The child writes its own pid before exec'ing java, so the pid file names the JVM
        # whether or not setsid had to fork. plugins/ comes first on the class path, as in the stock
        # launcher (APOC registers extensions through it); it is empty unless KAG_NEO4J_APOC=1.
        (
            cd "$NHOME"
            # shellcheck disable=SC2016  # $$, $0 and $@ belong to the inner bash
            setsid nohup bash -c 'echo $$ >"$0"; exec "$@"' "$PID_FILE" \
                "$JAVA" "${JAVA_FLAGS[@]}" -cp "$NHOME/plugins/*:$LIB/*" org.neo4j.server.CommunityEntryPoint \
                --home-dir="$NHOME" --config-dir="$CONF_DIR" --console-mode \
                </dev/null >"$CONSOLE_LOG" 2>&1 &
        )
        for _ in $(seq 50); do [[ -s "$PID_FILE" ]] && break; sleep 0.1; done
        pid="$(read_pid)" || die "server did not write $PID_FILE"
        echo "$PORT" >"$PORT_FILE"
    fi
    echo "$PORT" >"$LAST_PORT_FILE"
    t0="$(date +%s.%N)"
    rc=0
    wait_ready "$pid" || rc=$?
    t1="$(date +%s.%N)"
    if (( rc != 0 )); then
        show_logs 200 >&2
        if (( rc == 3 )) && pid_alive "$pid"; then
            log "Bolt not ready and no progress; stopping pid $pid"
            cmd_stop >/dev/null 2>&1 || true
        fi
        rm -f "$PID_FILE" "$PORT_FILE"
        die "Neo4j failed to start (see logs above; $LOGS_DIR)"
    fi
    write_env
    log "Neo4j ready on neo4j://127.0.0.1:$PORT (pid $pid, Bolt answered after $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}') s)"
}

cmd_stop() {
    local pid i
    if ! pid="$(read_pid)"; then
        log "not running"
        return 0
    fi
    if ! pid_alive "$pid"; then
        rm -f "$PID_FILE" "$PORT_FILE"
        log "not running (removed stale pid file)"
        return 0
    fi
    log "stopping pid $pid ..."
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < STOP_TIMEOUT * 10; i++)); do
        pid_alive "$pid" || break
        sleep 0.1
    done
    if pid_alive "$pid"; then
        log "still alive after ${STOP_TIMEOUT}s; sending KILL"
        kill -KILL "$pid" 2>/dev/null || true
        for _ in $(seq 50); do pid_alive "$pid" || break; sleep 0.1; done
    fi
    rm -f "$PID_FILE" "$PORT_FILE"
    log "stopped"
}

cmd_status() {
    local pid
    adopt_running_port
    if pid="$(read_pid)" && pid_alive "$pid"; then
        if bolt_wait "$pid" 0 2>/dev/null; then
            echo "running (pid $pid), Bolt answering on neo4j://127.0.0.1:$PORT"
            return 0
        fi
        echo "running (pid $pid), Bolt NOT answering on 127.0.0.1:$PORT"
        return 1
    fi
    echo "stopped"
    return 3
}

cmd_env() {
    adopt_running_port
    warn_password_mismatch
    mkdir -p "$BASE"
    write_env
    cat "$ENV_FILE"
}

cmd_reset() {
    cmd_stop
    rm -rf "$DATA_DIR" "$PW_RECORD"
    log "database files removed; next start re-initialises (password from KAG_NEO4J_PASSWORD)"
}

usage() {
    sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

case "${1:-}" in
    install) cmd_install ;;
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    log | logs) show_logs "${2:-200}" ;;
    env) cmd_env ;;
    reset) cmd_reset ;;
    -h | --help | help) usage ;;
    *) usage >&2; exit 2 ;;
esac
