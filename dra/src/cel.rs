//! CEL device selectors: the environment a selector sees, compiled once per
//! expression and evaluated against one device at a time.
//!
//! A selector sees one variable, `device`, as upstream's `cel/compile.go` declares it:
//!
//! - `device.driver`: the driver's name;
//! - `device.attributes["<domain>"].<name>`: the attribute's value (`int`, `bool`,
//!   `string`, or a semantic version for `version`); an attribute named without a
//!   domain belongs to the driver's;
//! - `device.capacity["<domain>"].<name>`: the capacity as a quantity;
//! - `device.allowMultipleAllocations`.
//!
//! As upstream, a domain the device has nothing in reads as an empty map, so both a
//! missing domain and a missing name end in a "no such key" runtime error (which
//! `has()` and `.?` turn into `false` and `optional.none()`).
//!
//! Besides CEL's standard library and the `cel` crate's strings, lists and math
//! extensions, the environment has Kubernetes' quantity library (`quantity()`,
//! `isQuantity()`, `compareTo`, `isGreaterThan`, `isLessThan`, `add`, `sub`,
//! `asInteger`, `asApproximateFloat`, `sign`, `isInteger`, `==`) and semver library
//! (`semver()`, `isSemver()`, `major`, `minor`, `patch`, `compareTo`,
//! `isGreaterThan`, `isLessThan`, `==`).

use berth_sdk::dra::{Device, DeviceAttribute};
use berth_sdk::quantity::{Amount, Format, Quantity};
use cel::common::traits::{self, Container, Indexer, Iterable, Sizer, Zeroer};
use cel::common::types::{
    BOOL_TYPE, CelBool, CelDouble, CelInt, CelMap, CelMapKey, CelString, INT_TYPE, Kind,
    STRING_TYPE, Type,
};
use cel::common::value::{Builtin, BuiltinRef, CowVal, StaticVal, Val};
use cel::{Context, Env, ExecutionError, Program, Value};
use std::any::Any;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The CEL type of quantities, as Kubernetes names it.
static QUANTITY_TYPE: Type = Type::simple_type(Kind::Opaque, "kubernetes.Quantity");
/// The CEL type of semantic versions, as Kubernetes names it.
static SEMVER_TYPE: Type = Type::simple_type(Kind::Opaque, "kubernetes.Semver");

/// What upstream appends to a "no such key" error.
const NO_SUCH_KEY_HINT: &str = ". consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() for optional fields";

/// Why a selector could not be evaluated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CelError {
    /// The expression does not compile.
    Compile {
        /// The expression.
        expression: String,
        /// The parser's message.
        message: String,
    },
    /// Evaluating the expression failed, or it did not yield a bool.
    Runtime {
        /// The expression.
        expression: String,
        /// What went wrong.
        message: String,
    },
}

impl CelError {
    /// The expression the error is about.
    pub fn expression(&self) -> &str {
        match self {
            CelError::Compile { expression, .. } | CelError::Runtime { expression, .. } => {
                expression
            }
        }
    }
}

impl std::fmt::Display for CelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CelError::Compile { message, .. } => write!(f, "compilation failed: {message}"),
            CelError::Runtime { message, .. } => f.write_str(message),
        }
    }
}

impl std::error::Error for CelError {}

/// A compiled selector.
pub struct CompiledSelector {
    expression: String,
    program: Result<Program, CelError>,
    env: Arc<Env>,
}

impl std::fmt::Debug for CompiledSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledSelector")
            .field("expression", &self.expression)
            .field("compiles", &self.program.is_ok())
            .finish()
    }
}

impl CompiledSelector {
    /// The expression as written.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// The compile error, if the expression does not compile.
    pub fn compile_error(&self) -> Option<&CelError> {
        self.program.as_ref().err()
    }

