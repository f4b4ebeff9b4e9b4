//! `exec`: Invokes an operation, optionally naming its signature to pick an
//! overload: `add(int,int)`.

use serde::ser::SerializeMap;
use serde_json::value::RawValue;

use crate::protocol::object_name::ObjectName;
use crate::protocol::path;
use crate::protocol::{JsonText, ProtocolError};

use super::{object_name, object_name_from_get, required_str, Fields, PathArgs};

#[derive(Debug, Clone, PartialEq)]
pub struct Exec {
    pub mbean: ObjectName,
    /// The operation name, optionally with a signature: `add(int,int)`.
    pub operation: String,
    pub arguments: Vec<JsonText>,
}

impl Exec {
    pub fn from_get(mut args: PathArgs) -> Result<Exec, ProtocolError> {
        if args.len() < 2 {
            return Err(ProtocolError::bad_request(
                "Exec GET requests require at least two path elements",
            ));
        }
        let mbean = object_name_from_get(args.pop_front().flatten())?;
        let operation = args.pop_front().flatten().ok_or_else(|| {
            ProtocolError::bad_request("Exec GET requests require an operation name, not \"*\"")
        })?;
        Ok(Exec {
            mbean,
            operation,
            arguments: args.into_iter().map(path::value_from_get).collect(),
        })
    }

    pub fn from_fields(obj: &Fields) -> Result<Exec, ProtocolError> {
        let mbean = required_str(
            obj,
            "mbean",
            "Exec POST requests require an ObjectName to invoke",
        )?;
        let operation = required_str(
            obj,
            "operation",
            "Exec POST requests require an operation name to invoke",
        )?;
        let arguments = match obj.get("arguments") {
            None => Vec::new(),
            Some(raw) if raw.get().starts_with('[') => {
                let items: Vec<&RawValue> = serde_json::from_str(raw.get()).map_err(|e| {
                    ProtocolError::bad_request(format!("Invalid \"arguments\": {e}"))
                })?;
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, item)| JsonText::from_raw(item, &format!("arguments[{i}]")))
                    .collect::<Result<_, _>>()?
            }
            Some(_) => {
                return Err(ProtocolError::bad_request(
                    "\"arguments\" of an exec request must be an array",
                ))
            }
        };
        Ok(Exec {
            mbean: object_name(&mbean)?,
            operation: operation.into_owned(),
            arguments,
        })
    }

    pub fn write_fields<M: SerializeMap>(&self, out: &mut M) -> Result<(), M::Error> {
        out.serialize_entry("mbean", self.mbean.as_str())?;
        out.serialize_entry("operation", &self.operation)?;
        if !self.arguments.is_empty() {
            out.serialize_entry("arguments", &self.arguments)?;
        }
        Ok(())
    }
}
