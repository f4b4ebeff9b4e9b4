//! `write`: Sets one attribute (or a value inside it, along an inner path); the
//! agent answers with the old value.

use serde_json::Value;

use crate::protocol::object_name::ObjectName;
use crate::protocol::path;
use crate::protocol::ProtocolError;

use super::{
    inner_path, inner_path_from_get, object_name, object_name_from_get, put_path, required_str,
    Json, PathArgs,
};

#[derive(Debug, Clone, PartialEq)]
pub struct Write {
    pub mbean: ObjectName,
    pub attribute: String,
    pub value: Value,
    pub path: Option<String>,
}

impl Write {
    pub fn from_get(mut args: PathArgs) -> Result<Write, ProtocolError> {
        if args.len() < 3 {
            return Err(ProtocolError::bad_request(
                "Write GET requests require at least three path elements",
            ));
        }
        let mbean = object_name_from_get(args.pop_front().flatten())?;
        let attribute = args.pop_front().flatten().unwrap_or_else(|| "*".into());
        let value = path::value_from_get(args.pop_front().flatten());
        Ok(Write {
            mbean,
            attribute,
            value,
            path: inner_path_from_get(args),
        })
    }

    pub fn from_json(obj: &Json) -> Result<Write, ProtocolError> {
        let mbean = required_str(
            obj,
            "mbean",
            "Write POST requests require an ObjectName to write to",
        )?;
        let attribute = required_str(
            obj,
            "attribute",
            "Write POST requests require an attribute name to write to",
        )?;
        let value = obj.get("value").cloned().ok_or_else(|| {
            ProtocolError::bad_request("Write POST requests require a value to set (may be a null)")
        })?;
        Ok(Write {
            mbean: object_name(mbean)?,
            attribute: attribute.to_string(),
            value,
            path: inner_path(obj)?,
        })
    }

    pub fn write_json(&self, out: &mut Json) {
        out.insert("mbean".into(), self.mbean.as_str().into());
        out.insert("attribute".into(), self.attribute.as_str().into());
        out.insert("value".into(), self.value.clone());
        put_path(out, &self.path);
    }
}
