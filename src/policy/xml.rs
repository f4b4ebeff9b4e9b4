//! A tiny DOM over quick-xml, just enough to mirror what Jolokia's
//! restrictor does with `org.w3c.dom`: element names are compared as
//! written (a prefixed `<j:allow>` is not `<allow>`), sections are found
//! anywhere in the document (`getElementsByTagName`), and an element's
//! text is the concatenation of all text below it (`getTextContent`).

use quick_xml::escape::resolve_predefined_entity;
use quick_xml::events::{BytesStart, Event};
use quick_xml::XmlVersion;

/// One element: its qualified name, attributes and children.
#[derive(Debug, Default)]
pub(crate) struct Element {
    pub name: String,
    pub attrs: Vec<(String, String)>,
    pub children: Vec<Node>,
}

#[derive(Debug)]
pub(crate) enum Node {
    Element(Element),
    Text(String),
}

impl Element {
    /// Child elements, skipping text (Jolokia ignores text between elements).
    pub fn child_elements(&self) -> impl Iterator<Item = &Element> {
        self.children.iter().filter_map(|n| match n {
            Node::Element(e) => Some(e),
            Node::Text(_) => None,
        })
    }

    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// DOM `getTextContent()`: all text and CDATA below this element.
    pub fn text_content(&self) -> String {
        let mut out = String::new();
        self.collect_text(&mut out);
        out
    }

    fn collect_text(&self, out: &mut String) {
        for child in &self.children {
            match child {
                Node::Text(t) => out.push_str(t),
                Node::Element(e) => e.collect_text(out),
            }
        }
    }

    /// DOM `getElementsByTagName(name)` on the document: every element so
    /// named, at any depth, in document order (the root included).
    pub fn elements_named<'a>(&'a self, name: &str) -> Vec<&'a Element> {
        let mut out = Vec::new();
        self.collect_named(name, &mut out);
        out
    }

    fn collect_named<'a>(&'a self, name: &str, out: &mut Vec<&'a Element>) {
        if self.name == name {
            out.push(self);
        }
        for child in self.child_elements() {
            child.collect_named(name, out);
        }
    }
}

/// Java's `String.trim()`: strips every char up to U+0020 at both ends.
pub(crate) fn java_trim(s: &str) -> &str {
    s.trim_matches(|c: char| c <= ' ')
}

/// Parses a whole document and returns its root element. Rejects what a
/// DOM parser rejects (not well-formed), plus any DOCTYPE (Jolokia's
/// parser refuses external entities; the gateway refuses DTDs outright).
pub(crate) fn parse_document(xml: &str) -> Result<Element, String> {
    let xml = xml.strip_prefix('\u{feff}').unwrap_or(xml);
    let mut reader = quick_xml::Reader::from_str(xml);
    reader.config_mut().enable_all_checks(true);
    let mut stack: Vec<Element> = Vec::new();
    let mut root: Option<Element> = None;
    let at = |reader: &quick_xml::Reader<&[u8]>| reader.buffer_position();
    loop {
        let event = reader
            .read_event()
            .map_err(|e| format!("not well-formed XML at byte {}: {e}", at(&reader)))?;
        match event {
            Event::Start(start) => {
                if root.is_some() {
                    return Err(format!(
                        "not well-formed XML at byte {}: content after the root element",
                        at(&reader)
                    ));
                }
                stack.push(element(&start)?);
            }
            Event::Empty(start) => {
                if root.is_some() && stack.is_empty() {
                    return Err(format!(
                        "not well-formed XML at byte {}: content after the root element",
                        at(&reader)
                    ));
                }
                let e = element(&start)?;
                match stack.last_mut() {
                    Some(parent) => parent.children.push(Node::Element(e)),
                    None => root = Some(e),
                }
            }
            Event::End(_) => {
                let Some(done) = stack.pop() else {
                    return Err(format!(
                        "not well-formed XML at byte {}: unexpected end tag",
                        at(&reader)
                    ));
                };
                match stack.last_mut() {
                    Some(parent) => parent.children.push(Node::Element(done)),
                    None => root = Some(done),
                }
            }
            Event::Text(text) => {
                let text = text
                    .xml10_content()
                    .map_err(|e| format!("not well-formed XML: {e}"))?;
                push_text(&mut stack, &text, &reader)?;
            }
            Event::CData(cdata) => {
                let text = cdata
                    .xml10_content()
                    .map_err(|e| format!("not well-formed XML: {e}"))?;
                if stack.is_empty() {
                    return Err(format!(
                        "not well-formed XML at byte {}: CDATA outside the root element",
                        at(&reader)
                    ));
                }
                push_text(&mut stack, &text, &reader)?;
            }
            Event::GeneralRef(r) => {
                let resolved = match r
                    .resolve_char_ref()
                    .map_err(|e| format!("not well-formed XML: {e}"))?
                {
                    Some(c) => c.to_string(),
                    None => {
                        let name = r
                            .decode()
                            .map_err(|e| format!("not well-formed XML: {e}"))?;
                        resolve_predefined_entity(&name)
                            .ok_or_else(|| {
                                format!("not well-formed XML: undeclared entity &{name};")
                            })?
                            .to_string()
                    }
                };
                if stack.is_empty() {
                    return Err(format!(
                        "not well-formed XML at byte {}: reference outside the root element",
                        at(&reader)
                    ));
                }
                push_text(&mut stack, &resolved, &reader)?;
            }
            Event::DocType(_) => {
                return Err("DOCTYPE declarations are not supported in policies".into());
            }
            Event::Comment(_) | Event::Decl(_) | Event::PI(_) => {}
            Event::Eof => break,
        }
    }
    if !stack.is_empty() {
        return Err("not well-formed XML: the document ends inside an element".into());
    }
    root.ok_or_else(|| "not well-formed XML: no root element".to_string())
}

