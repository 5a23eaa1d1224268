//! The long connection's wire format: `pbbp2.Frame`, a proto2 message the official SDKs send
//! as binary websocket messages (Feishu does not publish it; this follows the Go SDK's
//! `ws/pbbp2.pb.go` and the Node SDK's `pbbp2.js`).
//!
//! Fields 1–4 are `required`: they are on the wire even when zero (a ping has `SeqID` 0 and
//! `LogID` 0). prost writes `required` scalars unconditionally, which a proto3-style struct would
//! not. Data frames may arrive split (`sum` > 1): [`Reassembly`] joins the fragments by
//! `message_id`, and only the frame that completes a message is acknowledged.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// `Frame.method` of a control frame (ping, pong).
pub const METHOD_CONTROL: i32 = 0;
/// `Frame.method` of a data frame (an event, or our acknowledgement of one).
pub const METHOD_DATA: i32 = 1;

#[derive(Clone, PartialEq, prost::Message)]
pub struct Header {
    #[prost(string, required, tag = "1")]
    pub key: String,
    #[prost(string, required, tag = "2")]
    pub value: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Frame {
    #[prost(uint64, required, tag = "1")]
    pub seq_id: u64,
    #[prost(uint64, required, tag = "2")]
    pub log_id: u64,
    #[prost(int32, required, tag = "3")]
    pub service: i32,
    #[prost(int32, required, tag = "4")]
    pub method: i32,
    #[prost(message, repeated, tag = "5")]
    pub headers: Vec<Header>,
    #[prost(string, optional, tag = "6")]
    pub payload_encoding: Option<String>,
    #[prost(string, optional, tag = "7")]
    pub payload_type: Option<String>,
    #[prost(bytes = "vec", optional, tag = "8")]
    pub payload: Option<Vec<u8>>,
    #[prost(string, optional, tag = "9")]
    pub log_id_new: Option<String>,
}

impl Frame {
    /// The value of header `key` (the first one, if repeated).
    pub fn header(&self, key: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|h| h.key == key)
            .map(|h| h.value.as_str())
    }

    /// `type`: `ping`, `pong`, `event`, `card`.
    pub fn kind(&self) -> &str {
        self.header("type").unwrap_or_default()
    }

    /// A ping for the service the endpoint URL named.
    pub fn ping(service: i32) -> Frame {
        Frame {
            seq_id: 0,
            log_id: 0,
            service,
            method: METHOD_CONTROL,
            headers: vec![Header {
                key: "type".into(),
                value: "ping".into(),
            }],
            ..Default::default()
        }
    }

    /// The acknowledgement of data frame `received`: the same frame (ids, service, headers)
    /// with a `biz_rt` header (handling time in ms) and, as payload, the JSON response
    /// `{"code":200}` — with `data`, the base64 of `data`'s JSON (a card callback's answer).
    pub fn ack(received: &Frame, biz_rt_ms: u128, data: Option<&serde_json::Value>) -> Frame {
        use base64::Engine;
        let mut ack = received.clone();
        ack.method = METHOD_DATA;
        ack.headers.push(Header {
            key: "biz_rt".into(),
            value: biz_rt_ms.to_string(),
        });
        let payload = match data {
            Some(d) => serde_json::json!({
                "code": 200,
                "headers": {},
                "data": base64::engine::general_purpose::STANDARD.encode(d.to_string()),
            }),
            None => serde_json::json!({ "code": 200 }),
        };
        ack.payload = Some(payload.to_string().into_bytes());
        ack
    }
}

/// How long the fragments of a split message are kept waiting for the rest (the Go SDK's
/// cache TTL, refreshed by every fragment).
pub const FRAGMENT_TTL: Duration = Duration::from_secs(5);

/// More fragments than this is not a message Feishu would send: refused.
const MAX_FRAGMENTS: usize = 1024;

