//! Every field a configuration file may set, read off the serde structs that parse it,
//! so that a list of them (the book's configuration reference, a test that compares
//! the two) cannot drift from what [`super::Configuration`] accepts.
//!
//! [`fields`] plays a deserializer that answers every struct with all of its fields
//! and every list with one element, and notes the path of each field it is asked
//! for: `berth.modules[].sha256` is the `sha256` of any entry of `berth.modules`.

use super::Configuration;
use serde::Deserialize;
use serde::de::value::{Error, StrDeserializer};
use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};
use std::cell::RefCell;
use std::collections::BTreeSet;

/// The path of every field [`Configuration`] accepts, sorted: `parallelism`,
/// `profiles[].plugins.score.enabled[].weight`, `berth.oci.pollInterval`, ... A
/// field whose value is free-form (a plugin's `args`) is listed, not what is in it.
pub fn fields() -> Vec<String> {
    let seen = RefCell::new(BTreeSet::new());
    Configuration::deserialize(Tracer {
        path: String::new(),
        seen: &seen,
    })
    .expect("the tracer answers every field with a value its type takes");
    seen.into_inner().into_iter().collect()
}

/// Answers what it is asked with the smallest value of that shape.
struct Tracer<'a> {
    path: String,
    seen: &'a RefCell<BTreeSet<String>>,
}

impl<'a> Tracer<'a> {
    fn at(&self, path: String) -> Tracer<'a> {
        Tracer {
            path,
            seen: self.seen,
        }
    }
}

/// A scalar: numbers answer 0 (a free-form `serde_json::Value` and an untagged
/// bytes-or-quantity alike), strings `0` (a valid duration too).
macro_rules! scalars {
    ($($method:ident => $visit:ident($($value:expr)?)),* $(,)?) => {
        $(fn $method<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
            v.$visit($($value)?)
        })*
    };
}

impl<'de> de::Deserializer<'de> for Tracer<'_> {
    type Error = Error;

    scalars! {
        deserialize_any => visit_u64(0),
        deserialize_bool => visit_bool(false),
        deserialize_i8 => visit_u64(0),
        deserialize_i16 => visit_u64(0),
        deserialize_i32 => visit_u64(0),
        deserialize_i64 => visit_u64(0),
        deserialize_u8 => visit_u64(0),
        deserialize_u16 => visit_u64(0),
        deserialize_u32 => visit_u64(0),
        deserialize_u64 => visit_u64(0),
        deserialize_f32 => visit_f64(0.0),
        deserialize_f64 => visit_f64(0.0),
        deserialize_char => visit_char('0'),
        deserialize_str => visit_str("0"),
        deserialize_string => visit_str("0"),
        deserialize_bytes => visit_bytes(b"0"),
        deserialize_byte_buf => visit_bytes(b"0"),
        deserialize_unit => visit_unit(),
        deserialize_identifier => visit_str("0"),
        deserialize_ignored_any => visit_unit(),
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_some(self)
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        v: V,
    ) -> Result<V::Value, Error> {
        v.visit_unit()
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        v: V,
    ) -> Result<V::Value, Error> {
        v.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        let element = self.at(format!("{}[]", self.path));
        v.visit_seq(One(Some(element)))
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, v: V) -> Result<V::Value, Error> {
        self.deserialize_seq(v)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        v: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(v)
    }

    fn deserialize_map<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_map(Fields {
            tracer: self,
            fields: &[],
        })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Error> {
        v.visit_map(Fields {
            tracer: self,
            fields,
        })
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Error> {
        let first = variants.first().copied().unwrap_or_default();
        v.visit_enum(first.into_deserializer())
    }
}

/// A list of one element.
struct One<'a>(Option<Tracer<'a>>);

impl<'de> de::SeqAccess<'de> for One<'_> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        self.0.take().map(|t| seed.deserialize(t)).transpose()
    }
}

/// A struct's fields, each noted as it is given.
struct Fields<'a> {
    tracer: Tracer<'a>,
    fields: &'static [&'static str],
}

impl<'de> de::MapAccess<'de> for Fields<'_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some(field) = self.fields.first() else {
            return Ok(None);
        };
        seed.deserialize(StrDeserializer::<Error>::new(field))
            .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let (field, rest) = self.fields.split_first().expect("a key was given");
        self.fields = rest;
        let path = if self.tracer.path.is_empty() {
            (*field).to_owned()
        } else {
            format!("{}.{field}", self.tracer.path)
        };
        self.tracer.seen.borrow_mut().insert(path.clone());
        seed.deserialize(self.tracer.at(path))
    }
}

#[cfg(test)]
mod tests {
    use super::fields;

    #[test]
    fn fields_are_read_off_the_structs() {
        let all = fields();
        for path in [
            "apiVersion",
            "parallelism",
            "profiles[].schedulerName",
            "profiles[].plugins.multiPoint.enabled[].name",
            "profiles[].plugins.score.enabled[].weight",
            "profiles[].pluginConfig[].args",
            "clientConnection.qps",
            "leaderElection.leaseDuration",
            "berth.modules[].oci",
            "berth.totalMemoryLimit",
            "berth.plugins[].sandbox.grants.dirs[].guestPath",
            "berth.plugins[].shadow.path",
            "berth.oci.pollInterval",
        ] {
            assert!(all.iter().any(|f| f == path), "{path} missing from {all:?}");
        }
        // A field serde skips is no field of the file.
        assert!(!all.iter().any(|f| f.ends_with(".access")), "{all:?}");
    }
}
