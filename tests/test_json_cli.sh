#!/bin/sh
# Every --json output (train, eval, predict, optimize, bench, profile,
# doctor) and metrics.jsonl with model, file, class and directory names full
# of quotes, backslashes, control characters and a byte that is not UTF-8:
# strict JSON each time, the names carried back (tests/json_cli_check.py).
NAME=test_json_cli
TRAIN=256
TEST=100
. tests/fashion_cli.sh
"$python" tests/json_cli_check.py "$cuttle" "$tmp/data" "$tmp"
