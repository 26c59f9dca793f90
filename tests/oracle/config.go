package main

import (
	"fmt"
	"os"

	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
)

// schedulerConfig is the KubeSchedulerConfiguration in force: the file's, decoded as
// kube-scheduler decodes its --config (the scheme's UniversalDecoder: defaulted, then
// converted to the internal type) and validated as kube-scheduler validates it; or,
// with none, the defaulted empty v1 configuration, as scheduler.New builds its
// default profile. Defaulting reads the feature gates (the default plugins depend on
// them), so it runs after they are applied.
func schedulerConfig(data []byte, source string) (*config.KubeSchedulerConfiguration, error) {
	if data == nil {
		var versioned configv1.KubeSchedulerConfiguration
		scheme.Scheme.Default(&versioned)
		cfg := &config.KubeSchedulerConfiguration{}
		if err := scheme.Scheme.Convert(&versioned, cfg, nil); err != nil {
			return nil, fmt.Errorf("the default KubeSchedulerConfiguration: %w", err)
		}
		return cfg, nil
	}
	obj, gvk, err := scheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return nil, inputErrorf("%s: %v", source, err)
	}
	cfg, ok := obj.(*config.KubeSchedulerConfiguration)
	if !ok {
		return nil, inputErrorf("%s: expected a KubeSchedulerConfiguration, got %s", source, gvk)
	}
	cfg.TypeMeta.APIVersion = gvk.GroupVersion().String()
	if err := validation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		return nil, inputErrorf("%s: invalid KubeSchedulerConfiguration: %v", source, err)
	}
	return cfg, nil
}

// readConfig reads a --config file.
func readConfig(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, inputErrorf("--config: %v", err)
	}
	return data, nil
}

// profileFor is the profile of the pod's spec.schedulerName, as kube-scheduler's
// frameworkForPod picks it.
func profileFor(cfg *config.KubeSchedulerConfiguration, schedulerName string) (*config.KubeSchedulerProfile, error) {
	for i := range cfg.Profiles {
		if cfg.Profiles[i].SchedulerName == schedulerName {
			return &cfg.Profiles[i], nil
		}
	}
	names := make([]string, 0, len(cfg.Profiles))
	for _, p := range cfg.Profiles {
		names = append(names, p.SchedulerName)
	}
	return nil, inputErrorf("the pod's spec.schedulerName %q names no profile of the configuration (profiles: %q)", schedulerName, names)
}
