//! End-to-end tests live in `tests/tests/`; this library holds what several of them
//! share.

use std::path::{Path, PathBuf};

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
