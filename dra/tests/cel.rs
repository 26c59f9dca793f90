//! The CEL environment of DRA device selectors: the `device` variable, Kubernetes'
//! quantity and semver libraries, and the errors upstream reports.

use berth_dra::cel::{CelError, SelectorCache};
use berth_sdk::dra::{Device, DeviceAttribute, DeviceCapacity};
use berth_sdk::quantity::Quantity;
use std::collections::BTreeMap;

const DRIVER: &str = "dra.example.com";

fn gpu() -> Device {
    Device {
        name: "gpu-0".into(),
        attributes: BTreeMap::from([
            ("model".into(), DeviceAttribute::String("a100".into())),
            ("numa".into(), DeviceAttribute::Int(1)),
            ("healthy".into(), DeviceAttribute::Bool(true)),
            (
                "driverVersion".into(),
                DeviceAttribute::Version("1.2.3".into()),
            ),
            (
                "other.example.com/zone".into(),
                DeviceAttribute::String("east".into()),
            ),
        ]),
        capacity: BTreeMap::from([
            (
                "memory".into(),
                DeviceCapacity {
                    value: Quantity::from("80Gi"),
                    request_policy: None,
                },
            ),
            (
                "other.example.com/slots".into(),
                DeviceCapacity {
                    value: Quantity::from("4"),
                    request_policy: None,
                },
            ),
        ]),
        allow_multiple_allocations: true,
        ..Device::default()
    }
}

fn eval(expr: &str) -> Result<bool, CelError> {
    SelectorCache::new()
        .get_or_compile(expr)
        .device_matches(DRIVER, &gpu())
}

fn yes(expr: &str) {
    assert_eq!(eval(expr), Ok(true), "{expr}");
}

fn no(expr: &str) {
    assert_eq!(eval(expr), Ok(false), "{expr}");
}

fn runtime_error(expr: &str) -> String {
    match eval(expr) {
        Err(CelError::Runtime {
            expression,
            message,
        }) => {
            assert_eq!(expression, expr);
            message
        }
        other => panic!("{expr}: expected a runtime error, got {other:?}"),
    }
}