    /// Whether the device of this driver matches: the expression's bool, or an error
    /// when it does not compile, fails at run time or yields no bool.
    pub fn device_matches(&self, driver: &str, device: &Device) -> Result<bool, CelError> {
        let program = self.program.as_ref().map_err(Clone::clone)?;
        let runtime = |message: String| CelError::Runtime {
            expression: self.expression.clone(),
            message,
        };
        let input = device_value(driver, device).map_err(runtime)?;
        let mut context = Context::with_env(self.env.clone());
        context.add_variable_as_val("device", Box::new(input));
        match program.execute(&context) {
            Ok(Value::Bool(b)) => Ok(b),
            Ok(other) => Err(runtime(format!(
                "CEL result of type {} could not be converted to bool",
                other.type_of()
            ))),
            Err(e) => Err(runtime(runtime_message(&e))),
        }
    }
}

/// Upstream's wording for the runtime errors a selector most often meets.
fn runtime_message(e: &ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchKey(key) => format!("no such key: {key}{NO_SUCH_KEY_HINT}"),
        ExecutionError::UndeclaredReference(name) => format!("undeclared reference to '{name}'"),
        other => other.to_string(),
    }
}

/// Compiles selectors once per expression text and keeps them (upstream's
/// `cel.Cache`). Shared by every allocation; safe to use from several threads.
pub struct SelectorCache {
    env: Arc<Env>,
    compiled: Mutex<HashMap<String, Arc<CompiledSelector>>>,
}

impl std::fmt::Debug for SelectorCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SelectorCache")
            .field("expressions", &self.len())
            .finish()
    }
}

impl Default for SelectorCache {
    fn default() -> Self {
        SelectorCache::new()
    }
}

impl SelectorCache {
    /// An empty cache with the DRA environment.
    pub fn new() -> SelectorCache {
        SelectorCache {
            env: Arc::new(environment()),
            compiled: Mutex::new(HashMap::new()),
        }
    }

    /// The compiled expression, compiling it on first use.
    pub fn get_or_compile(&self, expression: &str) -> Arc<CompiledSelector> {
        let mut compiled = self.compiled.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = compiled.get(expression) {
            return c.clone();
        }
        let program = self.env.compile(expression).map_err(|e| CelError::Compile {
            expression: expression.to_owned(),
            message: e.to_string(),
        });
        let c = Arc::new(CompiledSelector {
            expression: expression.to_owned(),
            program,
            env: self.env.clone(),
        });
        compiled.insert(expression.to_owned(), c.clone());
        c
    }

    /// How many expressions are compiled.
    pub fn len(&self) -> usize {
        self.compiled
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }

    /// Whether nothing is compiled yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The environment: the standard library, the crate's extensions, and Kubernetes'
/// quantity and semver libraries.
fn environment() -> Env {
    let mut env = Env::stdlib();
    // These registrations only fail on duplicate names, which would be a bug here.
    env.add_extension(cel::extensions::strings)
        .expect("strings extension");
    env.add_extension(cel::extensions::lists)
        .expect("lists extension");
    env.add_extension(cel::extensions::math)
        .expect("math extension");
    env.add_extension(quantity_library)
        .expect("quantity library");
    env.add_extension(semver_library).expect("semver library");
    env
}

/// Splits a qualified name into domain and name; a bare name is the driver's.
fn qualified<'a>(name: &'a str, driver: &'a str) -> (&'a str, &'a str) {
    match name.split_once('/') {
        Some((domain, id)) => (domain, id),
        None => (driver, name),
    }
}

