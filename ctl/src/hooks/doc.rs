//! A JSON settings file as an order-keeping tree, so that adding clibot's hooks leaves the rest of
//! the file in the order the user wrote it, written back in the file's own indentation and line
//! endings.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

/// A JSON value whose objects keep their keys in file order.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    /// null, a boolean, a number or a string.
    Scalar(serde_json::Value),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    pub fn str(s: &str) -> Json {
        Json::Scalar(serde_json::Value::String(s.to_string()))
    }

    pub fn num(n: u64) -> Json {
        Json::Scalar(serde_json::Value::from(n))
    }

    /// An object of these members, in this order.
    pub fn object(members: Vec<(&str, Json)>) -> Json {
        Json::Object(
            members
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        )
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::Scalar(serde_json::Value::String(s)) => Some(s),
            _ => None,
        }
    }

    /// The first member named `key` of an object.
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut Json> {
        match self {
            Json::Object(m) => m.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The member `key` of an object, added at the end as `value` when missing.
    pub fn member_or(&mut self, key: &str, value: Json) -> Option<&mut Json> {
        let Json::Object(m) = self else { return None };
        let at = match m.iter().position(|(k, _)| k == key) {
            Some(i) => i,
            None => {
                m.push((key.to_string(), value));
                m.len() - 1
            }
        };
        m.get_mut(at).map(|(_, v)| v)
    }

    /// Removes every member named `key` of an object.
    pub fn remove(&mut self, key: &str) {
        if let Json::Object(m) = self {
            m.retain(|(k, _)| k != key);
        }
    }

    pub fn is_empty_container(&self) -> bool {
        match self {
            Json::Array(a) => a.is_empty(),
            Json::Object(m) => m.is_empty(),
            Json::Scalar(_) => false,
        }
    }
}

/// How a file is laid out: what it indents with, its line ending, whether it ends in one.
#[derive(Debug, Clone, PartialEq)]
pub struct Style {
    indent: String,
    crlf: bool,
    final_newline: bool,
}

impl Style {
    /// The style of an existing file's text, or two spaces and `\n` for a new file.
    pub fn of(text: Option<&str>) -> Style {
        let Some(text) = text.filter(|t| !t.trim().is_empty()) else {
            return Style {
                indent: "  ".into(),
                crlf: false,
                final_newline: true,
            };
        };
        // The first indented line holds one level of indentation.
        let indent = text
            .lines()
            .skip(1)
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let rest = l.trim_start_matches([' ', '\t']);
                &l[..l.len() - rest.len()]
            })
            .find(|w| !w.is_empty())
            .unwrap_or("  ")
            .to_string();
        Style {
            indent,
            crlf: text.contains("\r\n"),
            final_newline: text.ends_with('\n'),
        }
    }
}

/// Parses a settings file's text; whitespace alone counts as an empty object.
pub fn parse(text: &str) -> Result<Json, String> {
    if text.trim().is_empty() {
        return Ok(Json::Object(Vec::new()));
    }
    serde_json::from_str(text).map_err(|e| format!("is not valid JSON ({e})"))
}

/// `doc` as text in `style`.
pub fn render(doc: &Json, style: &Style) -> String {
    let mut out = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(style.indent.as_bytes());
    let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
    // Writing into a Vec fails only on a non-string key, which this tree cannot hold.
    if doc.serialize(&mut ser).is_err() {
        return String::new();
    }
    let mut text = String::from_utf8_lossy(&out).into_owned();
    if style.final_newline {
        text.push('\n');
    }
    if style.crlf {
        text = text.replace('\n', "\r\n");
    }
    text
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Scalar(v) => v.serialize(s),
            Json::Array(a) => {
                let mut seq = s.serialize_seq(Some(a.len()))?;
                for v in a {
                    seq.serialize_element(v)?;
                }
                seq.end()
            }
            Json::Object(m) => {
                let mut map = s.serialize_map(Some(m.len()))?;
                for (k, v) in m {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Json, D::Error> {
        d.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Json, E> {
        Ok(Json::Scalar(serde_json::Value::Null))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Scalar(v.into()))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Json, E> {
        Ok(Json::Scalar(v.into()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Json, E> {
        Ok(Json::Scalar(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Json, E> {
        Ok(Json::Scalar(v.into()))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Json, E> {
        Ok(Json::str(v))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Json, E> {
        Ok(Json::Scalar(serde_json::Value::String(v)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut a = Vec::new();
        while let Some(v) = seq.next_element()? {
            a.push(v);
        }
        Ok(Json::Array(a))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut m = Vec::new();
        while let Some((k, v)) = map.next_entry::<String, Json>()? {
            m.push((k, v));
        }
        Ok(Json::Object(m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_keep_their_order_and_the_file_its_layout() {
        let text = "{\r\n\t\"z\": 1,\r\n\t\"a\": [true, null, \"é\"]\r\n}";
        let doc = parse(text).expect("parse");
        assert_eq!(
            render(&doc, &Style::of(Some(text))),
            "{\r\n\t\"z\": 1,\r\n\t\"a\": [\r\n\t\ttrue,\r\n\t\tnull,\r\n\t\t\"é\"\r\n\t]\r\n}"
        );
    }

    #[test]
    fn a_new_file_gets_two_spaces_and_a_final_newline() {
        let doc = Json::object(vec![("hooks", Json::Object(Vec::new()))]);
        assert_eq!(render(&doc, &Style::of(None)), "{\n  \"hooks\": {}\n}\n");
    }

    #[test]
    fn blank_text_is_an_empty_object_and_garbage_is_refused() {
        assert_eq!(parse(" \n").ok(), Some(Json::Object(Vec::new())));
        assert!(parse("{\"a\": }").is_err());
    }
}
