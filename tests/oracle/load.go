package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	serializerjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// What the files may hold: the objects kube-scheduler's plugins read (through the
// informers), by apiVersion and kind. Anything else is skipped with a warning.
var acceptedKinds = map[schema.GroupVersionKind]bool{}

// Kinds without a namespace; every other accepted kind is namespaced, "default" when
// the document names none.
var clusterScoped = map[string]bool{
	"Node": true, "Namespace": true, "PersistentVolume": true, "StorageClass": true,
	"CSINode": true, "CSIDriver": true, "PriorityClass": true, "DeviceClass": true,
	"ResourceSlice": true, "DeviceTaintRule": true,
}

const (
	schedulerConfigAPIVersion = "kubescheduler.config.k8s.io/v1"
	schedulerConfigKind       = "KubeSchedulerConfiguration"
	// Berth's manifests may delete an object of an earlier document with this
	// annotation set to "delete"; the oracle applies the documents in order too.
	simulateAnnotation = "berth.dev/simulate"
)

func init() {
	for _, gv := range []struct {
		group, version string
		kinds          []string
	}{
		{"", "v1", []string{"Node", "Pod", "Namespace", "PersistentVolumeClaim", "PersistentVolume",
			"Service", "ReplicationController"}},
		{"apps", "v1", []string{"ReplicaSet", "StatefulSet"}},
		{"storage.k8s.io", "v1", []string{"StorageClass", "CSINode", "CSIDriver", "CSIStorageCapacity"}},
		{"scheduling.k8s.io", "v1", []string{"PriorityClass"}},
		{"scheduling.k8s.io", "v1beta1", []string{"PodGroup", "Workload"}},
		{"policy", "v1", []string{"PodDisruptionBudget"}},
		{"resource.k8s.io", "v1", []string{"DeviceClass", "ResourceClaim", "ResourceClaimTemplate",
			"ResourceSlice", "DeviceTaintRule"}},
	} {
		for _, k := range gv.kinds {
			acceptedKinds[schema.GroupVersionKind{Group: gv.group, Version: gv.version, Kind: k}] = true
		}
	}
}

// A decoded document (or List item), not defaulted yet.
type parsedObject struct {
	obj    runtime.Object
	gvk    schema.GroupVersionKind
	source string
	// deletes: the document deletes the object of its kind, namespace and name.
	deletes bool
}

// What the files hold, in document order.
type parsed struct {
	objects []parsedObject
	// A KubeSchedulerConfiguration document among the files, if any.
	config       []byte
	configSource string
	warnings     []string
}

// The decoders, shared by every request: client-go's scheme (the typed objects of
// every built-in API), strict so that unknown and duplicate fields are noticed.
var strictDecoder = serializerjson.NewSerializerWithOptions(serializerjson.DefaultMetaFactory,
	clientscheme.Scheme, clientscheme.Scheme, serializerjson.SerializerOptions{Strict: true})

// A line that separates YAML documents.
var separator = regexp.MustCompile(`^---\s*(#.*)?$`)

// parseFiles decodes the files, in order. A file decoded before (same path, size and
// modification time) is not decoded again: serve's requests often share files.
func (c *fileCache) parseFiles(files []string) (*parsed, error) {
	p := &parsed{}
	for _, f := range files {
		one, err := c.parseFile(f)
		if err != nil {
			return nil, err
		}
		if one.config != nil {
			if p.config != nil {
				return nil, inputErrorf("%s: a second KubeSchedulerConfiguration (the first: %s)", one.configSource, p.configSource)
			}
			p.config, p.configSource = one.config, one.configSource
		}
		p.objects = append(p.objects, one.objects...)
		p.warnings = append(p.warnings, one.warnings...)
	}
	return p, nil
}

// fileCache keeps the last decodings of files (the objects are copied before use).
type fileCache struct {
	entries map[string]fileEntry
}

type fileEntry struct {
	size    int64
	modTime int64
	parsed  *parsed
}

func (c *fileCache) parseFile(f string) (*parsed, error) {
	info, err := os.Stat(f)
	if err != nil {
		return nil, inputErrorf("%v", err)
	}
	if e, ok := c.entries[f]; ok && e.size == info.Size() && e.modTime == info.ModTime().UnixNano() {
		return e.parsed, nil
	}
	data, err := os.ReadFile(f)
	if err != nil {
		return nil, inputErrorf("%v", err)
	}
	p := &parsed{}
	if err := p.parseText(f, data); err != nil {
		return nil, err
	}
	if c.entries == nil || len(c.entries) >= 1024 {
		c.entries = map[string]fileEntry{}
	}
	c.entries[f] = fileEntry{size: info.Size(), modTime: info.ModTime().UnixNano(), parsed: p}
	return p, nil
}