/// The `device` variable for one device.
fn device_value(driver: &str, device: &Device) -> Result<OrderedMap, String> {
    let mut attributes: HashMap<String, HashMap<CelMapKey<'static>, Box<dyn Val>>> = HashMap::new();
    for (name, attribute) in &device.attributes {
        let value: Box<dyn Val> = match attribute {
            DeviceAttribute::Int(i) => Box::new(CelInt::from(*i)),
            DeviceAttribute::Bool(b) => Box::new(CelBool::from(*b)),
            DeviceAttribute::String(s) => Box::new(CelString::from(s.clone())),
            DeviceAttribute::Version(v) => Box::new(
                SemverVal::parse(v)
                    .map_err(|e| format!("attribute {name}: parse semantic version: {e}"))?,
            ),
        };
        let (domain, id) = qualified(name, driver);
        attributes
            .entry(domain.to_owned())
            .or_default()
            .insert(CelMapKey::from(id.to_owned()), value);
    }
    let mut capacity: HashMap<String, HashMap<CelMapKey<'static>, Box<dyn Val>>> = HashMap::new();
    for (name, cap) in &device.capacity {
        let value = QuantityVal::parse(&cap.value).map_err(|e| format!("capacity {name}: {e}"))?;
        let (domain, id) = qualified(name, driver);
        capacity
            .entry(domain.to_owned())
            .or_default()
            .insert(CelMapKey::from(id.to_owned()), Box::new(value));
    }
    let nest = |m: HashMap<String, HashMap<CelMapKey<'static>, Box<dyn Val>>>| {
        DomainMap(OrderedMap(CelMap::from(
            m.into_iter()
                .map(|(k, v)| {
                    (
                        CelMapKey::from(k),
                        Box::new(OrderedMap(CelMap::from(v))) as Box<dyn Val>,
                    )
                })
                .collect::<HashMap<_, _>>(),
        )))
    };
    let fields: HashMap<CelMapKey<'static>, Box<dyn Val>> = HashMap::from([
        (
            CelMapKey::from("driver".to_owned()),
            Box::new(CelString::from(driver.to_owned())) as Box<dyn Val>,
        ),
        (
            CelMapKey::from("allowMultipleAllocations".to_owned()),
            Box::new(CelBool::from(device.allow_multiple_allocations)),
        ),
        (
            CelMapKey::from("attributes".to_owned()),
            Box::new(nest(attributes)),
        ),
        (
            CelMapKey::from("capacity".to_owned()),
            Box::new(nest(capacity)),
        ),
    ]);
    Ok(OrderedMap(CelMap::from(fields)))
}