/// A fragment that cannot be placed.
#[derive(Debug, PartialEq)]
pub struct BadFragment(pub String);

struct Partial {
    parts: Vec<Option<Vec<u8>>>,
    touched: Instant,
}

/// Joins split data frames.
#[derive(Default)]
pub struct Reassembly {
    pending: HashMap<String, Partial>,
}

impl Reassembly {
    /// Adds fragment `seq` (0-based) of `sum` of message `id`; returns the whole payload once
    /// every fragment is in. An unsplit frame (`sum` ≤ 1) comes back at once.
    pub fn add(
        &mut self,
        id: &str,
        sum: usize,
        seq: usize,
        payload: Vec<u8>,
        now: Instant,
    ) -> Result<Option<Vec<u8>>, BadFragment> {
        self.expire(now);
        if sum <= 1 {
            return Ok(Some(payload));
        }
        if sum > MAX_FRAGMENTS {
            return Err(BadFragment(format!("message {id} claims {sum} fragments")));
        }
        if seq >= sum {
            return Err(BadFragment(format!(
                "fragment {seq} of message {id}, which has {sum}"
            )));
        }
        let partial = self
            .pending
            .entry(id.to_string())
            .or_insert_with(|| Partial {
                parts: vec![None; sum],
                touched: now,
            });
        if partial.parts.len() != sum {
            // The same id with another count: start over with this one.
            partial.parts = vec![None; sum];
        }
        partial.parts[seq] = Some(payload);
        partial.touched = now;
        if partial.parts.iter().any(Option::is_none) {
            return Ok(None);
        }
        let whole = self
            .pending
            .remove(id)
            .map(|p| p.parts.into_iter().flatten().flatten().collect())
            .unwrap_or_default();
        Ok(Some(whole))
    }

    /// Forgets messages whose last fragment came longer than [`FRAGMENT_TTL`] ago.
    pub fn expire(&mut self, now: Instant) {
        self.pending
            .retain(|_, p| now.saturating_duration_since(p.touched) < FRAGMENT_TTL);
    }

