//! End-to-end tests live in `tests/tests/`; this library holds what several of them
//! share.

pub mod differential;

use berth::cluster::manifest::{Object, load_str};
use berth::scheduler::Scheduler;
use berth::wasm::{Runtime, RuntimeOptions};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// A wasm runtime whose compiled components are cached in [`component_cache`].
pub fn runtime() -> Arc<Runtime> {
    Runtime::new(RuntimeOptions {
        cache_dir: Some(component_cache()),
        ..RuntimeOptions::default()
    })
    .unwrap()
}

/// The component cache every test of a run shares: cargo's directory for integration
/// tests' files (`CARGO_TARGET_TMPDIR`, `<target>/tmp`, found from the test binary in
/// `<target>/<profile>/deps`), so that each component is compiled once per run rather
/// than once per test binary. The CLI tests (`host/tests/common`) use the same one; the
/// cache itself is tested with caches of its own.
pub fn component_cache() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().expect("the test binary's path");
        // Test binaries live in <target>/<profile>/deps, this crate's programs in
        // <target>/<profile>.
        let in_deps = exe
            .parent()
            .and_then(Path::file_name)
            .is_some_and(|d| d == "deps");
        let target = exe
            .ancestors()
            .nth(if in_deps { 3 } else { 2 })
            .expect("a binary in <target>/<profile>");
        target.join("tmp").join("component-cache")
    })
    .clone()
}

/// Applies manifests (nodes, pods, storage objects, Services and other selectors)
/// to the scheduler; any other kind fails the test.
pub fn apply(s: &mut Scheduler, yaml: &str) {
    for doc in load_str("test.yaml", yaml).unwrap() {
        match doc.object {
            Object::Node(n) => s.add_or_update_node(n),
            Object::Pod(p) => s.add_pod(p).unwrap(),
            Object::Claim(c) => s.add_or_update_claim(c),
            Object::Volume(v) => s.add_or_update_volume(v),
            Object::StorageClass(c) => s.add_or_update_storage_class(c),
            Object::CsiDriver(d) => s.add_or_update_csi_driver(d),
            Object::CsiStorageCapacity(c) => s.add_or_update_storage_capacity(c),
            Object::Selector(sel) => s.add_or_update_selector(sel),
            other => panic!("unexpected object {other:?}"),
        }
    }
}

/// The `berth_plugin_call_duration_seconds` count of a plugin's calls at a point.
pub fn plugin_calls(s: &Scheduler, plugin: &str, point: &str) -> u64 {
    let line = format!(
        "berth_plugin_call_duration_seconds_count{{extension_point=\"{point}\",plugin=\"{plugin}\"}} "
    );
    s.metrics_text()
        .lines()
        .find_map(|l| l.strip_prefix(line.as_str()))
        .map_or(0, |n| n.parse().unwrap())
}

/// Two empty nodes of 4 CPUs and 8 GiB, `alpha` and `zulu`, as manifests.
pub const TWO_NODES: &str = r#"
apiVersion: v1
kind: Node
metadata: {name: alpha}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: zulu}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
"#;

/// A small pending pod manifest (100m CPU, 64 MiB) with `labels` written as YAML
/// flow-map entries (`a: b, c: d`), starting with its document separator.
pub fn pod(name: &str, labels: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, labels: {{{labels}}}}}\nspec:\n  containers:\n  - name: c\n    image: busybox\n    resources: {{requests: {{cpu: 100m, memory: 64Mi}}}}\n"
    )
}

/// Writes `text` to `dir/name` and returns the path.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}