/// A CEL map whose comprehensions (`all`, `exists`, `map`, `filter`, ...) visit its
/// keys in order. The `cel` crate's maps visit them in the order of a std `HashMap`,
/// seeded at random in every native process (and otherwise in the guest): a list
/// built from the keys, and which error a comprehension reports, would change from
/// run to run and between a twin and its component. (Upstream's order, a Go map's,
/// is random too.) To the rest of the language it is the crate's map, `==` from
/// either side and conversions included, hence the built-in views (`as_builtin`,
/// hidden in the crate's docs: `attribute_maps_compare_as_maps` checks them).
#[derive(Debug, Clone)]
struct OrderedMap(CelMap<'static>);

impl Val for OrderedMap {
    fn get_type(&self) -> &Type {
        self.0.get_type()
    }

    fn cel_type() -> &'static Type {
        <CelMap<'static> as Val>::cel_type()
    }

    fn as_container(&self) -> Option<&dyn Container> {
        self.0.as_container()
    }

    fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn Indexer + 'v)>
    where
        Self: 'v,
    {
        self.0.as_indexer()
    }

    fn into_indexer<'v>(self: Box<Self>) -> Option<Box<dyn Indexer + 'v>>
    where
        Self: 'v,
    {
        Box::new(self.0).into_indexer()
    }

    fn as_iterable<'b, 'v>(&'b self) -> Option<&'b (dyn Iterable + 'v)>
    where
        Self: 'v,
    {
        Some(self)
    }

    fn as_sizer(&self) -> Option<&dyn Sizer> {
        self.0.as_sizer()
    }

    fn as_zeroer(&self) -> Option<&dyn Zeroer> {
        self.0.as_zeroer()
    }

    fn equals(&self, other: &dyn Val) -> bool {
        self.0.equals(other)
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }

    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }

    fn as_builtin<'b, 'v>(&'b self) -> BuiltinRef<'b, 'v>
    where
        Self: 'v,
    {
        BuiltinRef::Map(&self.0)
    }

    fn into_builtin<'v>(self: Box<Self>) -> Option<Builtin<'v>>
    where
        Self: 'v,
    {
        Some(Builtin::Map(self.0))
    }
}

impl StaticVal for OrderedMap {}

impl Iterable for OrderedMap {
    fn iter<'b, 'v>(&'b self) -> Box<dyn traits::Iterator<'b, 'v> + 'b>
    where
        Self: 'v,
    {
        // Sorted when a comprehension asks, which selectors seldom do: building the
        // map for every device costs nothing more. Keys are unique, so no ties.
        let mut keys: Vec<&'b CelMapKey<'static>> = self.0.inner().keys().collect();
        keys.sort_unstable();
        Box::new(SortedKeys(keys.into_iter()))
    }
}

/// The keys of an [`OrderedMap`], in order.
struct SortedKeys<'b>(std::vec::IntoIter<&'b CelMapKey<'static>>);

impl<'b, 'v> traits::Iterator<'b, 'v> for SortedKeys<'b> {
    fn next(&mut self) -> Option<&'b (dyn Val + 'v)> {
        self.0.next().map(|k| k.inner())
    }
}

/// `device.attributes` and `device.capacity`: a map by domain that reads an unknown
/// domain as an empty map, as upstream's `newStringInterfaceMapWithDefault`.
#[derive(Debug, Clone)]
struct DomainMap(OrderedMap);

impl Val for DomainMap {
    fn get_type(&self) -> &Type {
        self.0.get_type()
    }

    fn cel_type() -> &'static Type {
        <CelMap<'static> as Val>::cel_type()
    }

    fn as_container(&self) -> Option<&dyn Container> {
        self.0.as_container()
    }

    fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn Indexer + 'v)>
    where
        Self: 'v,
    {
        Some(self)
    }

    fn as_iterable<'b, 'v>(&'b self) -> Option<&'b (dyn Iterable + 'v)>
    where
        Self: 'v,
    {
        self.0.as_iterable()
    }

    fn as_sizer(&self) -> Option<&dyn Sizer> {
        self.0.as_sizer()
    }

    fn equals(&self, other: &dyn Val) -> bool {
        match other.downcast_ref::<DomainMap>() {
            Some(o) => self.0.equals(&o.0),
            None => self.0.equals(other),
        }
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }

    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}

impl StaticVal for DomainMap {}

impl Indexer for DomainMap {
    fn get<'b, 'v>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        let inner = self
            .0
            .as_indexer()
            .expect("a CEL map is indexable")
            .get(idx);
        match inner {
            Err(ExecutionError::NoSuchKey(_)) => Ok(CowVal::owned(CelMap::default())),
            other => other,
        }
    }

    fn steal<'v>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'v>, ExecutionError>
    where
        Self: 'v,
    {
        self.get(idx).map(CowVal::into_owned)
    }
}

/// A quantity as a CEL value (`kubernetes.Quantity`).
#[derive(Debug, Clone)]
pub struct QuantityVal {
    amount: Amount,
}

impl QuantityVal {
    /// Parses a quantity.
    pub fn parse(q: &Quantity) -> Result<QuantityVal, berth_sdk::quantity::QuantityError> {
        Ok(QuantityVal {
            amount: q.amount()?,
        })
    }

    /// The quantity, in Kubernetes' text.
    pub fn quantity(&self) -> Quantity {
        self.amount.to_quantity()
    }
}

impl Val for QuantityVal {
    fn get_type(&self) -> &Type {
        &QUANTITY_TYPE
    }

    fn cel_type() -> &'static Type {
        &QUANTITY_TYPE
    }

    fn equals(&self, other: &dyn Val) -> bool {
        other
            .downcast_ref::<QuantityVal>()
            .is_some_and(|o| o.amount == self.amount)
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }

    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}

impl StaticVal for QuantityVal {}

