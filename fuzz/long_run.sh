#!/bin/sh
# The long run: every target for RUNS inputs (default 10^6), two at a time (a 2-core box).
# Usage: [PYTHON=venv/bin/python] sh fuzz/long_run.sh [RUNS]   (logs in fuzz/logs/<target>.log)
RUNS=${1:-1000000}
cd "$(dirname "$0")/.." || exit 1
mkdir -p fuzz/logs
lane() {
    for t in "$@"; do
        ${PYTHON:-python} fuzz/run.py --target "$t" --runs "$RUNS" --keep-going >> "fuzz/logs/$t.log" 2>&1
        echo "$t exit=$?" >> fuzz/logs/lanes.log
    done
}
# Quick targets first; logs are appended to, so a resumed run's counts add up.
lane chunk meta vlmeta cframe b2d &
lane codec sframe b2z zarrstore &
wait
