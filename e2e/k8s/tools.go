//go:build tools

// Package tools pins the commands the e2e control plane builds, so `go mod tidy` keeps their deps.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