// parseText decodes one file's text (multi-document YAML or JSON).
func (p *parsed) parseText(file string, data []byte) error {
	lines := bytes.SplitAfter(data, []byte("\n"))
	var doc bytes.Buffer
	start, n := 1, 0
	flush := func() error {
		n++
		text := doc.Bytes()
		doc.Reset()
		where := fmt.Sprintf("%s: document %d (line %d)", file, n, start)
		return p.parseDocument(where, text)
	}
	for i, line := range lines {
		if separator.Match(bytes.TrimRight(line, "\r\n")) {
			if err := flush(); err != nil {
				return err
			}
			start = i + 2
			continue
		}
		doc.Write(line)
	}
	return flush()
}

// parseDocument decodes one document; a List's items each in turn.
func (p *parsed) parseDocument(where string, text []byte) error {
	if len(bytes.TrimSpace(text)) == 0 {
		return nil
	}
	js, err := yaml.YAMLToJSON(text)
	if err != nil {
		return inputErrorf("%s: not well-formed YAML or JSON: %v", where, err)
	}
	return p.parseJSON(where, js)
}

type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Items []json.RawMessage `json:"items"`
}

func (p *parsed) parseJSON(where string, js []byte) error {
	trimmed := bytes.TrimSpace(js)
	if bytes.Equal(trimmed, []byte("null")) || len(trimmed) == 0 {
		return nil
	}
	if trimmed[0] != '{' {
		return inputErrorf("%s: expected an object (a mapping with apiVersion and kind)", where)
	}
	var h header
	if err := json.Unmarshal(js, &h); err != nil {
		return inputErrorf("%s: %v", where, err)
	}
	switch {
	case h.Kind == "":
		return inputErrorf("%s: kind: required value", where)
	case h.APIVersion == "":
		return inputErrorf("%s: apiVersion: required value", where)
	}
	if h.APIVersion == "v1" && strings.HasSuffix(h.Kind, "List") {
		for i, item := range h.Items {
			if err := p.parseJSON(fmt.Sprintf("%s, items[%d]", where, i), item); err != nil {
				return err
			}
		}
		return nil
	}
	if h.APIVersion == schedulerConfigAPIVersion && h.Kind == schedulerConfigKind {
		if p.config != nil {
			return inputErrorf("%s: a second KubeSchedulerConfiguration (the first: %s)", where, p.configSource)
		}
		p.config = append([]byte(nil), js...)
		p.configSource = where
		return nil
	}
	gv, err := schema.ParseGroupVersion(h.APIVersion)
	if err != nil {
		return inputErrorf("%s: apiVersion: %v", where, err)
	}
	gvk := gv.WithKind(h.Kind)
	if !acceptedKinds[gvk] {
		p.warnings = append(p.warnings, fmt.Sprintf("%s: skipping %s %s %q: not a kind the scheduler reads",
			where, h.APIVersion, h.Kind, h.Metadata.Name))
		return nil
	}
	if h.Metadata.Name == "" {
		return inputErrorf("%s: %s: metadata.name: required value", where, h.Kind)
	}
	where = fmt.Sprintf("%s, %s %q", where, h.Kind, h.Metadata.Name)
	switch a := h.Metadata.Annotations[simulateAnnotation]; a {
	case "":
	case "delete":
		obj, err := clientscheme.Scheme.New(gvk)
		if err != nil {
			return inputErrorf("%s: %v", where, err)
		}
		if _, _, err := strictDecoder.Decode(js, &gvk, obj); err != nil && !runtime.IsStrictDecodingError(err) {
			return inputErrorf("%s: %v", where, err)
		}
		p.objects = append(p.objects, parsedObject{obj: obj, gvk: gvk, source: where, deletes: true})
		return nil
	default:
		return inputErrorf("%s: metadata.annotations.%s: unsupported value %q: only \"delete\"", where, simulateAnnotation, a)
	}
	obj, _, err := strictDecoder.Decode(js, &gvk, nil)
	if err != nil {
		if !runtime.IsStrictDecodingError(err) || obj == nil {
			return inputErrorf("%s: %v", where, err)
		}
		p.warnings = append(p.warnings, fmt.Sprintf("%s: %v", where, err))
	}
	p.objects = append(p.objects, parsedObject{obj: obj, gvk: gvk, source: where})
	return nil
}
