//! Hawtio's RBAC contract, answered by the gateway from the caller's own
//! policies. Hawtio looks for an ACL MBean with `search
//! *:type=security,area=jmx,*` and asks it `canInvoke` before it enables an
//! operation or an attribute editor; the agent behind the gateway knows
//! nothing of the caller's roles, so the gateway shows its own MBean in
//! that search and answers those `exec`s itself, never reaching the agent.
//! Pure: the decisions are the ones the real items would get.

use serde_json::{json, Map, Value};

use super::Grant;
use crate::protocol::{Command, Exec, ObjectName, ProtocolError, Request};

/// The ACL MBean the gateway shows to Hawtio.
pub const RBAC_MBEAN: &str = "hawtio:type=security,area=jmx,name=JmxgateRBAC";

/// What Hawtio searches for to find an ACL MBean.
const ACL_PATTERN: &str = "*:type=security,area=jmx,*";

/// The `exec` of a `canInvoke` on the gateway's ACL MBean, if it is one.
pub fn query(request: &Request) -> Option<&Exec> {
    match &request.command {
        Command::Exec(e)
            if e.mbean.as_str() == RBAC_MBEAN
                && (e.operation == "canInvoke" || e.operation.starts_with("canInvoke(")) =>
        {
            Some(e)
        }
        _ => None,
    }
}

/// A search answer's names as Hawtio must see them under roles: the
/// agent's own ACL MBeans (which know the agent's user, not this caller)
/// replaced by the gateway's, when the pattern asks for ACL MBeans by their
/// keys in a pattern (`*:type=security,area=jmx,*`). A broader search
/// (`*:*`) or one exact name is left alone: JMX tools would show the
/// gateway's MBean as a node no request opens.
pub fn searched(pattern: &ObjectName, names: Vec<Value>) -> Vec<Value> {
    let gateway = ObjectName::parse(RBAC_MBEAN).expect("a valid ObjectName");
    let asks_for_acl = pattern.is_pattern()
        && pattern.key_property("type") == Some("security")
        && pattern.key_property("area") == Some("jmx");
    if !asks_for_acl || !pattern.matches(&gateway) {
        return names;
    }
    let acl = ObjectName::parse(ACL_PATTERN).expect("a valid pattern");
    let mut kept: Vec<Value> = vec![Value::String(RBAC_MBEAN.into())];
    kept.extend(names.into_iter().filter(|n| {
        !n.as_str()
            .and_then(|s| ObjectName::parse(s).ok())
            .is_some_and(|name| acl.matches(&name))
    }));
    kept
}

/// The answer to one `canInvoke` form, for the caller's `grant` on the
/// target the item was sent to:
/// - `canInvoke(java.lang.String)`: may the caller touch the MBean at all;
/// - `canInvoke(java.util.Map)`: `{mbean: ["op(sig)", ...]}` answered as
///   `{mbean: {"op(sig)": {"ObjectName", "Method", "CanInvoke"}}}`;
/// - `canInvoke(java.lang.String,java.lang.String)` and
///   `canInvoke(java.lang.String,java.lang.String,[Ljava.lang.String;)`:
///   one method, where `set<Attr>(type)` is a write of the attribute and
///   `get<Attr>()`/`is<Attr>()` a read, as Hawtio asks for attributes.
pub fn answer(grant: &Grant, exec: &Exec) -> Result<Value, ProtocolError> {
    let args: Vec<Value> = exec
        .arguments
        .iter()
        .map(|a| a.to_value().unwrap_or(Value::Null))
        .collect();
    match args.as_slice() {
        [Value::String(name)] => Ok(Value::Bool(grant.visible(&object_name(name)?))),
        [Value::Object(requested)] => Ok(Value::Object(
            requested
                .iter()
                .map(|(name, methods)| {
                    let mbean = object_name(name)?;
                    let methods: Vec<String> = serde_json::from_value(methods.clone())
                        .map_err(|_| bad("a list of operation names for each MBean"))?;
                    let answers: Map<String, Value> = methods
                        .into_iter()
                        .map(|method| {
                            let can = method_allowed(grant, &mbean, &method);
                            let entry = json!({"ObjectName": name, "Method": method, "CanInvoke": can});
                            (method, entry)
                        })
                        .collect();
                    Ok((name.clone(), Value::Object(answers)))
                })
                .collect::<Result<_, ProtocolError>>()?,
        )),
        [Value::String(name), Value::String(method)] => Ok(Value::Bool(method_allowed(
            grant,
            &object_name(name)?,
            method,
        ))),
        [Value::String(name), Value::String(method), Value::Array(types)] => {
            let types: Vec<&str> = types.iter().filter_map(Value::as_str).collect();
            let signed = format!("{method}({})", types.join(","));
            Ok(Value::Bool(method_allowed(
                grant,
                &object_name(name)?,
                &signed,
            )))
        }
        _ => Err(bad(
            "canInvoke takes an ObjectName; a map of ObjectNames to operations; or an ObjectName, a method and optionally its argument types",
        )),
    }
}

