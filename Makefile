# The parts of rdma-go that are not plain `go build`.

.PHONY: capi clean

# capi: the C face (package capi) — librdmago.so.1 and the drop-in
# libibverbs.so.1 and librdmacm.so.1 — into build/capi/. Needs gcc and
# libibverbs-dev. Run a C program over it with LD_LIBRARY_PATH=build/capi.
capi:
	sh capi/build.sh build/capi

clean:
	rm -rf build
