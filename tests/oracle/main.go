// Command berth-oracle runs kube-scheduler 1.37.2's own scheduling framework and
// in-tree plugins on the cluster files `berth explain` reads, and prints what
// `berth explain --output json` prints: Berth's test tier compares the two.
//
//	berth-oracle explain --pod NAMESPACE/NAME [--config FILE] [--feature-gates A=true,B=false] FILE...
//	berth-oracle serve   (JSON requests on stdin, one per line; one JSON answer per line)
//
// See README.md.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/go-logr/logr"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
)

// inputError: the request is wrong (a file, a document, a field, the pod, the
// configuration, the gates). Exit code 2.
type inputError struct{ msg string }

func (e *inputError) Error() string { return e.msg }

func inputErrorf(format string, args ...any) error {
	return &inputError{msg: fmt.Sprintf(format, args...)}
}

const usage = `usage:
  berth-oracle explain --pod NAMESPACE/NAME [--config FILE] [--feature-gates A=true,B=false]
                       [--score-nodes N1,N2...] FILE...
  berth-oracle serve
`

// request is one explain: the cluster's files (or their text), the pod, the
// KubeSchedulerConfiguration and the feature gates.
type request struct {
	Files        []string `json:"files"`
	YAML         string   `json:"yaml"`
	Pod          string   `json:"pod"`
	Config       string   `json:"config"`
	ConfigYAML   string   `json:"config_yaml"`
	FeatureGates string   `json:"feature_gates"`
	// Score exactly these nodes, in this order, feasible or not (see explain).
	ScoreNodes []string `json:"score_nodes"`
}

// oracle holds what requests share: the gates and, per gate setting, the registry.
type oracle struct {
	gates      *gates
	registries map[string]frameworkruntime.Registry
	files      fileCache
}

func newOracle() (*oracle, error) {
	// The framework records plugin metrics; scheduler.New registers them first.
	metrics.Register()
	g, err := newGates()
	if err != nil {
		return nil, err
	}
	return &oracle{gates: g, registries: map[string]frameworkruntime.Registry{}}, nil
}

// registry is upstream's in-tree registry under the gates in force (its factories
// capture the gates when it is built), with one change: DefaultPreemption runs its
// preemption synchronously (as with SchedulerAsyncPreemption off), so that nothing
// of a request runs after its answer. What PostFilter answers is the same either way
// when the evictions succeed, which they do against the fake clientset.
func (o *oracle) registry() frameworkruntime.Registry {
	if r, ok := o.registries[o.gates.current]; ok {
		return r
	}
	r := plugins.NewInTreeRegistry()
	fts := plfeature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	fts.EnableAsyncPreemption = false
	r[defaultpreemption.Name] = frameworkruntime.FactoryAdapter(fts, defaultpreemption.New)
	o.registries[o.gates.current] = r
	return r
}

