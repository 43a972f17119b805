// Command coredns is CoreDNS with only the plugins the kind cluster's Corefile uses (CoreDNS's
// documented way to choose plugins: its own main with its own directive list). Leaving out the
// cloud back-ends (route53, azure, clouddns, ...) makes the build several times smaller, and
// leaving out forward means this DNS server cannot send a query off the machine, whatever its
// Corefile says: names outside the cluster's zones are answered locally (SERVFAIL).
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// directives: the subset of CoreDNS's plugin.cfg, in its order (the order plugins run in).
var directives = []string{
	"reload", "ready", "health", "prometheus", "errors", "log", "loadbalance", "cache",
	"kubernetes", "loop",
}

func init() { dnsserver.Directives = directives }

func main() { coremain.Run() }
