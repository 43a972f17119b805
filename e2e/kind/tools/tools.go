//go:build tools

// Package tools pins the commands built from this module, so `go mod tidy` keeps their deps.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "sigs.k8s.io/kind"
)
