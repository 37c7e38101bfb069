#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests.
#
#   scripts/pg-cluster.sh start   install Debian's postgresql if initdb is missing, create a
#                                 cluster in $CTC_PG_DIR, listen on 127.0.0.1:<free port> only
#                                 (trust auth for loopback), wait until ready, write the DSN to
#                                 $CTC_PG_DIR/dsn and print `export CTC_TEST_PG_DSN=...`
#   scripts/pg-cluster.sh env     print `export CTC_TEST_PG_DSN=...` of the running cluster
#   scripts/pg-cluster.sh stop    stop the cluster and delete $CTC_PG_DIR
#
# CTC_PG_DIR defaults to ${TMPDIR:-/tmp}/ctc-pg. `start` on a running cluster only prints its
# DSN; `stop` on none does nothing: both are idempotent. As root, the server runs as the
# `postgres` user (created by Debian's package; a dedicated `ctc-pg` user otherwise).
set -euo pipefail

STATE_DIR="${CTC_PG_DIR:-${TMPDIR:-/tmp}/ctc-pg}"
DATA_DIR="$STATE_DIR/data"
DSN_FILE="$STATE_DIR/dsn"
LOG_FILE="$STATE_DIR/server.log"

say() { echo "pg-cluster: $*" >&2; }
die() { say "$*"; exit 1; }

# The folder holding initdb/pg_ctl: PATH, else Debian's /usr/lib/postgresql/<newest>/bin.
pg_bindir() {
    local found
    if found="$(command -v initdb 2>/dev/null)" && [ -x "$(dirname "$(readlink -f "$found")")/pg_ctl" ]; then
        dirname "$(readlink -f "$found")"
        return 0
    fi
    found="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
    if [ -n "$found" ] && [ -x "$found/initdb" ] && [ -x "$found/pg_ctl" ]; then
        echo "$found"
        return 0
    fi
    return 1
}

ensure_postgres() {
    if BIN="$(pg_bindir)"; then
        return 0
    fi
    [ "$(id -u)" = 0 ] || die "initdb not found and not root: install PostgreSQL (Debian: apt-get install postgresql)"
    say "installing Debian's postgresql"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 || die "apt-get update failed"
    apt-get install -y -qq postgresql >&2 || die "apt-get install postgresql failed"
    BIN="$(pg_bindir)" || die "postgresql installed but initdb/pg_ctl not found under /usr/lib/postgresql/*/bin"
}

# Run a server binary as the unprivileged owner of the cluster (postgres refuses root).
RUN_AS=()
choose_user() {
    if [ "$(id -u)" != 0 ]; then
        PG_USER="$(id -un)"
        return 0
    fi
    if id postgres >/dev/null 2>&1; then
        PG_USER=postgres
    else
        id ctc-pg >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin ctc-pg
        PG_USER=ctc-pg
    fi
    RUN_AS=(runuser -u "$PG_USER" --)
}

free_port() {
    local py
    py="$(command -v python3 || command -v python || true)"
    if [ -n "$py" ]; then
        "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
    else
        echo $(( 20000 + RANDOM % 20000 ))
    fi
}

running() {
    [ -f "$DATA_DIR/postmaster.pid" ] && [ -f "$DSN_FILE" ] && [ -n "${BIN:-}" ] \
        && "${RUN_AS[@]}" "$BIN/pg_ctl" -D "$DATA_DIR" status >/dev/null 2>&1
}

print_env() {
    echo "export CTC_TEST_PG_DSN='$(cat "$DSN_FILE")'"
}

start() {
    ensure_postgres
    choose_user
    if running; then
        print_env
        return 0
    fi
    # A leftover from a killed run: start clean.
    if [ -d "$DATA_DIR" ]; then
        "${RUN_AS[@]}" "$BIN/pg_ctl" -D "$DATA_DIR" stop -m immediate >/dev/null 2>&1 || true
        rm -rf "$DATA_DIR" "$DSN_FILE"
    fi
    mkdir -p "$STATE_DIR"
    if [ "$(id -u)" = 0 ]; then
        chown "$PG_USER" "$STATE_DIR"
        chmod 700 "$STATE_DIR"
        "${RUN_AS[@]}" test -w "$STATE_DIR" \
            || die "$PG_USER cannot write $STATE_DIR (a parent folder is closed to it); set CTC_PG_DIR or TMPDIR to a folder under /tmp"
    fi
    "${RUN_AS[@]}" "$BIN/initdb" -D "$DATA_DIR" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 >"$STATE_DIR/initdb.log" 2>&1 \
        || "${RUN_AS[@]}" "$BIN/initdb" -D "$DATA_DIR" -U postgres --auth=trust --encoding=UTF8 --no-locale >"$STATE_DIR/initdb.log" 2>&1 \
        || { cat "$STATE_DIR/initdb.log" >&2; die "initdb failed"; }
    # Loopback TCP only; the unix socket lives in the cluster's own folder, not /var/run.
    # fsync off: a throwaway test cluster need not survive a power cut.
    cat >>"$DATA_DIR/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
unix_socket_directories = '$STATE_DIR'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 50
EOF
    local attempt port
    for attempt in 1 2 3 4 5; do
        port="$(free_port)"
        if "${RUN_AS[@]}" "$BIN/pg_ctl" -D "$DATA_DIR" -l "$LOG_FILE" -w -t 60 -o "-p $port" start >/dev/null 2>&1; then
            break
        fi
        port=""
        say "start on a free port failed (attempt $attempt), retrying"
    done
    [ -n "$port" ] || { tail -n 20 "$LOG_FILE" >&2 || true; die "could not start the cluster"; }
    # pg_ctl -w waits for the postmaster; also wait until it accepts TCP connections.
    local ready=""
    for attempt in $(seq 1 60); do
        if [ -x "$BIN/pg_isready" ]; then
            "$BIN/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres && { ready=1; break; }
        else
            (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && { ready=1; break; }
        fi
        sleep 0.5
    done
    [ -n "$ready" ] || { tail -n 20 "$LOG_FILE" >&2 || true; die "the cluster started but does not accept connections"; }
    echo "postgresql://postgres@127.0.0.1:$port/postgres" >"$DSN_FILE"
    print_env
}

stop() {
    if [ ! -d "$STATE_DIR" ]; then
        return 0
    fi
    if [ -f "$DATA_DIR/postmaster.pid" ] && BIN="$(pg_bindir)"; then
        choose_user
        "${RUN_AS[@]}" "$BIN/pg_ctl" -D "$DATA_DIR" stop -m fast -w >/dev/null 2>&1 \
            || "${RUN_AS[@]}" "$BIN/pg_ctl" -D "$DATA_DIR" stop -m immediate -w >/dev/null 2>&1 \
            || say "pg_ctl stop failed; deleting the folder anyway"
    fi
    rm -rf "$STATE_DIR"
}

env_cmd() {
    BIN="$(pg_bindir)" || die "PostgreSQL is not installed"
    choose_user
    running || die "no cluster running in $STATE_DIR (run: $0 start)"
    print_env
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    env) env_cmd ;;
    *) echo "usage: $0 start|stop|env   (cluster folder: \$CTC_PG_DIR, default \${TMPDIR:-/tmp}/ctc-pg)" >&2; exit 2 ;;
esac
