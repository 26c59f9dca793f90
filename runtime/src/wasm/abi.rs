//! Which versions of the `berth:scheduler` WIT package this host loads modules of,
//! and why it refuses the others: the plugin ABI's versioning policy, as code (the
//! book's docs/src/plugin-authors/contract.md says it in prose).
//!
//! A version belongs to a compatible track, as wasmtime's semver-compatible name
//! lookup has it (`wasmtime_environ::component::names::alternate_lookup_key`): 0.x
//! versions of one minor (`0.7.0`, `0.7.3`) are one track, 1.x and later one per
//! major. On its own track the WIT only grows (new interfaces and functions, gated
//! `@since` or `@unstable`), so a module built against an older patch links against
//! the host's newer world by name and type. A module of a newer patch may need what
//! this host lacks, and is refused. A module of an earlier track loads only when the
//! host keeps that track's world and an adapter for it ([`ADAPTED_TRACKS`]), and
//! only up to the version of the world kept.

use std::fmt;

/// The WIT package version this host speaks (the `package` line of `wit/`).
pub const WIT_VERSION: &str = "0.9.4";

/// Earlier tracks whose modules this host still loads through an adapter, each by
/// its last version: that version's WIT kept beside the current one
/// (`wit/adapted/`), bound with `bindgen!` too, and its calls adapted to the current
/// world (`berth_runtime::wasm::adapted`). 0.7.1 was the 0.7 track's last package, 0.8.2
/// the 0.8 track's.
pub const ADAPTED_TRACKS: &[&str] = &["0.7.1", "0.8.2"];

/// A `MAJOR.MINOR.PATCH` version, without pre-release or build parts (wasmtime
/// treats a pre-release as compatible with nothing else).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct WitVersion {
    /// Major.
    pub major: u64,
    /// Minor.
    pub minor: u64,
    /// Patch.
    pub patch: u64,
}

impl WitVersion {
    /// Parses `MAJOR.MINOR.PATCH` (decimal numbers, nothing else).
    pub fn parse(s: &str) -> Option<WitVersion> {
        let mut parts = s.split('.');
        let mut number = || {
            let p = parts.next()?;
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            p.parse().ok()
        };
        let v = WitVersion {
            major: number()?,
            minor: number()?,
            patch: number()?,
        };
        parts.next().is_none().then_some(v)
    }

    /// The compatible track, as a version prefix: `0.7` for 0.7.x, `1` for 1.x.y;
    /// a 0.0.x version is a track of its own.
    pub fn track(&self) -> String {
        match (self.major, self.minor) {
            (0, 0) => self.to_string(),
            (0, minor) => format!("0.{minor}"),
            (major, _) => major.to_string(),
        }
    }
}

impl fmt::Display for WitVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Where a module's WIT version stands with a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    /// The host's own version.
    Current,
    /// An older patch of the host's track: linked as is.
    OlderPatch,
    /// An earlier track the host keeps an adapter for.
    Adapted {
        /// The track, e.g. `0.6`.
        track: String,
    },
    /// Not loaded.
    Refused(Refusal),
}

/// Why a version is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Not `MAJOR.MINOR.PATCH`.
    NotAVersion,
    /// A later patch of the host's track: it may use what this host lacks.
    NewerPatch,
    /// An earlier track with no adapter.
    OlderTrack,
    /// A later track than the host's.
    NewerTrack,
    /// A patch of an adapted track later than the version of it the host keeps.
    NewerThanAdapted,
}

/// The versions a host loads: its own, and the tracks it adapts.
#[derive(Debug, Clone)]
pub struct Policy {
    host: WitVersion,
    /// The last version of each adapted track.
    adapted: Vec<WitVersion>,
}

impl Policy {
    /// This host's policy: [`WIT_VERSION`] and [`ADAPTED_TRACKS`].
    pub fn current() -> Policy {
        Policy::new(
            WitVersion::parse(WIT_VERSION).expect("WIT_VERSION is MAJOR.MINOR.PATCH"),
            ADAPTED_TRACKS,
        )
    }

    /// A host of version `host` that adapts the tracks of the `adapted` versions,
    /// each up to that version.
    pub fn new(host: WitVersion, adapted: &[&str]) -> Policy {
        Policy {
            host,
            adapted: adapted
                .iter()
                .map(|a| WitVersion::parse(a).expect("an adapted track's last MAJOR.MINOR.PATCH"))
                .collect(),
        }
    }

    /// The version of `track` the host keeps an adapter for, if any.
    fn adapted_last(&self, track: &str) -> Option<WitVersion> {
        self.adapted.iter().copied().find(|a| a.track() == track)
    }

    /// The host's version.
    pub fn host(&self) -> WitVersion {
        self.host
    }

