module github.com/rdma-go/rdma-go

go 1.26.8

require (
	go.uber.org/goleak v1.3.0
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sys v0.50.0
	pgregory.net/rapid v1.3.0
)
