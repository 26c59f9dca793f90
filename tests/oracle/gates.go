package main

import (
	"fmt"
	"strings"
	"sync"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	metricsfeatures "k8s.io/component-base/metrics/features"

	// Registers Kubernetes' feature gates (and client-go's) in the default gate.
	_ "k8s.io/kubernetes/pkg/features"
)

// Feature gates, as kube-scheduler 1.37.2's --feature-gates sees them: Kubernetes'
// gates (registered by k8s.io/kubernetes/pkg/features), the logging gates and the
// metrics gates, at their 1.37 defaults.
//
// The gates are process-wide (every upstream package reads
// utilfeature.DefaultFeatureGate when it runs), so a request with other gates gets a
// fresh copy of the pristine defaults with its settings applied, swapped in for the
// request. Requests run one at a time, so no plugin sees the swap midway.
type gates struct {
	pristine featuregate.MutableVersionedFeatureGate
	// current is the spec in force ("" at first: the defaults).
	current string
}

// The defaults, copied once (before any request swaps the gates).
var (
	pristineOnce sync.Once
	pristine     featuregate.MutableVersionedFeatureGate
	pristineErr  error
)

func newGates() (*gates, error) {
	pristineOnce.Do(func() {
		gate := utilfeature.DefaultMutableFeatureGate
		if err := logsapi.AddFeatureGates(gate); err != nil {
			pristineErr = fmt.Errorf("logging feature gates: %w", err)
			return
		}
		if err := metricsfeatures.AddFeatureGates(gate); err != nil {
			pristineErr = fmt.Errorf("metrics feature gates: %w", err)
			return
		}
		pristine = gate.DeepCopy()
	})
	if pristineErr != nil {
		return nil, pristineErr
	}
	// A new oracle starts from the defaults, whatever an earlier one applied.
	fg := pristine.DeepCopy()
	utilfeature.DefaultMutableFeatureGate = fg
	utilfeature.DefaultFeatureGate = fg
	return &gates{pristine: pristine}, nil
}

// apply makes spec ("A=true,B=false", as --feature-gates takes it) the process's
// gates, over the defaults (not over the previous request's).
func (g *gates) apply(spec string) error {
	spec = strings.TrimSpace(spec)
	if spec == g.current {
		return nil
	}
	fg := g.pristine.DeepCopy()
	if spec != "" {
		if err := fg.Set(spec); err != nil {
			return inputErrorf("--feature-gates %q: %v", spec, err)
		}
	}
	utilfeature.DefaultMutableFeatureGate = fg
	utilfeature.DefaultFeatureGate = fg
	g.current = spec
	return nil
}