    /// Where a module built against `theirs` stands.
    pub fn classify(&self, theirs: &str) -> Support {
        let Some(v) = WitVersion::parse(theirs) else {
            return Support::Refused(Refusal::NotAVersion);
        };
        let track = v.track();
        if track == self.host.track() {
            return match v.cmp(&self.host) {
                std::cmp::Ordering::Equal => Support::Current,
                std::cmp::Ordering::Less => Support::OlderPatch,
                std::cmp::Ordering::Greater => Support::Refused(Refusal::NewerPatch),
            };
        }
        if let Some(last) = self.adapted_last(&track) {
            return if v <= last {
                Support::Adapted { track }
            } else {
                Support::Refused(Refusal::NewerThanAdapted)
            };
        }
        Support::Refused(if v > self.host {
            Refusal::NewerTrack
        } else {
            Refusal::OlderTrack
        })
    }

    /// The versions this host loads, e.g. `@0.7.0`, `@0.7.0 to @0.7.2`, or
    /// `@0.7.0 to @0.7.2, and the 0.6 track through an adapter`.
    pub fn supported_range(&self) -> String {
        let h = self.host;
        let first = match (h.major, h.minor) {
            (0, 0) => h,
            (0, minor) => WitVersion {
                major: 0,
                minor,
                patch: 0,
            },
            (major, _) => WitVersion {
                major,
                minor: 0,
                patch: 0,
            },
        };
        let mut s = if first == h {
            format!("@{h}")
        } else {
            format!("@{first} to @{h}")
        };
        let adapted: Vec<String> = self
            .adapted
            .iter()
            .map(|last| {
                let first = WitVersion { patch: 0, ..*last };
                if first == *last {
                    format!("@{last}")
                } else {
                    format!("@{first} to @{last}")
                }
            })
            .collect();
        if !adapted.is_empty() {
            s += &format!(", and {} through an adapter", adapted.join(", "));
        }
        s
    }

    /// Why a module built against `theirs` is refused, naming its version, the
    /// host's and what the host loads.
    pub fn refusal(&self, theirs: &str, why: Refusal) -> String {
        let host = self.host;
        let range = self.supported_range();
        match why {
            Refusal::NotAVersion => format!(
                "built against berth:scheduler@{theirs}, which is not a MAJOR.MINOR.PATCH version; this host speaks @{host} (it loads {range})"
            ),
            Refusal::NewerPatch => format!(
                "built against berth:scheduler@{theirs}, a newer patch than this host's @{host} (it loads {range})"
            ),
            Refusal::NewerThanAdapted => format!(
                "built against berth:scheduler@{theirs}, a later patch than the one of its track this host adapts (it loads {range})"
            ),
            Refusal::OlderTrack | Refusal::NewerTrack => {
                // When the host loads its own version only, "speaks" already is the
                // whole range.
                if range == format!("@{host}") {
                    format!("built against berth:scheduler@{theirs}, this host speaks @{host}")
                } else {
                    format!(
                        "built against berth:scheduler@{theirs}, this host speaks @{host} (it loads {range})"
                    )
                }
            }
        }
    }

    /// What the author of a refused module can do about it.
    pub fn advice(&self, theirs: &str, why: Refusal) -> String {
        let host = self.host;
        match why {
            Refusal::NotAVersion | Refusal::OlderTrack | Refusal::NewerThanAdapted => {
                format!("rebuild it with a berth-sdk for WIT {host}")
            }
            Refusal::NewerPatch | Refusal::NewerTrack => format!(
                "run it on a Berth that speaks @{theirs} or later, or rebuild it with a berth-sdk for WIT {host}"
            ),
        }
    }

    /// What a support means, beyond its [`Support::status`]; none for the current
    /// version.
    pub fn explain(&self, support: &Support) -> Option<String> {
        let track = self.host.track();
        Some(match support {
            Support::Current => return None,
            Support::OlderPatch => format!("an older patch of the {track} track"),
            Support::Adapted { track } => format!("the earlier {track} track, through an adapter"),
            Support::Refused(Refusal::NotAVersion) => "not a MAJOR.MINOR.PATCH version".to_owned(),
            Support::Refused(Refusal::NewerPatch) => {
                format!("a newer patch of the {track} track, which may use what this host lacks")
            }
            Support::Refused(Refusal::NewerThanAdapted) => {
                "a later patch of an earlier track than the one this host adapts".to_owned()
            }
            Support::Refused(Refusal::OlderTrack) => {
                format!("an earlier track than {track}, which this host does not adapt")
            }
            Support::Refused(Refusal::NewerTrack) => format!("a later track than {track}"),
        })
    }

