//! DefaultBinder: binds the pod to the chosen node through the API server's
//! `pods/binding` subresource, as upstream's `defaultbinder` plugin.

use berth_sdk::{Bind, CycleState, Plugin, Pod, Status};

/// The plugin.
pub struct DefaultBinder;

impl Plugin for DefaultBinder {
    const NAME: &'static str = "DefaultBinder";
    fn new(_args: berth_sdk::serde_json::Value) -> Result<Self, String> {
        Ok(DefaultBinder)
    }
}

impl Bind for DefaultBinder {
    fn bind(&self, _state: &CycleState, pod: &Pod, node: &str) -> Status {
        match berth_sdk::bind_pod(pod, node) {
            Ok(()) => Status::success(),
            // Upstream turns the API error into an Error status; the host retries.
            Err(e) => Status::error(e),
        }
    }
}

berth_sdk::export_plugin!(DefaultBinder: bind);

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::{Code, ExtensionPoint, MemoryState, Registered};

    #[test]
    fn a_failed_binding_is_an_error_with_its_message() {
        // Natively there is no cluster, so `bind_pod` fails.
        let store = MemoryState::default();
        let pod = Pod {
            namespace: "ns".into(),
            name: "p".into(),
            ..Pod::default()
        };
        let status = DefaultBinder.bind(&CycleState::new(&store), &pod, "node-a");
        assert_eq!(status.code, Code::Error);
        assert_eq!(status.reasons, ["bind_pod needs the Berth host"]);
    }

    #[test]
    fn exports_only_bind() {
        assert_eq!(
            DefaultBinder::vtable().extension_points(),
            [ExtensionPoint::Bind]
        );
    }

    #[test]
    fn accepts_no_args() {
        assert!(DefaultBinder::new(berth_sdk::serde_json::Value::Null).is_ok());
    }
}