// run answers one request.
func (o *oracle) run(ctx context.Context, req *request) (*Explanation, []string, error) {
	ns, name, ok := strings.Cut(req.Pod, "/")
	if !ok || ns == "" || name == "" {
		return nil, nil, inputErrorf("--pod %q: expected NAMESPACE/NAME", req.Pod)
	}
	if err := o.gates.apply(req.FeatureGates); err != nil {
		return nil, nil, err
	}
	var p *parsed
	var err error
	switch {
	case len(req.Files) > 0 && req.YAML != "":
		return nil, nil, inputErrorf("files and yaml: give one of them")
	case req.YAML != "":
		p = &parsed{}
		err = p.parseText("<yaml>", []byte(req.YAML))
	case len(req.Files) > 0:
		p, err = o.files.parseFiles(req.Files)
	default:
		return nil, nil, inputErrorf("no cluster files")
	}
	if err != nil {
		return nil, nil, err
	}
	var cfgData []byte
	cfgSource := ""
	switch {
	case req.Config != "" && req.ConfigYAML != "":
		return nil, p.warnings, inputErrorf("config and config_yaml: give one of them")
	case req.Config != "":
		if cfgData, err = readConfig(req.Config); err != nil {
			return nil, p.warnings, err
		}
		cfgSource = req.Config
	case req.ConfigYAML != "":
		cfgData, cfgSource = []byte(req.ConfigYAML), "<config_yaml>"
	}
	if p.config != nil {
		if cfgData != nil {
			return nil, p.warnings, inputErrorf("%s: a KubeSchedulerConfiguration among the files, and --config %s: give one", p.configSource, cfgSource)
		}
		cfgData, cfgSource = p.config, p.configSource
	}
	cfg, err := schedulerConfig(cfgData, cfgSource)
	if err != nil {
		return nil, p.warnings, err
	}
	c, err := buildCluster(p)
	if err != nil {
		return nil, p.warnings, err
	}
	target := c.pod(ns, name)
	if target == nil {
		return nil, c.warnings, inputErrorf("no pending pod %s/%s in the files", ns, name)
	}
	profile, err := profileFor(cfg, target.Spec.SchedulerName)
	if err != nil {
		return nil, c.warnings, err
	}
	w, err := newWorld(ctx, c, profile, o.registry())
	if err != nil {
		return nil, c.warnings, err
	}
	defer w.close()
	for _, n := range req.ScoreNodes {
		if _, err := w.snapshot.Get(n); err != nil {
			return nil, c.warnings, inputErrorf("score_nodes: no node %q", n)
		}
	}
	e, err := w.explain(target, req.ScoreNodes)
	return e, c.warnings, err
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	// Upstream's logging is off: stdout is the answer, stderr the warnings.
	// BERTH_ORACLE_LOG=1 keeps klog's output (on stderr).
	if os.Getenv("BERTH_ORACLE_LOG") == "" {
		klog.SetLogger(logr.Discard())
	}
	o, err := newOracle()
	if err != nil {
		fmt.Fprintln(os.Stderr, "berth-oracle:", err)
		os.Exit(1)
	}
	switch os.Args[1] {
	case "explain":
		os.Exit(explainCommand(o, os.Args[2:]))
	case "serve":
		if len(os.Args) > 2 {
			fmt.Fprint(os.Stderr, usage)
			os.Exit(2)
		}
		// Each request builds and drops a world: collecting garbage less often
		// buys throughput for some memory (GOGC, when set, decides).
		if os.Getenv("GOGC") == "" {
			debug.SetGCPercent(400)
		}
		os.Exit(serve(o, os.Stdin, os.Stdout))
	case "-h", "--help", "help":
		fmt.Print(usage)
	default:
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
}

// explainCommand parses `explain`'s arguments (flags and files in any order).
func explainCommand(o *oracle, args []string) int {
	req := &request{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		flag, value, hasValue := strings.Cut(a, "=")
		switch flag {
		case "--pod", "--config", "--feature-gates", "--score-nodes":
			if !hasValue {
				if i+1 >= len(args) {
					fmt.Fprintf(os.Stderr, "berth-oracle: %s needs a value\n%s", flag, usage)
					return 2
				}
				i++
				value = args[i]
			}
			switch flag {
			case "--pod":
				req.Pod = value
			case "--config":
				req.Config = value
			case "--feature-gates":
				req.FeatureGates = value
			case "--score-nodes":
				req.ScoreNodes = strings.Split(value, ",")
			}
		case "--":
			req.Files = append(req.Files, args[i+1:]...)
			i = len(args)
		default:
			if strings.HasPrefix(a, "-") {
				fmt.Fprintf(os.Stderr, "berth-oracle: unknown flag %s\n%s", a, usage)
				return 2
			}
			req.Files = append(req.Files, a)
		}
	}
	if req.Pod == "" || len(req.Files) == 0 {
		fmt.Fprint(os.Stderr, "berth-oracle: explain needs --pod and at least one file\n"+usage)
		return 2
	}
	e, warnings, err := o.run(context.Background(), req)
	for _, w := range warnings {
		fmt.Fprintln(os.Stderr, "warning:", w)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "berth-oracle:", err)
		var ie *inputError
		if errors.As(err, &ie) {
			return 2
		}
		return 1
	}
	out, err := json.Marshal(e)
	if err != nil {
		fmt.Fprintln(os.Stderr, "berth-oracle:", err)
		return 1
	}
	fmt.Println(string(out))
	return 0
}

// serve answers requests, one JSON object a line, until stdin ends.
func serve(o *oracle, in io.Reader, out io.Writer) int {
	r := bufio.NewReaderSize(in, 1<<20)
	wr := bufio.NewWriter(out)
	for {
		line, readErr := r.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			answer := serveOne(o, line)
			wr.Write(answer)
			wr.WriteByte('\n')
			if err := wr.Flush(); err != nil {
				fmt.Fprintln(os.Stderr, "berth-oracle:", err)
				return 1
			}
		}
		if readErr == io.EOF {
			return 0
		}
		if readErr != nil {
			fmt.Fprintln(os.Stderr, "berth-oracle:", readErr)
			return 1
		}
	}
}

func serveOne(o *oracle, line []byte) (answer []byte) {
	errorLine := func(err error) []byte {
		b, _ := json.Marshal(map[string]string{"error": err.Error()})
		return b
	}
	defer func() {
		if p := recover(); p != nil {
			answer = errorLine(fmt.Errorf("panic: %v", p))
		}
	}()
	dec := json.NewDecoder(strings.NewReader(string(line)))
	dec.DisallowUnknownFields()
	req := &request{}
	if err := dec.Decode(req); err != nil {
		return errorLine(fmt.Errorf("bad request: %v", err))
	}
	e, warnings, err := o.run(context.Background(), req)
	for _, w := range warnings {
		fmt.Fprintln(os.Stderr, "warning:", w)
	}
	if err != nil {
		return errorLine(err)
	}
	b, err := json.Marshal(e)
	if err != nil {
		return errorLine(err)
	}
	return b
}