    /// Messages still waiting for fragments.
    #[cfg(test)]
    pub fn waiting(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    fn data_frame(headers: &[(&str, &str)], payload: &[u8]) -> Frame {
        Frame {
            seq_id: 41,
            log_id: 42,
            service: 7,
            method: METHOD_DATA,
            headers: headers
                .iter()
                .map(|(k, v)| Header {
                    key: k.to_string(),
                    value: v.to_string(),
                })
                .collect(),
            payload_encoding: Some("json".into()),
            payload_type: None,
            payload: Some(payload.to_vec()),
            log_id_new: Some("log-new".into()),
        }
    }

    #[test]
    fn a_ping_carries_its_zero_ids_on_the_wire() {
        let bytes = Frame::ping(7).encode_to_vec();
        // SeqID=0, LogID=0, service=7, method=0: all four present (tags 0x08, 0x10, 0x18, 0x20).
        assert_eq!(&bytes[..8], &[0x08, 0, 0x10, 0, 0x18, 7, 0x20, 0]);
        let back = Frame::decode(bytes.as_slice()).expect("decodes");
        assert_eq!(back.kind(), "ping");
        assert_eq!((back.seq_id, back.log_id, back.service), (0, 0, 7));
        assert_eq!(back.method, METHOD_CONTROL);
        assert_eq!(back.payload, None);
    }

    #[test]
    fn frames_round_trip_and_junk_is_an_error() {
        let f = data_frame(
            &[("type", "event"), ("message_id", "m1"), ("sum", "1")],
            br#"{"x":1}"#,
        );
        let back = Frame::decode(f.encode_to_vec().as_slice()).expect("decodes");
        assert_eq!(back, f);
        assert_eq!(back.header("message_id"), Some("m1"));
        assert_eq!(back.header("nope"), None);
        assert!(Frame::decode(&[0xff, 0xff, 0xff][..]).is_err());
    }

    #[test]
    fn an_ack_echoes_the_frame_with_biz_rt_and_a_response() {
        let f = data_frame(&[("type", "event"), ("message_id", "m1")], b"{}");
        let ack = Frame::ack(&f, 12, None);
        assert_eq!((ack.seq_id, ack.log_id, ack.service), (41, 42, 7));
        assert_eq!(ack.method, METHOD_DATA);
        assert_eq!(ack.payload_encoding.as_deref(), Some("json"));
        assert_eq!(ack.log_id_new.as_deref(), Some("log-new"));
        assert_eq!(ack.header("message_id"), Some("m1"));
        assert_eq!(ack.header("biz_rt"), Some("12"));
        let body: serde_json::Value =
            serde_json::from_slice(ack.payload.as_deref().unwrap_or_default()).expect("JSON");
        assert_eq!(body, serde_json::json!({ "code": 200 }));

        // A card callback's answer travels base64-encoded in `data`.
        use base64::Engine;
        let toast = serde_json::json!({ "toast": { "type": "info", "content": "ok" } });
        let ack = Frame::ack(&f, 3, Some(&toast));
        let body: serde_json::Value =
            serde_json::from_slice(ack.payload.as_deref().unwrap_or_default()).expect("JSON");
        assert_eq!(body["code"], 200);
        let data = base64::engine::general_purpose::STANDARD
            .decode(body["data"].as_str().expect("data"))
            .expect("base64");
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&data).expect("JSON"),
            toast
        );
    }

    #[test]
    fn fragments_are_joined_in_seq_order_whatever_the_arrival() {
        let mut r = Reassembly::default();
        let t = Instant::now();
        assert_eq!(r.add("m", 3, 2, b"cc".to_vec(), t), Ok(None));
        assert_eq!(r.add("m", 3, 0, b"aa".to_vec(), t), Ok(None));
        assert_eq!(r.add("other", 2, 1, b"y".to_vec(), t), Ok(None));
        assert_eq!(r.waiting(), 2);
        assert_eq!(
            r.add("m", 3, 1, b"bb".to_vec(), t),
            Ok(Some(b"aabbcc".to_vec()))
        );
        assert_eq!(r.waiting(), 1);
        assert_eq!(
            r.add("other", 2, 0, b"x".to_vec(), t),
            Ok(Some(b"xy".to_vec()))
        );
        // Unsplit: at once.
        assert_eq!(r.add("u", 1, 0, b"z".to_vec(), t), Ok(Some(b"z".to_vec())));
        assert_eq!(r.add("u", 0, 0, b"z".to_vec(), t), Ok(Some(b"z".to_vec())));
        assert_eq!(r.waiting(), 0);
    }

    #[test]
    fn a_fragment_out_of_range_is_refused_and_stale_ones_expire() {
        let mut r = Reassembly::default();
        let t = Instant::now();
        assert!(r.add("m", 2, 2, b"x".to_vec(), t).is_err());
        assert!(r.add("m", 5000, 0, b"x".to_vec(), t).is_err());
        assert_eq!(r.add("m", 2, 0, b"a".to_vec(), t), Ok(None));
        // The rest comes too late: the first fragment is gone, so the message waits again.
        let late = t + FRAGMENT_TTL + Duration::from_millis(1);
        assert_eq!(r.add("m", 2, 1, b"b".to_vec(), late), Ok(None));
        assert_eq!(r.waiting(), 1);
        r.expire(late + FRAGMENT_TTL);
        assert_eq!(r.waiting(), 0);
        // A fragment within the TTL keeps the message alive.
        assert_eq!(r.add("n", 2, 0, b"a".to_vec(), t), Ok(None));
        let soon = t + Duration::from_secs(4);
        assert_eq!(
            r.add("n", 2, 1, b"b".to_vec(), soon),
            Ok(Some(b"ab".to_vec()))
        );
    }
}
