// Prints every feature gate kube-scheduler of this module's Kubernetes release
// accepts in --feature-gates, one per line, tab-separated and sorted by name: name,
// default, whether it is locked to its default, and its stage (ALPHA, BETA, GA,
// DEPRECATED). kube-scheduler registers Kubernetes' gates (with client-go's, the
// generic API server's and zpages'), the logging gates and the metrics gates: so does
// this. The end-to-end tier compares Berth's table of gates with this list.
package main

import (
	"fmt"
	"os"
	"sort"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	metricsfeatures "k8s.io/component-base/metrics/features"
	_ "k8s.io/kubernetes/pkg/features"
)

func main() {
	gate := utilfeature.DefaultMutableFeatureGate
	if err := logsapi.AddFeatureGates(gate); err != nil {
		fmt.Fprintln(os.Stderr, "logging gates:", err)
		os.Exit(1)
	}
	if err := metricsfeatures.AddFeatureGates(gate); err != nil {
		fmt.Fprintln(os.Stderr, "metrics gates:", err)
		os.Exit(1)
	}
	all := gate.GetAll()
	names := make([]string, 0, len(all))
	for name := range all {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, name := range names {
		spec := all[featuregate.Feature(name)]
		stage := string(spec.PreRelease)
		if stage == "" {
			stage = "GA"
		}
		fmt.Printf("%s\t%t\t%t\t%s\n", name, spec.Default, spec.LockToDefault, stage)
	}
}
