// etcd for the end-to-end tier: the server at the version k8s.io/kubernetes requires
// (go.mod), with etcd's own command line.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
