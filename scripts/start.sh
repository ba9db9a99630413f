#!/usr/bin/env bash
# Set everything up, then run the daemon in the foreground on its embedded defaults
# (127.0.0.1:8080, state in /var/lib/sandbox-host). Extra arguments are passed to it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ "$(id -u)" -ne 0 ]; then
    exec sudo ./build/sandbox-host "$@"
fi
exec ./build/sandbox-host "$@"
