// Command kube is one binary for a single-node Kubernetes of the project's cluster tier: the
// stock kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy and kubectl of the
// Kubernetes release that go.mod requires, and the etcd that the API server was built against.
// One compile and one link serve them all (the cold build is the slow part of the tier).
//
// The component is chosen by the name the binary is called by (a link named kubelet) or by
// its first argument (kube kubelet --config=...); the rest are the component's own flags.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	_ "time/tzdata" // CronJob time zones, as kube-apiserver and kube-controller-manager have

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectl "k8s.io/kubectl/pkg/cmd"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

// components maps a name to the command the upstream main of that name builds.
var components = map[string]func() *cobra.Command{
	"kube-apiserver":          apiserver.NewAPIServerCommand,
	"kube-controller-manager": controllermanager.NewControllerManagerCommand,
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
	"kubelet":                 func() *cobra.Command { return kubelet.NewKubeletCommand(context.Background()) },
	"kube-proxy":              proxy.NewProxyCommand,
	"kubectl":                 kubectl.NewDefaultKubectlCommand,
}

func main() {
	name, args := filepath.Base(os.Args[0]), os.Args[1:]
	if !known(name) && len(args) > 0 {
		name, args = args[0], args[1:]
	}
	switch {
	case name == "etcd":
		// etcdmain reads its flags from the slice it is given, program name first.
		etcdmain.Main(append([]string{"etcd"}, args...))
	case known(name):
		os.Exit(run(name, args))
	default:
		fmt.Fprintf(os.Stderr, "usage: kube COMPONENT [FLAGS...], COMPONENT one of: etcd %v\n", names())
		os.Exit(2)
	}
}

func run(name string, args []string) int {
	if name == "kubectl" {
		// As upstream's kubectl main: verbosity is set before the command is built.
		logs.GlogSetter(kubectl.GetLogVerbosity(append([]string{name}, args...))) //nolint:errcheck
	}
	command := components[name]()
	command.SetArgs(args)
	if name == "kubectl" {
		if err := cli.RunNoErrOutput(command); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			return 1
		}
		return 0
	}
	return cli.Run(command)
}

func known(name string) bool {
	_, ok := components[name]
	return ok
}

func names() []string {
	out := make([]string, 0, len(components))
	for name := range components {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}
