//! A plugin component's exports, found by name once per module and loaded once per
//! instance: the interfaces every module of its track has, and the optional ones
//! added since (an extension point's interface a module may lack), each from the
//! table of extension points ([`berth_sdk::for_each_extension_point!`]). A module of
//! the current track is called as it is; one of an adapted track (0.7, 0.8) through the
//! adapter ([`super::adapted`]), which the same calls reach.

use wasmtime::Store;
use wasmtime::component::InstancePre;

use super::host_imports::HostCtx;

/// Whether the component exports the interface `berth:scheduler/<kebab>` (of any
/// version: the name lookup that follows is semver-compatible).
fn exports_interface(pre: &InstancePre<HostCtx>, kebab: &str) -> bool {
    let component = pre.component();
    let want = format!("berth:scheduler/{kebab}");
    component
        .component_type()
        .exports(component.engine())
        .any(|(name, _)| name.split('@').next() == Some(want.as_str()))
}

/// What a module's optional interfaces say it implements: (interface, the point
/// names it answered, the names it may answer) for each.
pub(crate) type Implemented = Vec<(&'static str, Vec<String>, &'static [&'static str])>;

/// An interface's exports of one instance: of the current track, or of an adapted
/// one (the calls on it, in [`super::adapted`], take and answer the current track's
/// types either way).
pub(crate) enum Either<'a, C, A7, A8> {
    /// A module of the current track.
    Current(&'a C),
    /// A module of the 0.7 track.
    V0_7(&'a A7),
    /// A module of the 0.8 track.
    V0_8(&'a A8),
}

macro_rules! plugin_exports {
    ( ()
      $( $gen:ident interface $iface:ident {
            points: [ $( $P:ident $pf:ident $pname:literal $pdoc:literal ),* ],
            also: [ $( $A:ident $af:ident $aname:literal $adoc:literal ),* ],
            calls: [ $( $kind:ident $body:tt ),* $(,)? ],
      } )*
    ) => {
        /// Where a module's exports are, found when it loads.
        pub(crate) struct PluginExportsPre {
            pre: InstancePre<HostCtx>,
            plugin: ex::plugin::GuestIndices,
            replica: ex::replica::GuestIndices,
            cycle: ex::cycle::GuestIndices,
            $( $iface: plugin_exports!(@indices $gen $iface), )*
        }

        /// The exports of one instance, as the host calls them.
        pub(crate) struct PluginExports {
            plugin: ex::plugin::Guest,
            replica: ex::replica::Guest,
            cycle: ex::cycle::Guest,
            $( $iface: plugin_exports!(@guest $gen $iface), )*
        }

        impl PluginExportsPre {
            /// Finds every export of WIT 0.7.0 (an error names the one missing) and
            /// each optional one the component has.
            pub(crate) fn new(pre: InstancePre<HostCtx>) -> wasmtime::Result<Self> {
                Ok(PluginExportsPre {
                    plugin: ex::plugin::GuestIndices::new(&pre)?,
                    replica: ex::replica::GuestIndices::new(&pre)?,
                    cycle: ex::cycle::GuestIndices::new(&pre)?,
                    $( $iface: plugin_exports!(@find $gen $iface pre), )*
                    pre,
                })
            }

            /// Instantiates the component in `store`.
            pub(crate) fn instantiate(
                &self,
                store: &mut Store<HostCtx>,
            ) -> wasmtime::Result<PluginExports> {
                let instance = self.pre.instantiate(&mut *store)?;
                Ok(PluginExports {
                    plugin: self.plugin.load(&mut *store, &instance)?,
                    replica: self.replica.load(&mut *store, &instance)?,
                    cycle: self.cycle.load(&mut *store, &instance)?,
                    $( $iface: plugin_exports!(@load $gen self.$iface, store, instance), )*
                })
            }
        }

        impl PluginExports {
            /// `plugin`.
            pub(crate) fn plugin(&self) -> &ex::plugin::Guest {
                &self.plugin
            }

            /// `replica`.
            pub(crate) fn replica(&self) -> &ex::replica::Guest {
                &self.replica
            }

            /// `cycle`.
            pub(crate) fn cycle(&self) -> &ex::cycle::Guest {
                &self.cycle
            }

            $( plugin_exports!(@getter $gen $iface); )*

            /// What the optional interfaces the module exports say it implements,
            /// as (interface, the point names it answered, the names it may answer).
            pub(crate) fn implemented(
                &self,
                store: &mut Store<HostCtx>,
            ) -> wasmtime::Result<Implemented> {
                #[allow(unused_mut, reason = "a table without optional rows pushes nothing")]
                let mut out = Vec::new();
                $( plugin_exports!(@implemented $gen $iface self store out [ $( $pname )* $( $aname )* ]); )*
                Ok(out)
            }
        }
    };
    (@indices optional $iface:ident) => { Option<ex::$iface::GuestIndices> };
    (@indices $gen:ident $iface:ident) => { ex::$iface::GuestIndices };
    (@guest optional $iface:ident) => { Option<ex::$iface::Guest> };
    (@guest $gen:ident $iface:ident) => { ex::$iface::Guest };
    (@find optional $iface:ident $pre:ident) => {
        if exports_interface(&$pre, &stringify!($iface).replace('_', "-")) {
            Some(ex::$iface::GuestIndices::new(&$pre)?)
        } else {
            None
        }
    };
    (@find $gen:ident $iface:ident $pre:ident) => { ex::$iface::GuestIndices::new(&$pre)? };
    (@load optional $indices:expr, $store:ident, $instance:ident) => {
        match &$indices {
            Some(i) => Some(i.load(&mut *$store, &$instance)?),
            None => None,
        }
    };
    (@load $gen:ident $indices:expr, $store:ident, $instance:ident) => {
        $indices.load(&mut *$store, &$instance)?
    };
    (@getter optional $iface:ident) => {
        #[doc = concat!("`", stringify!($iface), "`, an optional export.")]
        pub(crate) fn $iface(&self) -> wasmtime::Result<&ex::$iface::Guest> {
            self.$iface.as_ref().ok_or_else(|| {
                wasmtime::format_err!(
                    "the module does not export berth:scheduler/{}",
                    stringify!($iface).replace('_', "-")
                )
            })
        }
    };
    (@getter $gen:ident $iface:ident) => {
        #[doc = concat!("`", stringify!($iface), "`.")]
        pub(crate) fn $iface(&self) -> wasmtime::Result<&ex::$iface::Guest> {
            Ok(&self.$iface)
        }
    };
    (@implemented optional $iface:ident $self:ident $store:ident $out:ident [ $( $name:literal )* ]) => {
        if let Some(g) = &$self.$iface {
            let names = g.call_implemented(&mut *$store)?;
            $out.push((stringify!($iface), names, &[ $( $name ),* ] as &'static [&'static str]));
        }
    };
    (@implemented $gen:ident $iface:ident $self:ident $store:ident $out:ident [ $( $name:literal )* ]) => {};
}

/// The exports of a module of the current track.
mod current {
    use super::super::bindings::exports::berth::scheduler as ex;
    use super::*;
    berth_sdk::for_each_extension_point!(plugin_exports);
}

/// The exports of a module of the 0.7 track.
mod v0_7 {
    use super::super::adapted::exports07 as ex;
    use super::*;
    berth_sdk::for_each_extension_point!(plugin_exports);
}

/// The exports of a module of the 0.8 track.
mod v0_8 {
    use super::super::adapted::exports08 as ex;
    use super::*;
    berth_sdk::for_each_extension_point!(plugin_exports);
}

/// Where a module's exports are, of its track.
pub(crate) enum PluginExportsPre {
    Current(current::PluginExportsPre),
    V0_7(v0_7::PluginExportsPre),
    V0_8(v0_8::PluginExportsPre),
}

/// The exports of one instance, of its module's track.
pub(crate) enum PluginExports {
    Current(current::PluginExports),
    V0_7(v0_7::PluginExports),
    V0_8(v0_8::PluginExports),
}

impl PluginExportsPre {
    /// Finds every export a module of `track` has (an error names the one missing)
    /// and each optional one the component has: `None` is the current track, else
    /// an adapted one.
    pub(crate) fn new(pre: InstancePre<HostCtx>, track: Option<&str>) -> wasmtime::Result<Self> {
        match track {
            None => Ok(PluginExportsPre::Current(current::PluginExportsPre::new(
                pre,
            )?)),
            Some("0.7") => Ok(PluginExportsPre::V0_7(v0_7::PluginExportsPre::new(pre)?)),
            Some("0.8") => Ok(PluginExportsPre::V0_8(v0_8::PluginExportsPre::new(pre)?)),
            Some(other) => Err(wasmtime::format_err!(
                "this host has no adapter for the {other} track"
            )),
        }
    }

    /// Instantiates the component in `store`.
    pub(crate) fn instantiate(
        &self,
        store: &mut Store<HostCtx>,
    ) -> wasmtime::Result<PluginExports> {
        Ok(match self {
            PluginExportsPre::Current(p) => PluginExports::Current(p.instantiate(store)?),
            PluginExportsPre::V0_7(p) => PluginExports::V0_7(p.instantiate(store)?),
            PluginExportsPre::V0_8(p) => PluginExports::V0_8(p.instantiate(store)?),
        })
    }
}

/// Each interface of the table's getter on [`PluginExports`]: only the interface's
/// name is read of a row.
macro_rules! either_getters {
    ( () $( $gen:ident interface $iface:ident $row:tt )* ) => {
        impl PluginExports {
            $(
                #[doc = concat!("`", stringify!($iface), "`, of the module's track.")]
                pub(crate) fn $iface(
                    &self,
                ) -> wasmtime::Result<tracks!($iface)> {
                    Ok(match self {
                        PluginExports::Current(e) => Either::Current(e.$iface()?),
                        PluginExports::V0_7(e) => Either::V0_7(e.$iface()?),
                        PluginExports::V0_8(e) => Either::V0_8(e.$iface()?),
                    })
                }
            )*
        }
    };
}

use super::adapted::exports07 as v0_7_ex;
use super::adapted::exports08 as v0_8_ex;
use super::bindings::exports::berth::scheduler as current_ex;

/// An interface's exports of one instance, of any track.
macro_rules! tracks {
    ($iface:ident) => {
        Either<'_, current_ex::$iface::Guest, v0_7_ex::$iface::Guest, v0_8_ex::$iface::Guest>
    };
}

berth_sdk::for_each_extension_point!(either_getters);

impl PluginExports {
    /// `plugin`.
    pub(crate) fn plugin(&self) -> tracks!(plugin) {
        match self {
            PluginExports::Current(e) => Either::Current(e.plugin()),
            PluginExports::V0_7(e) => Either::V0_7(e.plugin()),
            PluginExports::V0_8(e) => Either::V0_8(e.plugin()),
        }
    }

    /// `replica`.
    pub(crate) fn replica(&self) -> tracks!(replica) {
        match self {
            PluginExports::Current(e) => Either::Current(e.replica()),
            PluginExports::V0_7(e) => Either::V0_7(e.replica()),
            PluginExports::V0_8(e) => Either::V0_8(e.replica()),
        }
    }

    /// `cycle`.
    pub(crate) fn cycle(&self) -> tracks!(cycle) {
        match self {
            PluginExports::Current(e) => Either::Current(e.cycle()),
            PluginExports::V0_7(e) => Either::V0_7(e.cycle()),
            PluginExports::V0_8(e) => Either::V0_8(e.cycle()),
        }
    }

    /// What the optional interfaces the module exports say it implements,
    /// as (interface, the point names it answered, the names it may answer).
    pub(crate) fn implemented(&self, store: &mut Store<HostCtx>) -> wasmtime::Result<Implemented> {
        match self {
            PluginExports::Current(e) => e.implemented(store),
            PluginExports::V0_7(e) => e.implemented(store),
            PluginExports::V0_8(e) => e.implemented(store),
        }
    }
}
