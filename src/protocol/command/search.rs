//! `search`: Lists the MBean names matching a pattern.

use crate::protocol::object_name::ObjectName;
use crate::protocol::ProtocolError;
use serde::ser::SerializeMap;

use super::{object_name, object_name_from_get, optional_str, Fields, PathArgs};

#[derive(Debug, Clone, PartialEq)]
pub struct Search {
    /// The pattern; every MBean (`*:*`) when none is given.
    pub mbean: ObjectName,
}

impl Search {
    pub fn from_get(mut args: PathArgs) -> Result<Search, ProtocolError> {
        Ok(Search {
            mbean: object_name_from_get(args.pop_front().flatten())?,
        })
    }

    pub fn from_fields(obj: &Fields) -> Result<Search, ProtocolError> {
        Ok(Search {
            mbean: object_name(optional_str(obj, "mbean")?.as_deref().unwrap_or("*:*"))?,
        })
    }

    pub fn write_fields<M: SerializeMap>(&self, out: &mut M) -> Result<(), M::Error> {
        out.serialize_entry("mbean", self.mbean.as_str())
    }
}