    /// The version a module's `berth:scheduler` names carry, and where it stands:
    /// the first refused one if any, else the first adapted one, else the newest;
    /// none when there is no version at all.
    pub fn judge<'a>(
        &self,
        versions: impl IntoIterator<Item = &'a str>,
    ) -> Option<(String, Support)> {
        let mut best: Option<(&str, Support)> = None;
        for v in versions {
            let support = self.classify(v);
            let rank = |s: &Support| match s {
                Support::Refused(_) => 2,
                Support::Adapted { .. } => 1,
                Support::Current | Support::OlderPatch => 0,
            };
            let replace = match &best {
                None => true,
                Some((b, bs)) => {
                    rank(&support) > rank(bs)
                        || (rank(&support) == 0
                            && rank(bs) == 0
                            && WitVersion::parse(v) > WitVersion::parse(b))
                }
            };
            if replace {
                best = Some((v, support));
            }
        }
        best.map(|(v, s)| (v.to_owned(), s))
    }
}

impl Support {
    /// `current`, `supported` or `refused`.
    pub fn status(&self) -> &'static str {
        match self {
            Support::Current => "current",
            Support::OlderPatch | Support::Adapted { .. } => "supported",
            Support::Refused(_) => "refused",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> WitVersion {
        WitVersion::parse(s).unwrap()
    }

    #[test]
    fn versions_parse_strictly_and_fall_on_wasmtimes_tracks() {
        assert_eq!(
            v("0.7.12"),
            WitVersion {
                major: 0,
                minor: 7,
                patch: 12
            }
        );
        for bad in [
            "",
            "0.7",
            "0.7.0.1",
            "0.7.x",
            "v0.7.0",
            "0.7.0-rc.1",
            "0.7.0+b",
            "0..0",
            " 0.7.0",
            "0.7.-1",
        ] {
            assert_eq!(WitVersion::parse(bad), None, "{bad:?}");
        }
        assert_eq!(v("0.7.0").track(), "0.7");
        assert_eq!(v("0.7.9").track(), "0.7");
        assert_eq!(v("1.2.3").track(), "1");
        assert_eq!(v("0.0.3").track(), "0.0.3");
    }

    #[test]
    fn this_host_speaks_its_own_version_and_adapts_the_0_7_and_0_8_tracks() {
        let p = Policy::current();
        assert_eq!(p.host().to_string(), WIT_VERSION);
        assert_eq!(p.classify(WIT_VERSION), Support::Current);
        // From its track's first patch to its own, and the adapted track.
        let first = format!("{}.0", p.host().track());
        let own = if first == WIT_VERSION {
            format!("@{WIT_VERSION}")
        } else {
            format!("@{first} to @{WIT_VERSION}")
        };
        assert_eq!(
            p.supported_range(),
            format!("{own}, and @0.7.0 to @0.7.1, @0.8.0 to @0.8.2 through an adapter")
        );
        assert_eq!(
            p.classify("0.7.2"),
            Support::Refused(Refusal::NewerThanAdapted)
        );
        for (old, track) in [
            ("0.7.0", "0.7"),
            ("0.7.1", "0.7"),
            ("0.8.0", "0.8"),
            ("0.8.2", "0.8"),
        ] {
            assert_eq!(
                p.classify(old),
                Support::Adapted {
                    track: track.into()
                },
                "{old}"
            );
        }
        assert_eq!(
            p.classify("0.8.3"),
            Support::Refused(Refusal::NewerThanAdapted)
        );
        assert_eq!(p.classify("0.6.3"), Support::Refused(Refusal::OlderTrack));
        // The adapted track's package is kept beside the current one.
        let adapted = include_str!("../../../wit/adapted/0.7/scheduler.wit");
        assert!(
            adapted
                .lines()
                .any(|l| l.trim() == "package berth:scheduler@0.7.1;"),
            "wit/adapted/0.7/scheduler.wit is not the 0.7 track's last package"
        );
        let adapted = include_str!("../../../wit/adapted/0.8/scheduler.wit");
        assert!(
            adapted
                .lines()
                .any(|l| l.trim() == "package berth:scheduler@0.8.2;"),
            "wit/adapted/0.8/scheduler.wit is not the 0.8 track's last package"
        );
        // The WIT source says the same version.
        let wit = include_str!("../../../wit/scheduler.wit");
        assert!(
            wit.lines()
                .any(|l| l.trim() == format!("package berth:scheduler@{WIT_VERSION};")),
            "wit/scheduler.wit is not at {WIT_VERSION}"
        );
    }

    #[test]
    fn a_host_on_a_later_patch_classifies_every_kind_of_version() {
        let p = Policy::new(v("0.7.2"), &[]);
        assert_eq!(p.classify("0.7.2"), Support::Current);
        assert_eq!(p.classify("0.7.0"), Support::OlderPatch);
        assert_eq!(p.classify("0.7.1"), Support::OlderPatch);
        assert_eq!(p.classify("0.7.3"), Support::Refused(Refusal::NewerPatch));
        assert_eq!(p.classify("0.6.9"), Support::Refused(Refusal::OlderTrack));
        assert_eq!(p.classify("0.1.0"), Support::Refused(Refusal::OlderTrack));
        assert_eq!(p.classify("0.8.0"), Support::Refused(Refusal::NewerTrack));
        assert_eq!(p.classify("1.0.0"), Support::Refused(Refusal::NewerTrack));
        assert_eq!(p.classify("0.0.7"), Support::Refused(Refusal::OlderTrack));
        for garbage in ["", "seven", "0.7", "0.7.0-rc.1", "0.7.2 "] {
            assert_eq!(
                p.classify(garbage),
                Support::Refused(Refusal::NotAVersion),
                "{garbage:?}"
            );
        }
        assert_eq!(p.supported_range(), "@0.7.0 to @0.7.2");
        assert_eq!(
            Policy::new(v("1.2.3"), &[]).supported_range(),
            "@1.0.0 to @1.2.3"
        );
        assert_eq!(
            p.refusal("0.6.9", Refusal::OlderTrack),
            "built against berth:scheduler@0.6.9, this host speaks @0.7.2 (it loads @0.7.0 to @0.7.2)"
        );
        assert_eq!(
            p.refusal("0.7.3", Refusal::NewerPatch),
            "built against berth:scheduler@0.7.3, a newer patch than this host's @0.7.2 (it loads @0.7.0 to @0.7.2)"
        );
        assert_eq!(
            p.refusal("seven", Refusal::NotAVersion),
            "built against berth:scheduler@seven, which is not a MAJOR.MINOR.PATCH version; this host speaks @0.7.2 (it loads @0.7.0 to @0.7.2)"
        );
        assert_eq!(p.classify("0.7.0").status(), "supported");
        assert_eq!(
            p.explain(&p.classify("0.7.0")).unwrap(),
            "an older patch of the 0.7 track"
        );
        assert_eq!(p.classify("0.7.3").status(), "refused");
        assert_eq!(
            p.explain(&p.classify("0.7.3")).unwrap(),
            "a newer patch of the 0.7 track, which may use what this host lacks"
        );
        assert_eq!(p.explain(&Support::Current), None);
    }

    #[test]
    fn an_adapted_track_loads_and_is_named_in_the_range() {
        let p = Policy::new(v("0.8.1"), &["0.7.4"]);
        assert_eq!(
            p.classify("0.7.4"),
            Support::Adapted {
                track: "0.7".into()
            }
        );
        assert_eq!(p.classify("0.6.0"), Support::Refused(Refusal::OlderTrack));
        assert_eq!(
            p.classify("0.7.5"),
            Support::Refused(Refusal::NewerThanAdapted)
        );
        assert_eq!(
            p.supported_range(),
            "@0.8.0 to @0.8.1, and @0.7.0 to @0.7.4 through an adapter"
        );
        assert_eq!(
            p.refusal("0.6.0", Refusal::OlderTrack),
            "built against berth:scheduler@0.6.0, this host speaks @0.8.1 (it loads @0.8.0 to @0.8.1, and @0.7.0 to @0.7.4 through an adapter)"
        );
        assert_eq!(
            p.refusal("0.7.5", Refusal::NewerThanAdapted),
            "built against berth:scheduler@0.7.5, a later patch than the one of its track this host adapts (it loads @0.8.0 to @0.8.1, and @0.7.0 to @0.7.4 through an adapter)"
        );
        assert_eq!(
            p.explain(&p.classify("0.7.4")).unwrap(),
            "the earlier 0.7 track, through an adapter"
        );
    }

    #[test]
    fn a_module_is_judged_by_its_worst_then_its_newest_version() {
        let p = Policy::new(v("0.7.2"), &[]);
        assert_eq!(p.judge([]), None);
        assert_eq!(
            p.judge(["0.7.0", "0.7.2", "0.7.1"]),
            Some(("0.7.2".to_owned(), Support::Current))
        );
        assert_eq!(
            p.judge(["0.7.1", "0.7.0"]),
            Some(("0.7.1".to_owned(), Support::OlderPatch))
        );
        assert_eq!(
            p.judge(["0.7.2", "0.1.0", "0.7.9"]),
            Some(("0.1.0".to_owned(), Support::Refused(Refusal::OlderTrack)))
        );
    }

    #[test]
    fn a_refusal_by_a_host_of_one_version_keeps_its_short_form() {
        let p = Policy::new(v("0.7.0"), &[]);
        assert_eq!(
            p.refusal("0.1.0", Refusal::OlderTrack),
            "built against berth:scheduler@0.1.0, this host speaks @0.7.0"
        );
        assert_eq!(
            p.advice("0.1.0", Refusal::OlderTrack),
            "rebuild it with a berth-sdk for WIT 0.7.0"
        );
    }
}