/// A semantic version as a CEL value (`kubernetes.Semver`).
#[derive(Debug, Clone)]
pub struct SemverVal(semver::Version);

impl SemverVal {
    /// Parses a strict semantic version (`1.2.3`, `1.2.3-rc.1+build`), as
    /// `blang/semver`'s `Parse`.
    pub fn parse(s: &str) -> Result<SemverVal, String> {
        semver::Version::parse(s)
            .map(SemverVal)
            .map_err(|e| e.to_string())
    }

    /// Order by precedence: build metadata does not count.
    fn precedence(&self, other: &SemverVal) -> Ordering {
        let (a, b) = (&self.0, &other.0);
        (a.major, a.minor, a.patch, &a.pre).cmp(&(b.major, b.minor, b.patch, &b.pre))
    }
}

impl Val for SemverVal {
    fn get_type(&self) -> &Type {
        &SEMVER_TYPE
    }

    fn cel_type() -> &'static Type {
        &SEMVER_TYPE
    }

    fn equals(&self, other: &dyn Val) -> bool {
        other
            .downcast_ref::<SemverVal>()
            .is_some_and(|o| self.precedence(o) == Ordering::Equal)
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }

    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}

impl StaticVal for SemverVal {}

/// The argument at `i` as a `T` the overload was declared for.
fn arg<'a, 'b, 'v, T: StaticVal>(
    args: &'a [CowVal<'b, 'v>],
    i: usize,
    function: &str,
) -> Result<&'a T, ExecutionError> {
    args.get(i)
        .and_then(|a| {
            let v: &'a (dyn Val + 'v) = &**a;
            v.downcast_ref::<T>()
        })
        .ok_or_else(|| ExecutionError::function_error(function, "unexpected argument type"))
}

fn string_arg<'a, 'b, 'v>(
    args: &'a [CowVal<'b, 'v>],
    i: usize,
    function: &str,
) -> Result<&'a str, ExecutionError> {
    args.get(i)
        .and_then(|a| {
            let v: &'a (dyn Val + 'v) = &**a;
            v.downcast_ref::<CelString>().map(|s| s.inner())
        })
        .ok_or_else(|| ExecutionError::function_error(function, "expected a string"))
}

fn bool_arg(args: &[CowVal<'_, '_>], i: usize, function: &str) -> Result<bool, ExecutionError> {
    args.get(i)
        .and_then(|a| a.downcast_ref::<CelBool>().map(|b| *b.inner()))
        .ok_or_else(|| ExecutionError::function_error(function, "expected a bool"))
}

fn int_arg(args: &[CowVal<'_, '_>], i: usize, function: &str) -> Result<i64, ExecutionError> {
    args.get(i)
        .and_then(|a| a.downcast_ref::<CelInt>().map(|b| *b.inner()))
        .ok_or_else(|| ExecutionError::function_error(function, "expected an int"))
}

fn ordering_int(o: Ordering) -> CelInt {
    CelInt::from(match o {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    })
}

