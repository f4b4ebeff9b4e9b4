//! `read`: Reads one attribute, several, or all, of an MBean or an MBean pattern,
//! optionally descending into the value along an inner path.

use serde::ser::SerializeMap;
use serde_json::value::RawValue;

use crate::protocol::object_name::ObjectName;
use crate::protocol::path;
use crate::protocol::ProtocolError;

use super::{
    inner_path, inner_path_from_get, object_name, object_name_from_get, put_path, required_str,
    string_field, string_of, Fields, PathArgs,
};

/// Which attributes a read asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attributes {
    /// Every attribute (no `attribute`, `*`, or an empty list).
    All,
    /// One attribute: the answer's value is the attribute's value.
    One(String),
    /// A list: the answer's value is keyed by attribute name.
    Many(Vec<String>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Read {
    pub mbean: ObjectName,
    pub attribute: Attributes,
    pub path: Option<String>,
}

impl Read {
    pub fn from_get(mut args: PathArgs) -> Result<Read, ProtocolError> {
        let mbean = args.pop_front().ok_or_else(|| {
            ProtocolError::bad_request(
                "Read GET requests require at least 1 path element for ObjectName to read from",
            )
        })?;
        let attribute = match args.pop_front().flatten() {
            None => Attributes::All,
            Some(list) => {
                let mut names = path::split_csv(&list);
                match names.len() {
                    1 if names[0].is_empty() => Attributes::All,
                    1 => Attributes::One(names.remove(0)),
                    _ => Attributes::Many(names),
                }
            }
        };
        Ok(Read {
            mbean: object_name_from_get(mbean)?,
            attribute,
            path: inner_path_from_get(args),
        })
    }

    pub fn from_fields(obj: &Fields) -> Result<Read, ProtocolError> {
        let mbean = required_str(
            obj,
            "mbean",
            "Read POST requests require an ObjectName to read from (may be a pattern)",
        )?;
        let attribute = match obj.get("attribute") {
            None => Attributes::All,
            Some(raw) if raw.get().starts_with('[') => {
                let items: Vec<&RawValue> = serde_json::from_str(raw.get()).map_err(|e| {
                    ProtocolError::bad_request(format!("Invalid \"attribute\": {e}"))
                })?;
                // Like the agents: what is not a name is left out; a name
                // that is no valid string is an error, not silently dropped.
                let mut names = Vec::with_capacity(items.len());
                for item in items.into_iter().filter(|i| i.get().starts_with('"')) {
                    let name = string_field(item, "attribute")?;
                    if !name.trim().is_empty() {
                        names.push(name.into_owned());
                    }
                }
                if names.is_empty() {
                    Attributes::All
                } else {
                    Attributes::Many(names)
                }
            }
            Some(raw) => match string_of(raw) {
                Some(s) => {
                    let mut names = path::split_csv(&s);
                    match names.len() {
                        1 if names[0].trim().is_empty() => Attributes::All,
                        1 => Attributes::One(names.remove(0)),
                        _ => Attributes::Many(names),
                    }
                }
                None => {
                    return Err(ProtocolError::bad_request(format!(
                        "Can't determine attribute names to read from {mbean}: \"attribute\" must be a string or an array of strings"
                    )))
                }
            },
        };
        Ok(Read {
            mbean: object_name(&mbean)?,
            attribute,
            path: inner_path(obj)?,
        })
    }

    pub fn write_fields<M: SerializeMap>(&self, out: &mut M) -> Result<(), M::Error> {
        out.serialize_entry("mbean", self.mbean.as_str())?;
        match &self.attribute {
            Attributes::All => {}
            Attributes::One(a) => out.serialize_entry("attribute", a)?,
            Attributes::Many(list) => out.serialize_entry("attribute", list)?,
        }
        put_path(out, &self.path)
    }
}