fn push_text(
    stack: &mut [Element],
    text: &str,
    reader: &quick_xml::Reader<&[u8]>,
) -> Result<(), String> {
    match stack.last_mut() {
        Some(parent) => {
            if let Some(Node::Text(prev)) = parent.children.last_mut() {
                prev.push_str(text);
            } else {
                parent.children.push(Node::Text(text.to_string()));
            }
            Ok(())
        }
        // Outside the root only whitespace may appear.
        None if text.chars().all(|c| matches!(c, ' ' | '\t' | '\r' | '\n')) => Ok(()),
        None => Err(format!(
            "not well-formed XML at byte {}: text outside the root element",
            reader.buffer_position()
        )),
    }
}

fn element(start: &BytesStart<'_>) -> Result<Element, String> {
    let name = std::str::from_utf8(start.name().as_ref())
        .map_err(|e| format!("not well-formed XML: {e}"))?
        .to_string();
    if !is_xml_name(&name) {
        return Err(format!(
            "not well-formed XML: invalid element name {name:?}"
        ));
    }
    let mut attrs = Vec::new();
    for attr in start.attributes() {
        let attr = attr.map_err(|e| format!("not well-formed XML in <{name}>: {e}"))?;
        let key = std::str::from_utf8(attr.key.as_ref())
            .map_err(|e| format!("not well-formed XML: {e}"))?
            .to_string();
        let value = attr
            .normalized_value(XmlVersion::Implicit1_0)
            .map_err(|e| format!("not well-formed XML in <{name}>: {e}"))?
            .into_owned();
        attrs.push((key, value));
    }
    Ok(Element {
        name,
        attrs,
        children: Vec::new(),
    })
}

/// A (slightly lenient) XML `Name`.
fn is_xml_name(name: &str) -> bool {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    let start_ok = |c: char| c.is_alphabetic() || c == '_' || c == ':' || !c.is_ascii();
    start_ok(first) && chars.all(|c| start_ok(c) || c.is_ascii_digit() || c == '-' || c == '.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_a_tree_with_text_content() {
        let root = parse_document(
            "<?xml version=\"1.0\"?>\n<!-- c -->\n<restrict a=\"x &amp; y\">\
             <name>java.lang:<!-- x -->type=&#77;emory</name> junk <e/>\
             <c><![CDATA[<raw>]]></c></restrict>\n",
        )
        .unwrap();
        assert_eq!(root.name, "restrict");
        assert_eq!(root.attr("a"), Some("x & y"));
        let names = root.elements_named("name");
        assert_eq!(names[0].text_content(), "java.lang:type=Memory");
        assert_eq!(root.elements_named("c")[0].text_content(), "<raw>");
        assert_eq!(root.child_elements().count(), 3);
        assert_eq!(java_trim("\u{1}\t x \n"), "x");
        let bom = parse_document("\u{feff}<?xml version=\"1.0\"?><a>x</a>").unwrap();
        assert_eq!(bom.text_content(), "x");
    }

    #[test]
    fn rejects_what_is_not_well_formed() {
        for bad in [
            "",
            "Blubber<restrict/>",
            "<restrict/>trailing",
            "<a><b></a>",
            "<a>",
            "<a/><b/>",
            "<a>&unknown;</a>",
            "<!DOCTYPE a [<!ENTITY x \"y\">]><a>&x;</a>",
            "<a x='1' x='2'/>",
            "<x<x",
        ] {
            assert!(parse_document(bad).is_err(), "{bad:?} should be rejected");
        }
    }
}
