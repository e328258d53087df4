#!/bin/sh
# build.sh [OUTDIR]: builds the C face into OUTDIR (default build/capi):
#   librdmago.so.1   this package, go build -buildmode=c-shared (cgo), the
#                    kernel provider left out (tag rdmago_nokernel);
#   libibverbs.so.1  jump tables carrying rdma-core 44's sonames and symbol
#   librdmacm.so.1   versions (symbols.txt), found next to librdmago.so.1.
# Needs gcc and libibverbs-dev (verbs.h). `make capi` runs it.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-"$here/../build/capi"}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cd "$here/.."
CGO_ENABLED=1 go build -tags rdmago_capi,rdmago_nokernel -buildmode=c-shared -o "$out/librdmago.so.1" ./capi
rm -f "$out/librdmago.so.h"

arch=$(go env GOARCH)
for lib in ibverbs rdmacm; do
	# The version script: one node per version, in the table's order.
	awk -v lib="$lib" '
		$1 == lib { if (!($2 in seen)) { seen[$2] = 1; order[n++] = $2 } syms[$2] = syms[$2] "\t\t" $3 ";\n" }
		END { for (i = 0; i < n; i++) printf "%s {\n\tglobal:\n%s%s};\n", order[i], syms[order[i]], i == 0 ? "\tlocal: *;\n" : "" }
	' "$here/symbols.txt" >"$work/$lib.map"
	# The jump table: each symbol a tail jump to its function in
	# librdmago.so.1, which receives the caller's arguments untouched.
	awk -v lib="$lib" -v arch="$arch" '
		BEGIN { print "\t.text" }
		$1 == lib && $4 ~ /^data:/ {
			n = substr($4, 6)
			printf "\t.data\n\t.globl %s\n\t.type %s, %%object\n\t.size %s, %d\n%s:\n\t.zero %d\n\t.text\n", $3, $3, $3, n, $3, n
			next
		}
		$1 == lib {
			target = $4 == "=" ? "rgo_" $3 : $4
			printf "\t.globl %s\n\t.type %s, %%function\n%s:\n", $3, $3, $3
			if (arch == "amd64") printf "\tjmp %s@PLT\n", target
			else if (arch == "arm64") printf "\tb %s\n", target
			else { print "unsupported GOARCH " arch > "/dev/stderr"; exit 1 }
			printf "\t.size %s, .-%s\n", $3, $3
		}
		END { print "\t.section .note.GNU-stack,\"\",%progbits" }
	' "$here/symbols.txt" >"$work/$lib.S"
	gcc -shared -nostdlib -o "$out/lib$lib.so.1" "$work/$lib.S" \
		-Wl,-soname,"lib$lib.so.1" -Wl,--version-script="$work/$lib.map" \
		-L"$out" -l:librdmago.so.1 -Wl,-rpath,'$ORIGIN' -Wl,-z,noexecstack
done
