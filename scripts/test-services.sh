#!/usr/bin/env bash
# Runs the given test command (default: pytest) with the real services the suite needs:
#   - chromium (/usr/bin/chromium) for the dashboard's browser test, installed from Debian
#     when missing;
#   - a throwaway PostgreSQL cluster on a loopback port (scripts/pg-cluster.sh), its DSN in
#     CTC_TEST_PG_DSN, stopped and deleted when the tests end, however they end.
# A CTC_TEST_PG_DSN already set is used as is (no cluster is started). The test command's
# exit status is this script's (pytest's 5, "no tests ran", fails too). Safe to rerun.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"

say() { echo "test-services: $*" >&2; }

apt_install() {
    if [ "$(id -u)" != 0 ]; then
        say "not root: cannot install $*; install it and rerun"
        return 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 && apt-get install -y -qq "$@" >&2
}

ensure_chromium() {
    if command -v chromium >/dev/null 2>&1; then
        return 0
    fi
    say "installing chromium"
    apt_install chromium chromium-driver || { say "could not install chromium"; return 1; }
    command -v chromium >/dev/null 2>&1 || { say "chromium installed but not on PATH"; return 1; }
}

ensure_chromium

cluster_dir=""
cleanup() {
    if [ -n "$cluster_dir" ]; then
        CTC_PG_DIR="$cluster_dir" bash "$here/pg-cluster.sh" stop || say "could not stop the cluster in $cluster_dir"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -z "${CTC_TEST_PG_DSN:-}" ]; then
    # A folder per invocation, so two test runs on one machine never share a cluster.
    cluster_dir="$(mktemp -d "${TMPDIR:-/tmp}/ctc-pg.XXXXXX")"
    CTC_PG_DIR="$cluster_dir" bash "$here/pg-cluster.sh" start >/dev/null
    CTC_TEST_PG_DSN="$(cat "$cluster_dir/dsn")"
    export CTC_TEST_PG_DSN
    say "PostgreSQL test cluster at $CTC_TEST_PG_DSN"
fi

status=0
"${@:-pytest}" || status=$?
exit "$status"
