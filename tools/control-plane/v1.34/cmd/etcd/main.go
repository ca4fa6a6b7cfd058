// Command etcd is etcd's server, built from the go.etcd.io/etcd/server/v3 module at the version
// kube-apiserver v1.34 is tested with. etcd's server module has no main package of its own.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
