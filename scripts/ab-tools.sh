#!/usr/bin/env bash
# ab-tools.sh ROUNDS COL TOOL "ARGS" [OLD_DIR NEW_DIR]
#
# Runs one perftest-style tool as server and client on 127.0.0.1, two
# processes, from OLD_DIR and NEW_DIR (default /tmp/old, /tmp/new)
# alternately, ROUNDS times each, and prints column COL of the result line
# of every run (sorted per side). Build the two sides first, e.g.:
#   go build -o /tmp/new/ ./cmd/ib_send_lat
#   git stash; go build -o /tmp/old/ ./cmd/ib_send_lat; git stash pop
#   scripts/ab-tools.sh 5 5 ib_send_lat "-n 20000"
set -euo pipefail
rounds=$1 col=$2 tool=$3 args=$4 old=${5:-/tmp/old} new=${6:-/tmp/new}
port=$((22000 + RANDOM % 3000))
for _ in $(seq "$rounds"); do
	for side in old new; do
		dir=$old; [ $side = new ] && dir=$new
		port=$((port + 1))
		timeout 60 "$dir/$tool" -p $port $args >/dev/null 2>&1 &
		sleep 0.3
		x=$(timeout 60 "$dir/$tool" -p $port $args 127.0.0.1 2>&1 |
			grep -Em1 '^ *[0-9]+ +[0-9]+ +[0-9.]+ ' | awk -v c="$col" '{print $c}') || true
		wait || true
		echo "$side ${x:-failed}"
	done
done | sort -k1,1 -k2,2n | awk -v t="$tool $args" '{a[$1] = a[$1] " " $2} END {print t ": old" a["old"] " | new" a["new"]}'
