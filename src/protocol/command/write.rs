//! `write`: Sets one attribute (or a value inside it, along an inner path); the
//! agent answers with the old value.

use serde::ser::SerializeMap;

use crate::protocol::object_name::ObjectName;
use crate::protocol::path;
use crate::protocol::{JsonText, ProtocolError};

use super::{
    inner_path, inner_path_from_get, object_name, object_name_from_get, put_path, required_str,
    Fields, PathArgs,
};

#[derive(Debug, Clone, PartialEq)]
pub struct Write {
    pub mbean: ObjectName,
    pub attribute: String,
    pub value: JsonText,
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

    pub fn from_fields(obj: &Fields) -> Result<Write, ProtocolError> {
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
        let value = obj.get("value").ok_or_else(|| {
            ProtocolError::bad_request("Write POST requests require a value to set (may be a null)")
        })?;
        let value = JsonText::from_raw(value, "value")?;
        Ok(Write {
            mbean: object_name(&mbean)?,
            attribute: attribute.into_owned(),
            value,
            path: inner_path(obj)?,
        })
    }

    pub fn write_fields<M: SerializeMap>(&self, out: &mut M) -> Result<(), M::Error> {
        out.serialize_entry("mbean", self.mbean.as_str())?;
        out.serialize_entry("attribute", &self.attribute)?;
        out.serialize_entry("value", &self.value)?;
        put_path(out, &self.path)
    }
}
