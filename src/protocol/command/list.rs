//! `list`: Describes MBeans (attributes, operations, notifications), optionally
//! below an inner path such as `java.lang/type=Memory`.

use crate::protocol::ProtocolError;

use super::{inner_path, inner_path_from_get, put_path, Json, PathArgs};

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

    pub fn from_json(obj: &Json) -> Result<List, ProtocolError> {
        Ok(List {
            path: inner_path(obj)?,
        })
    }

    pub fn write_json(&self, out: &mut Json) {
        put_path(out, &self.path);
    }
}
