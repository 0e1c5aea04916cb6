// Command coredns is the cluster tier's DNS: CoreDNS with only the plugins a cluster's
// Corefile needs (bind, kubernetes, cache, errors, health, ready, log, loadbalance, reload), so
// that Service names resolve in pods as on any cluster (the chart's kube-scheduler dials the
// koord-scheduler extender by its Service's name). Its own module: CoreDNS pins its own
// client-go, apart from kubebin's Kubernetes release.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func init() {
	// The order plugins run in, as CoreDNS's plugin.cfg has them.
	dnsserver.Directives = []string{
		"reload", "bind", "health", "ready", "errors", "log", "cache", "loadbalance", "kubernetes",
	}
}

func main() { coremain.Run() }
