#!/usr/bin/env bash
# soak.sh: runs the tools' own loops as two processes (server and client on
# the default soft device), many times each, and counts hangs and failures.
# Half of each tool's runs happen while the machine is loaded (two CPU
# burners and a parallel `go build` loop). Every run must exit 0 within its
# time limit on both sides and print its figures; a run that does not is
# kept (both sides' output, with a goroutine dump taken by SIGQUIT on a
# hang) under the output directory.
#
#   scripts/soak.sh [-n RUNS] [-t TOOL[,TOOL...]] [-o DIR] [--no-load]
#
# -n RUNS  runs per tool (default 100; the second half loaded)
# -t       tools to soak (default: all of ib_send_lat ib_write_lat
#          ib_write_bw ib_read_bw ibv_rc_pingpong rping)
# -o DIR   where failed runs are kept (default: a new temporary directory)
#
# Each pair gets its own RDMA_GO_PORT and loopback addresses, so a soak can
# run beside the test suite. Exit status: 0 when every run passed.
set -uo pipefail
cd "$(dirname "$0")/.."

runs=100
tools="ib_send_lat,ib_write_lat,ib_write_bw,ib_read_bw,ibv_rc_pingpong,rping"
out=""
load=1
while [ $# -gt 0 ]; do
	case $1 in
	-n) runs=$2; shift 2 ;;
	-t) tools=$2; shift 2 ;;
	-o) out=$2; shift 2 ;;
	--no-load) load=0; shift ;;
	-h | --help) sed -n '2,18p' "$0"; exit 0 ;;
	*) echo "soak: unknown argument $1" >&2; exit 2 ;;
	esac
done
[ -n "$out" ] || out=$(mktemp -d /tmp/rdma-go-soak.XXXXXX)
mkdir -p "$out"
bin="$out/bin"
mkdir -p "$bin"
echo "soak: building the tools into $bin"
IFS=, read -ra toolv <<<"$tools"
for t in "${toolv[@]}"; do
	go build -o "$bin/" "./cmd/$t" || exit 1
done

loaders=()
start_load() {
	[ $load = 1 ] || return 0
	for _ in 1 2; do
		bash -c 'while :; do :; done' &
		loaders+=($!)
	done
	local cache
	cache=$(mktemp -d /tmp/rdma-go-soak-cache.XXXXXX)
	bash -c "while :; do GOCACHE=$cache go build -a -o /dev/null ./... >/dev/null 2>&1; done" &
	loaders+=($!)
}
stop_load() {
	for p in "${loaders[@]}"; do
		pkill -P "$p" 2>/dev/null
		kill "$p" 2>/dev/null
	done
	wait "${loaders[@]}" 2>/dev/null
	loaders=()
}
trap 'stop_load; exit 130' INT TERM
trap 'stop_load' EXIT

# args TOOL PORT: the server's arguments; the client adds the server's
# address. Iteration counts keep one run near a second.
args() {
	case $1 in
	ib_send_lat | ib_write_lat) echo "-s 8 -n 20000 -p $2" ;;
	ib_write_bw) echo "-s 8 -n 400000 -l 32 -p $2" ;;
	ib_read_bw) echo "-s 65536 -n 5000 -p $2" ;;
	ibv_rc_pingpong) echo "-g 1 -s 4096 -n 10000 -p $2" ;;
	rping) echo "-C 2000 -S 4096 -p $2" ;;
	esac
}

# figures TOOL FILE: whether the client's output has the run's figures.
figures() {
	case $1 in
	ib_*_lat) grep -Eq '^ 8 +20000 +[0-9.]+ +[0-9.]+ +[0-9.]+' "$2" ;;
	ib_write_bw) grep -Eq '^ 8 +400000 +[0-9.]+ +[0-9.]+' "$2" ;;
	ib_read_bw) grep -Eq '^ 65536 +5000 +[0-9.]+ +[0-9.]+' "$2" ;;
	ibv_rc_pingpong) grep -Eq '^81920000 bytes in [0-9.]+ seconds = [0-9.]+ Mbit/sec$' "$2" ;;
	rping) true ;; # rping prints nothing when quiet; exit status 0 is its figure
	esac
}

limit=60 # seconds for one run; a run normally takes about one
fail=0
total=0
declare -A tfail
for t in "${toolv[@]}"; do
	tfail[$t]=0
	for i in $(seq 1 "$runs"); do
		if [ "$i" -eq $((runs / 2 + 1)) ]; then start_load; fi
		port=$((20000 + (RANDOM % 20000)))
		udp=$((5000 + (RANDOM % 20000)))
		a=$(args "$t" "$port")
		so="$out/$t.$i.server" co="$out/$t.$i.client"
		t0=$(date +%s.%N)
		if [ "$t" = rping ]; then
			# rping's server address is its device's; its port is the CM's.
			RDMA_GO_PORT=$udp RDMA_GO_LOOPBACK=127.0.1.1 timeout -s QUIT $limit "$bin/$t" -s -a 127.0.1.1 $a >"$so" 2>&1 &
			sp=$!
			sleep 0.2
			RDMA_GO_PORT=$udp RDMA_GO_LOOPBACK=127.0.1.2 timeout -s QUIT $limit "$bin/$t" -c -a 127.0.1.1 $a >"$co" 2>&1
			crc=$?
		else
			RDMA_GO_PORT=$udp RDMA_GO_LOOPBACK=127.0.1.1 timeout -s QUIT $limit "$bin/$t" $a >"$so" 2>&1 &
			sp=$!
			# The client retries while the server is not yet listening.
			for _ in $(seq 1 100); do
				ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break
				sleep 0.05
			done
			RDMA_GO_PORT=$udp RDMA_GO_LOOPBACK=127.0.1.2 timeout -s QUIT $limit "$bin/$t" $a 127.0.0.1 >"$co" 2>&1
			crc=$?
		fi
		wait $sp
		src=$?
		t1=$(date +%s.%N)
		total=$((total + 1))
		why=""
		[ $crc = 124 ] || [ $src = 124 ] || [ $crc = 131 ] || [ $src = 131 ] && why="HANG"
		[ -z "$why" ] && { [ $crc != 0 ] || [ $src != 0 ]; } && why="FAIL"
		[ -z "$why" ] && ! figures "$t" "$co" && why="NO FIGURES"
		loaded=$([ "$i" -gt $((runs / 2)) ] && [ $load = 1 ] && echo loaded || echo idle)
		if [ -n "$why" ]; then
			fail=$((fail + 1))
			tfail[$t]=$((tfail[$t] + 1))
			printf '%-16s run %3d (%s): %s server=%d client=%d in %.1fs; kept %s\n' "$t" "$i" "$loaded" "$why" $src $crc "$(echo "$t1 - $t0" | bc)" "$so"
		else
			rm -f "$so" "$co"
		fi
	done
	stop_load
	printf '%-16s %d/%d passed\n' "$t" $((runs - tfail[$t])) "$runs"
done
echo "soak: $((total - fail))/$total passed; failed runs kept in $out"
[ $fail = 0 ]
