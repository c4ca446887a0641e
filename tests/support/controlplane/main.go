package main

import (
	"fmt"
	"os"
	"path/filepath"

	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: controlplane kube-apiserver|kube-controller-manager|etcd [flags] | crdcheck CRD.yaml...")
		os.Exit(2)
	}
	which := filepath.Base(os.Args[1])
	os.Args = append([]string{which}, os.Args[2:]...)
	switch which {
	case "kube-apiserver":
		os.Exit(cli.Run(apiserver.NewAPIServerCommand()))
	case "kube-controller-manager":
		os.Exit(cli.Run(controllermanager.NewControllerManagerCommand()))
	case "etcd":
		etcdmain.Main(os.Args)
	case "crdcheck":
		os.Exit(crdCheck(os.Args[1:]))
	default:
		fmt.Fprintf(os.Stderr, "unknown server %q\n", which)
		os.Exit(2)
	}
}