/// A method as Hawtio names it: an operation with or without signature, or
/// an attribute's getter or setter.
fn method_allowed(grant: &Grant, name: &ObjectName, method: &str) -> bool {
    let (bare, signature) = match method.split_once('(') {
        Some((bare, rest)) => (bare, Some(rest.trim_end_matches(')'))),
        None => (method, None),
    };
    let arity = signature.map(|s| s.split(',').filter(|t| !t.is_empty()).count());
    if let (Some(attribute), Some(1)) = (bare.strip_prefix("set"), arity) {
        if !attribute.is_empty() {
            return grant.write(name, attribute).allowed;
        }
    }
    let getter = bare.strip_prefix("get").or_else(|| bare.strip_prefix("is"));
    if let (Some(attribute), Some(0)) = (getter, arity) {
        if !attribute.is_empty() {
            return grant.read(name, attribute).allowed;
        }
    }
    grant.exec(name, method).allowed
}

fn object_name(raw: &str) -> Result<ObjectName, ProtocolError> {
    ObjectName::parse(raw).map_err(|e| {
        ProtocolError::new(
            400,
            "javax.management.MalformedObjectNameException",
            format!("canInvoke: {e}"),
        )
    })
}

fn bad(what: &str) -> ProtocolError {
    ProtocolError::bad_request(format!("canInvoke: expected {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::JsonText;
    use std::sync::Arc;

    fn grant(xml: &str) -> Grant {
        Grant::of(
            vec![Arc::new(crate::policy::Policy::parse(xml).unwrap())],
            vec!["r".into()],
        )
    }

    fn exec(operation: &str, args: Value) -> Exec {
        Exec {
            mbean: ObjectName::parse(RBAC_MBEAN).unwrap(),
            operation: operation.into(),
            arguments: args
                .as_array()
                .unwrap()
                .iter()
                .map(JsonText::from_value)
                .collect(),
        }
    }

    const POLICY: &str = "<restrict><filter><mbean>d:type=Hidden</mbean></filter><deny>\
        <mbean><name>d:type=Ops</name><operation>reset</operation><attribute mode=\"write\">Name</attribute></mbean>\
        </deny></restrict>";

    #[test]
    fn each_can_invoke_form_answers_what_the_item_would_get() {
        let g = grant(POLICY);
        let one = |name: &str| answer(&g, &exec("canInvoke(java.lang.String)", json!([name])));
        assert_eq!(one("d:type=Ops").unwrap(), json!(true));
        assert_eq!(one("d:type=Hidden").unwrap(), json!(false));
        assert_eq!(one("not a name").unwrap_err().status, 400);

        let many = answer(
            &g,
            &exec(
                "canInvoke(java.util.Map)",
                json!([{"d:type=Ops": ["reset()", "echo(java.lang.String)"]}]),
            ),
        )
        .unwrap();
        assert_eq!(many["d:type=Ops"]["reset()"]["CanInvoke"], false);
        assert_eq!(many["d:type=Ops"]["reset()"]["ObjectName"], "d:type=Ops");
        assert_eq!(many["d:type=Ops"]["reset()"]["Method"], "reset()");
        assert_eq!(
            many["d:type=Ops"]["echo(java.lang.String)"]["CanInvoke"],
            true
        );

        // Attributes, as Hawtio's attribute editor asks.
        let method = "canInvoke(java.lang.String,java.lang.String,[Ljava.lang.String;)";
        let setter = |attribute: &str| {
            answer(
                &g,
                &exec(
                    method,
                    json!([
                        "d:type=Ops",
                        format!("set{attribute}"),
                        ["java.lang.String"]
                    ]),
                ),
            )
            .unwrap()
        };
        assert_eq!(setter("Name"), json!(false));
        assert_eq!(setter("Other"), json!(true));
        let by_name = answer(
            &g,
            &exec(
                "canInvoke(java.lang.String,java.lang.String)",
                json!(["d:type=Ops", "reset"]),
            ),
        )
        .unwrap();
        assert_eq!(by_name, json!(false));
        assert_eq!(
            answer(&g, &exec("canInvoke", json!([1])))
                .unwrap_err()
                .status,
            400
        );
    }

    #[test]
    fn queries_are_execs_of_can_invoke_on_the_gateways_mbean() {
        let r = |mbean: &str, op: &str| {
            let mut e = exec(op, json!([]));
            e.mbean = ObjectName::parse(mbean).unwrap();
            Request::new(Command::Exec(e))
        };
        assert!(query(&r(RBAC_MBEAN, "canInvoke(java.lang.String)")).is_some());
        assert!(query(&r(RBAC_MBEAN, "canInvoke")).is_some());
        assert!(query(&r(RBAC_MBEAN, "other()")).is_none());
        assert!(query(&r("hawtio:type=security,area=jmx,name=Other", "canInvoke")).is_none());
    }

    #[test]
    fn an_acl_search_shows_the_gateways_mbean_instead_of_the_agents() {
        let pattern = ObjectName::parse(ACL_PATTERN).unwrap();
        let agent = vec![
            json!("hawtio:type=security,area=jmx,name=ArtemisJMXSecurity"),
            json!("d:type=Ops"),
        ];
        assert_eq!(
            searched(&pattern, agent.clone()),
            vec![json!(RBAC_MBEAN), json!("d:type=Ops")]
        );
        for other in ["d:*", "*:*", "hawtio:*", RBAC_MBEAN] {
            let other = ObjectName::parse(other).unwrap();
            assert_eq!(searched(&other, agent.clone()), agent, "{other:?}");
        }
    }
}
