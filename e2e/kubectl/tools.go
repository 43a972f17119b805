//go:build tools

// Package tools pins kubectl, built only where none is on PATH (e2e/build-k8s kubectl); a
// module of its own, so its dependencies never change the servers' go.sum and cache stamp.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kubectl"
)
