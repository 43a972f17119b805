//go:build tools

// Package tools pins the command built from this module, so `go mod tidy` keeps its deps.
package tools

import _ "github.com/rancher/local-path-provisioner"