/// Kubernetes' quantity library (`k8s.io/apiserver/pkg/cel/library/quantity.go`).
fn quantity_library(env: &mut Env) -> Result<(), cel::DeclarationError> {
    let q = || QUANTITY_TYPE.to_owned();
    env.add_type(q())?;
    env.add_overload(
        "quantity",
        "string_to_quantity",
        vec![STRING_TYPE],
        |args| {
            let s = string_arg(&args, 0, "quantity")?;
            let amount = s
                .parse::<Amount>()
                .map_err(|e| ExecutionError::function_error("quantity", e))?;
            Ok(CowVal::owned(QuantityVal { amount }))
        },
    )?;
    env.add_overload(
        "isQuantity",
        "is_quantity_string",
        vec![STRING_TYPE],
        |args| {
            let s = string_arg(&args, 0, "isQuantity")?;
            Ok(CowVal::owned(CelBool::from(s.parse::<Amount>().is_ok())))
        },
    )?;
    env.add_member_overload("sign", "quantity_sign", q(), vec![], |args| {
        let a = arg::<QuantityVal>(&args, 0, "sign")?;
        Ok(CowVal::owned(CelInt::from(a.amount.signum())))
    })?;
    env.add_member_overload("isInteger", "quantity_is_integer", q(), vec![], |args| {
        let a = arg::<QuantityVal>(&args, 0, "isInteger")?;
        Ok(CowVal::owned(CelBool::from(a.amount.as_int64().is_some())))
    })?;
    env.add_member_overload("asInteger", "quantity_get_int", q(), vec![], |args| {
        let a = arg::<QuantityVal>(&args, 0, "asInteger")?;
        let i = a.amount.as_int64().ok_or_else(|| {
            ExecutionError::function_error("asInteger", "cannot convert value to integer")
        })?;
        Ok(CowVal::owned(CelInt::from(i)))
    })?;
    env.add_member_overload(
        "asApproximateFloat",
        "quantity_get_float",
        q(),
        vec![],
        |args| {
            let a = arg::<QuantityVal>(&args, 0, "asApproximateFloat")?;
            Ok(CowVal::owned(CelDouble::from(a.amount.as_f64())))
        },
    )?;
    env.add_member_overload("compareTo", "quantity_compare_to", q(), vec![q()], |args| {
        let a = arg::<QuantityVal>(&args, 0, "compareTo")?;
        let b = arg::<QuantityVal>(&args, 1, "compareTo")?;
        Ok(CowVal::owned(ordering_int(a.amount.cmp(&b.amount))))
    })?;
    env.add_member_overload(
        "isGreaterThan",
        "quantity_greater",
        q(),
        vec![q()],
        |args| {
            let a = arg::<QuantityVal>(&args, 0, "isGreaterThan")?;
            let b = arg::<QuantityVal>(&args, 1, "isGreaterThan")?;
            Ok(CowVal::owned(CelBool::from(a.amount > b.amount)))
        },
    )?;
    env.add_member_overload("isLessThan", "quantity_less", q(), vec![q()], |args| {
        let a = arg::<QuantityVal>(&args, 0, "isLessThan")?;
        let b = arg::<QuantityVal>(&args, 1, "isLessThan")?;
        Ok(CowVal::owned(CelBool::from(a.amount < b.amount)))
    })?;
    fn combine(
        args: &[CowVal<'_, '_>],
        function: &str,
        sub: bool,
    ) -> Result<QuantityVal, ExecutionError> {
        let a = arg::<QuantityVal>(args, 0, function)?;
        let b = match arg::<QuantityVal>(args, 1, function) {
            Ok(b) => b.amount,
            Err(_) => Amount::from_int(int_arg(args, 1, function)?, Format::DecimalSi),
        };
        let r = if sub {
            a.amount.checked_sub(&b)
        } else {
            a.amount.checked_add(&b)
        };
        r.map(|amount| QuantityVal { amount })
            .ok_or_else(|| ExecutionError::function_error(function, "quantity overflow"))
    }
    env.add_member_overload("add", "quantity_add", q(), vec![q()], |args| {
        combine(&args, "add", false).map(CowVal::owned)
    })?;
    env.add_member_overload("add", "quantity_add_int", q(), vec![INT_TYPE], |args| {
        combine(&args, "add", false).map(CowVal::owned)
    })?;
    env.add_member_overload("sub", "quantity_sub", q(), vec![q()], |args| {
        combine(&args, "sub", true).map(CowVal::owned)
    })?;
    env.add_member_overload("sub", "quantity_sub_int", q(), vec![INT_TYPE], |args| {
        combine(&args, "sub", true).map(CowVal::owned)
    })?;
    Ok(())
}