#[test]
fn device_driver_and_multiple_allocations() {
    yes(r#"device.driver == "dra.example.com""#);
    no(r#"device.driver == "other.example.com""#);
    yes("device.allowMultipleAllocations");
    let exclusive = Device {
        allow_multiple_allocations: false,
        ..gpu()
    };
    let c = SelectorCache::new();
    assert_eq!(
        c.get_or_compile("device.allowMultipleAllocations")
            .device_matches(DRIVER, &exclusive),
        Ok(false)
    );
}

#[test]
fn attributes_by_domain_the_driver_owns_bare_names() {
    yes(r#"device.attributes["dra.example.com"].model == "a100""#);
    yes(r#"device.attributes["dra.example.com"].numa == 1"#);
    yes(r#"device.attributes["dra.example.com"].healthy"#);
    yes(r#"device.attributes["other.example.com"].zone == "east""#);
    yes(r#""zone" in device.attributes["other.example.com"]"#);
    no(r#""model" in device.attributes["other.example.com"]"#);
    yes(r#"has(device.attributes["dra.example.com"].model)"#);
    no(r#"has(device.attributes["dra.example.com"].color)"#);
    // An unknown domain reads as an empty map, as upstream.
    no(r#"has(device.attributes["unknown.example.com"].model)"#);
    yes(r#"size(device.attributes["unknown.example.com"]) == 0"#);
    yes(r#"device.attributes["dra.example.com"].?color.orValue("none") == "none""#);
    // The strings extension and regular expressions are there.
    yes(r#"device.attributes["dra.example.com"].model.startsWith("a1")"#);
    yes(r#"device.attributes["dra.example.com"].model.matches("^a[0-9]+$")"#);
    yes(r#"device.attributes["dra.example.com"].model.upperAscii() == "A100""#);
}

#[test]
fn capacities_are_quantities() {
    yes(r#"device.capacity["dra.example.com"].memory == quantity("80Gi")"#);
    yes(r#"device.capacity["dra.example.com"].memory.compareTo(quantity("40Gi")) == 1"#);
    yes(r#"device.capacity["dra.example.com"].memory.isGreaterThan(quantity("1Gi"))"#);
    yes(r#"device.capacity["other.example.com"].slots.asInteger() == 4"#);
    no(r#"device.capacity["dra.example.com"].memory.isLessThan(quantity("1Gi"))"#);
}

#[test]
fn quantity_library() {
    yes(r#"quantity("1Gi") == quantity("1073741824")"#);
    yes(r#"quantity("1k") != quantity("1Ki")"#);
    yes(r#"isQuantity("100m")"#);
    no(r#"isQuantity("1x")"#);
    yes(r#"quantity("1").compareTo(quantity("2")) == -1"#);
    yes(r#"quantity("2").compareTo(quantity("2000m")) == 0"#);
    yes(r#"quantity("3").compareTo(quantity("2")) == 1"#);
    yes(r#"quantity("2").isGreaterThan(quantity("1999m"))"#);
    yes(r#"quantity("2").isLessThan(quantity("2001m"))"#);
    yes(r#"quantity("1Gi").add(quantity("1Gi")) == quantity("2Gi")"#);
    yes(r#"quantity("1").add(2) == quantity("3")"#);
    yes(r#"quantity("1").sub(quantity("500m")) == quantity("0.5")"#);
    yes(r#"quantity("5").sub(2) == quantity("3")"#);
    yes(r#"quantity("10").asInteger() == 10"#);
    yes(r#"quantity("1500m").asApproximateFloat() == 1.5"#);
    yes(r#"quantity("-3").sign() == -1 && quantity("0").sign() == 0 && quantity("2").sign() == 1"#);
    yes(r#"quantity("2k").isInteger()"#);
    no(r#"quantity("1500m").isInteger()"#);
    assert!(
        runtime_error(r#"quantity("1500m").asInteger() == 1"#)
            .contains("cannot convert value to integer")
    );
    assert!(
        runtime_error(r#"quantity("1x") == quantity("1")"#)
            .contains("quantities must match the regular expression")
    );
}

#[test]
fn semver_library_and_version_attributes() {
    yes(r#"device.attributes["dra.example.com"].driverVersion == semver("1.2.3")"#);
    yes(r#"device.attributes["dra.example.com"].driverVersion.isGreaterThan(semver("1.2.0"))"#);
    yes(r#"device.attributes["dra.example.com"].driverVersion.isLessThan(semver("1.10.0"))"#);
    yes(r#"device.attributes["dra.example.com"].driverVersion.major() == 1"#);
    yes(r#"device.attributes["dra.example.com"].driverVersion.minor() == 2"#);
    yes(r#"device.attributes["dra.example.com"].driverVersion.patch() == 3"#);
    yes(r#"semver("1.0.0").compareTo(semver("1.0.0-rc.1")) == 1"#);
    yes(r#"semver("1.0.0-alpha").compareTo(semver("1.0.0-beta")) == -1"#);
    yes(r#"semver("1.0.0+build.1") == semver("1.0.0+build.2")"#);
    yes(r#"semver("2.0.0").compareTo(semver("2.0.0")) == 0"#);
    yes(r#"isSemver("1.2.3")"#);
    no(r#"isSemver("1.2")"#);
    no(r#"isSemver("v1.2.3")"#);
    no(r#"isSemver("01.2.3")"#);
    yes(r#"isSemver("v1.2", true)"#);
    yes(r#"semver("v01.2", true) == semver("1.2.0")"#);
    assert!(runtime_error(r#"semver("1.2") == semver("1.2.0")"#).contains("semver"));
}

#[test]
fn a_missing_name_is_no_such_key() {
    let message = runtime_error(r#"device.attributes["dra.example.com"].color == "red""#);
    assert!(message.starts_with("no such key: color"), "{message}");
    assert!(
        message.contains("consider using CEL optional chaining"),
        "{message}"
    );
    let message = runtime_error(r#"device.attributes["unknown.example.com"].model == "a100""#);
    assert!(message.starts_with("no such key: model"), "{message}");
    let message =
        runtime_error(r#"device.capacity["dra.example.com"].cores.isGreaterThan(quantity("1"))"#);
    assert!(message.starts_with("no such key: cores"), "{message}");
}

#[test]
fn a_result_that_is_no_bool_is_an_error() {
    let message = runtime_error(r#"device.attributes["dra.example.com"].numa"#);
    assert_eq!(
        message,
        "CEL result of type int could not be converted to bool"
    );
    let message = runtime_error(r#"device.driver"#);
    assert_eq!(
        message,
        "CEL result of type string could not be converted to bool"
    );
}

#[test]
fn errors_name_the_expression() {
    assert!(runtime_error("noSuchVar == 1").contains("undeclared reference to 'noSuchVar'"));
    match eval("device.driver ==") {
        Err(e @ CelError::Compile { .. }) => {
            assert_eq!(e.expression(), "device.driver ==");
            assert!(e.to_string().starts_with("compilation failed: "), "{e}");
        }
        other => panic!("expected a compile error, got {other:?}"),
    }
    let invalid = Device {
        attributes: BTreeMap::from([(
            "driverVersion".into(),
            DeviceAttribute::Version("1.2".into()),
        )]),
        ..gpu()
    };
    let err = SelectorCache::new()
        .get_or_compile("true")
        .device_matches(DRIVER, &invalid)
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("attribute driverVersion: parse semantic version:"),
        "{err}"
    );
}

#[test]
fn expressions_compile_once() {
    let cache = SelectorCache::new();
    let a = cache.get_or_compile("device.driver == \"x\"");
    let b = cache.get_or_compile("device.driver == \"x\"");
    assert!(std::sync::Arc::ptr_eq(&a, &b));
    cache.get_or_compile("true");
    assert_eq!(cache.len(), 2);
}

/// A device of `DRIVER` with attributes `a00`..`a15` in its own domain, one in each of
/// `d0.example.com`..`d7.example.com`, and a string and a bool beside the ints.
fn many_attributes() -> Device {
    let mut attributes: BTreeMap<String, DeviceAttribute> = (0..16)
        .map(|i| (format!("a{i:02}"), DeviceAttribute::Int(i)))
        .chain((0..8).map(|i| (format!("d{i}.example.com/x"), DeviceAttribute::Int(i))))
        .collect();
    attributes.insert(
        "other.example.com/s".into(),
        DeviceAttribute::String("s".into()),
    );
    attributes.insert("other.example.com/b".into(), DeviceAttribute::Bool(true));
    Device {
        attributes,
        ..gpu()
    }
}

fn eval_many(expr: &str) -> Result<bool, CelError> {
    SelectorCache::new()
        .get_or_compile(expr)
        .device_matches(DRIVER, &many_attributes())
}

/// Comprehensions visit a map's keys in order, so a list built from them, and the
/// error a comprehension reports, are the same in every run and on every target (the
/// `cel` crate's own maps follow a std `HashMap`, seeded at random per process).
#[test]
fn comprehensions_visit_keys_in_order() {
    let names: Vec<String> = (0..16).map(|i| format!("\"a{i:02}\"")).collect();
    let expr = format!(
        "device.attributes[\"{DRIVER}\"].map(k, k) == [{}]",
        names.join(", ")
    );
    assert_eq!(eval_many(&expr), Ok(true), "{expr}");
    let domains: Vec<String> = (0..8)
        .map(|i| format!("\"d{i}.example.com\""))
        .chain([format!("\"{DRIVER}\""), "\"other.example.com\"".into()])
        .collect();
    let expr = format!("device.attributes.map(d, d) == [{}]", domains.join(", "));
    assert_eq!(eval_many(&expr), Ok(true), "{expr}");
    let expr =
        r#"device.map(k, k) == ["allowMultipleAllocations", "attributes", "capacity", "driver"]"#;
    assert_eq!(eval_many(expr), Ok(true), "{expr}");
    let expr = r#"device.capacity.map(d, d) == ["dra.example.com", "other.example.com"]"#;
    assert_eq!(eval_many(expr), Ok(true), "{expr}");
    // Both values (`b`, a bool, and `s`, a string) fail the comparison; the error
    // reported is the last key's, every time.
    let expr = r#"device.attributes["other.example.com"].all(k, device.attributes["other.example.com"][k] > 0)"#;
    for _ in 0..8 {
        assert_eq!(
            eval_many(expr),
            Err(CelError::Runtime {
                expression: expr.into(),
                message: "found no matching overload for '_>_' applied to '(string, int)'".into(),
            })
        );
    }
}

/// The maps of `device` are still plain CEL maps to the rest of the language.
#[test]
fn attribute_maps_compare_as_maps() {
    yes(r#"device.attributes["other.example.com"] == {"zone": "east"}"#);
    yes(r#"{"zone": "east"} == device.attributes["other.example.com"]"#);
    no(r#"{"zone": "west"} == device.attributes["other.example.com"]"#);
    yes(r#"device.attributes["other.example.com"] != {}"#);
    yes(r#"size(device.attributes["dra.example.com"]) == 4"#);
    yes(r#""zone" in device.attributes["other.example.com"]"#);
    yes(r#"device.attributes["other.example.com"].exists(k, k == "zone")"#);
    yes(r#"device.attributes["other.example.com"].filter(k, true).size() == 1"#);
    yes(r#"device.attributes["none.example.com"].map(k, k) == []"#);
}
