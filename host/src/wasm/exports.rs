//! A plugin component's exports, found by name once per module and loaded once per
//! instance: the interfaces of WIT 0.7.0, which every module has, and the optional
//! ones added since (an extension point's interface a module may lack), each from
//! the table of extension points ([`berth_sdk::for_each_extension_point!`]).

use wasmtime::Store;
use wasmtime::component::InstancePre;

use super::bindings::exports::berth::scheduler as ex;
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
            ) -> wasmtime::Result<Vec<(&'static str, Vec<String>, &'static [&'static str])>> {
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

berth_sdk::for_each_extension_point!(plugin_exports);
