#!/usr/bin/env bash
# stress.sh: runs the README's test command, go test -race ./..., several
# times on a loaded machine, to find tests that flake when CPUs are busy.
#
# Usage: scripts/stress.sh [-n RUNS] [-t TIMEOUT] [-o DIR] [-L] [-- GO_TEST_ARGS...]
#   -n RUNS     runs of the suite (default 10)
#   -t TIMEOUT  go test's -timeout for each run (default 20m)
#   -o DIR      where the logs go (default: a new directory under /tmp)
#   -L          no load: run the suite on an otherwise idle machine
#   GO_TEST_ARGS after -- replace the package list ./... (for example
#               -- -run TestSync ./rdmacm)
#
# Unless -L, the machine is kept busy while the suite runs: two CPU burners
# and a loop of go build -a ./... with a scratch GOCACHE (the cache the
# tests use is not touched). Every run is go test -race -count=1 (no cached
# results). For each run it prints PASS or FAIL and the duration, and for a
# failure the failing packages and tests; at the end the slowest packages
# (from go test's "ok  pkg  12.3s" lines, slowest run of each) and
# "N/N passed". It exits 0 when every run passed. The load processes are
# stopped on exit, on ^C and on errors.
#
# Example: scripts/stress.sh -n 3
set -euo pipefail

runs=10
timeout=20m
out=""
load=1
while getopts "n:t:o:Lh" opt; do
	case $opt in
	n) runs=$OPTARG ;;
	t) timeout=$OPTARG ;;
	o) out=$OPTARG ;;
	L) load=0 ;;
	h)
		sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
		exit 0
		;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
if ! [[ $runs =~ ^[1-9][0-9]*$ ]]; then
	echo "stress: -n wants a positive number, got '$runs'" >&2
	exit 2
fi
pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || pkgs=(./...)

cd "$(dirname "$0")/.."
[ -n "$out" ] || out=$(mktemp -d /tmp/rdma-go-stress.XXXXXX)
mkdir -p "$out"

# The load: each process leads a process group of its own (setsid), so
# that stopping it stops what it started (go build's compilers too).
loadpids=()
scratch=""
stop_load() {
	local pid
	for pid in "${loadpids[@]}"; do
		kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${loadpids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	loadpids=()
	if [ -n "$scratch" ]; then
		chmod -R u+w "$scratch" 2>/dev/null || true
		rm -rf "$scratch"
		scratch=""
	fi
}
trap stop_load EXIT
trap 'exit 130' INT TERM

start_load() {
	local i
	for i in 1 2; do
		setsid bash -c 'while :; do :; done' &
		loadpids+=($!)
	done
	scratch=$(mktemp -d /tmp/rdma-go-stress-cache.XXXXXX)
	# Bounded: at most 1000 builds, and it is stopped with the runs.
	GOCACHE=$scratch setsid bash -c 'for ((i = 0; i < 1000; i++)); do go build -a ./... >/dev/null 2>&1; done' &
	loadpids+=($!)
}

if [ "$load" = 1 ]; then
	start_load
	echo "stress: load on: 2 CPU burners and a go build -a ./... loop (pids ${loadpids[*]})"
else
	echo "stress: no load"
fi
echo "stress: $runs runs of go test -race -count=1 -timeout $timeout ${pkgs[*]}; logs in $out"

passed=0
for ((r = 1; r <= runs; r++)); do
	log="$out/run-$r.log"
	t0=$(date +%s)
	set +e
	go test -race -count=1 -timeout "$timeout" "${pkgs[@]}" >"$log" 2>&1
	code=$?
	set -e
	dur=$(($(date +%s) - t0))
	if [ $code -eq 0 ]; then
		passed=$((passed + 1))
		printf 'run %d/%d: PASS %4ds\n' "$r" "$runs" "$dur"
	else
		printf 'run %d/%d: FAIL %4ds (exit %d, log %s)\n' "$r" "$runs" "$dur" "$code" "$log"
		# Failing packages ("FAIL\tpkg\t12.3s", "FAIL\tpkg [build failed]"),
		# then failing tests and subtests, and test binaries that panicked
		# or timed out.
		grep -E '^FAIL[[:space:]]+[^[:space:]]' "$log" | awk '{print "  package " $2 (NF > 2 && $3 ~ /^\[/ ? " " $3 " " $4 : "")}' || true
		awk '/^[[:space:]]*--- FAIL: / {
				sub(/ \([0-9.]+s\)$/, ""); sub(/--- FAIL: /, "test ")
				if (!($0 in c)) k[++n] = $0
				c[$0]++
			}
			END { for (i = 1; i <= n; i++) printf "  %s%s\n", k[i], (c[k[i]] > 1 ? " (" c[k[i]] " times)" : "") }' "$log"
		grep -E '^panic: |^fatal error: ' "$log" | sort | uniq -c | sed 's/^/  /' || true
		# A binary that hit -timeout lists the tests still running.
		awk '/^running tests:/ { f = 1; next } f && /^\t/ { print "  still running at the timeout: " $1; next } { f = 0 }' "$log"
	fi
done

echo
echo "slowest packages (slowest run of each, seconds; mean over the runs where it passed):"
cat "$out"/run-*.log 2>/dev/null | awk '
	$1 == "ok" && $3 ~ /^[0-9.]+s$/ {
		t = substr($3, 1, length($3) - 1) + 0
		n[$2]++; sum[$2] += t
		if (t > max[$2]) max[$2] = t
	}
	END { for (p in n) printf "%8.1f %8.1f  %s\n", max[p], sum[p] / n[p], p }' |
	sort -rn | head -n 10 | awk '{printf "  %8ss max %8ss mean  %s\n", $1, $2, $3}'
echo
echo "$passed/$runs passed"
[ "$passed" -eq "$runs" ]
