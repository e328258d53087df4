//go:build !linux

package main

import "errors"

var errNoKernel = errors.New("kernel RDMA links need Linux")

func kernelIndex(string) (int, bool)             { return 0, false }
func kernelLinkAdd(string, string, string) error { return errNoKernel }
func kernelLinkDel(string) error                 { return errNoKernel }

type resourceSummary struct {
	index   int
	name    string
	entries map[string]uint64
}

func kernelResources() ([]resourceSummary, error) { return nil, nil }
