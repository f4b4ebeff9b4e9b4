//! `list`: Describes MBeans (attributes, operations, notifications), optionally
//! below an inner path such as `java.lang/type=Memory`.

use crate::protocol::ProtocolError;
use serde::ser::SerializeMap;

use super::{inner_path, inner_path_from_get, put_path, Fields, PathArgs};

#[derive(Debug, Clone, PartialEq)]
pub struct List {
    pub path: Option<String>,
}

impl List {
    pub fn from_get(args: PathArgs) -> Result<List, ProtocolError> {
        Ok(List {
            path: inner_path_from_get(args),
        })
    }

    pub fn from_fields(obj: &Fields) -> Result<List, ProtocolError> {
        Ok(List {
            path: inner_path(obj)?,
        })
    }

    pub fn write_fields<M: SerializeMap>(&self, out: &mut M) -> Result<(), M::Error> {
        put_path(out, &self.path)
    }
}