/// Kubernetes' "normalize" of a version string for `semver(s, true)`: no leading
/// `v`, missing minor and patch filled with zero, no leading zeros in the numbers.
fn normalize_version(s: &str) -> String {
    let s = s.strip_prefix('v').unwrap_or(s);
    let split = s.find(['-', '+']).unwrap_or(s.len());
    let (core, rest) = s.split_at(split);
    let mut parts: Vec<String> = core
        .split('.')
        .map(|p| {
            let t = p.trim_start_matches('0');
            if t.is_empty() && !p.is_empty() {
                "0".to_owned()
            } else {
                t.to_owned()
            }
        })
        .collect();
    while parts.len() < 3 {
        parts.push("0".to_owned());
    }
    format!("{}{rest}", parts.join("."))
}

/// Kubernetes' semver library (`k8s.io/apiserver/pkg/cel/library/semverlib.go`).
fn semver_library(env: &mut Env) -> Result<(), cel::DeclarationError> {
    let v = || SEMVER_TYPE.to_owned();
    env.add_type(v())?;
    fn parse(args: &[CowVal<'_, '_>], normalize: bool) -> Result<SemverVal, ExecutionError> {
        let s = string_arg(args, 0, "semver")?;
        let normalize = normalize && bool_arg(args, 1, "semver")?;
        let text = if normalize {
            normalize_version(s)
        } else {
            s.to_owned()
        };
        SemverVal::parse(&text).map_err(|e| ExecutionError::function_error("semver", e))
    }
    env.add_overload("semver", "string_to_semver", vec![STRING_TYPE], |args| {
        parse(&args, false).map(CowVal::owned)
    })?;
    env.add_overload(
        "semver",
        "string_bool_to_semver",
        vec![STRING_TYPE, BOOL_TYPE],
        |args| parse(&args, true).map(CowVal::owned),
    )?;
    env.add_overload("isSemver", "is_semver_string", vec![STRING_TYPE], |args| {
        Ok(CowVal::owned(CelBool::from(parse(&args, false).is_ok())))
    })?;
    env.add_overload(
        "isSemver",
        "is_semver_string_bool",
        vec![STRING_TYPE, BOOL_TYPE],
        |args| Ok(CowVal::owned(CelBool::from(parse(&args, true).is_ok()))),
    )?;
    env.add_member_overload("major", "semver_major", v(), vec![], |args| {
        let a = arg::<SemverVal>(&args, 0, "major")?;
        Ok(CowVal::owned(CelInt::from(a.0.major as i64)))
    })?;
    env.add_member_overload("minor", "semver_minor", v(), vec![], |args| {
        let a = arg::<SemverVal>(&args, 0, "minor")?;
        Ok(CowVal::owned(CelInt::from(a.0.minor as i64)))
    })?;
    env.add_member_overload("patch", "semver_patch", v(), vec![], |args| {
        let a = arg::<SemverVal>(&args, 0, "patch")?;
        Ok(CowVal::owned(CelInt::from(a.0.patch as i64)))
    })?;
    env.add_member_overload("compareTo", "semver_compare_to", v(), vec![v()], |args| {
        let a = arg::<SemverVal>(&args, 0, "compareTo")?;
        let b = arg::<SemverVal>(&args, 1, "compareTo")?;
        Ok(CowVal::owned(ordering_int(a.precedence(b))))
    })?;
    env.add_member_overload("isGreaterThan", "semver_greater", v(), vec![v()], |args| {
        let a = arg::<SemverVal>(&args, 0, "isGreaterThan")?;
        let b = arg::<SemverVal>(&args, 1, "isGreaterThan")?;
        Ok(CowVal::owned(CelBool::from(
            a.precedence(b) == Ordering::Greater,
        )))
    })?;
    env.add_member_overload("isLessThan", "semver_less", v(), vec![v()], |args| {
        let a = arg::<SemverVal>(&args, 0, "isLessThan")?;
        let b = arg::<SemverVal>(&args, 1, "isLessThan")?;
        Ok(CowVal::owned(CelBool::from(
            a.precedence(b) == Ordering::Less,
        )))
    })?;
    Ok(())
}
