//! OTLP over gRPC, the little of it one unary `Export` call needs (pure):
//! the request framed as a gzip-compressed gRPC message, and the answer's
//! status read into what the sender does next, as the OTLP exporter spec
//! says (which codes are retried, `RetryInfo` honoured).

use std::time::Duration;

use base64::Engine as _;
use prost::Message as _;

/// The method every OTLP/gRPC metrics receiver serves.
pub const EXPORT_PATH: &str = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export";

/// A gzipped message as one gRPC length-prefixed message (compressed
/// flag set; the request says `grpc-encoding: gzip`).
pub fn frame(gzipped: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + gzipped.len());
    out.push(1);
    out.extend_from_slice(&(gzipped.len() as u32).to_be_bytes());
    out.extend_from_slice(gzipped);
    out
}

/// The first message of a gRPC answer body, uncompressed (`gzip`: the
/// answer said `grpc-encoding: gzip`); `None` for a body without a whole
/// message or compressed some other way.
pub fn first_message(body: &[u8], gzip: bool, max: usize) -> Option<Vec<u8>> {
    let (&flag, rest) = body.split_first()?;
    let len = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    let message = rest.get(4..4 + len)?;
    match flag {
        0 => Some(message.to_vec()),
        1 if gzip => {
            let mut out = Vec::new();
            let read = std::io::Read::read_to_end(
                &mut std::io::Read::take(flate2::read::GzDecoder::new(message), max as u64),
                &mut out,
            );
            read.ok().map(|_| out)
        }
        _ => None,
    }
}

/// What the sender does with an answer's status.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    Taken,
    /// Try again, after the receiver's `RetryInfo` delay if it gave one.
    Retry(Option<Duration>),
    /// Refused as it is: halving may help (`too_large`: the receiver's
    /// message size limit, the gRPC 413).
    Refused {
        too_large: bool,
    },
    Failed,
}

/// The verdict on a `grpc-status` code, with the answer's
/// `grpc-status-details-bin` (a `google.rpc.Status`, base64) if any.
pub fn verdict(code: u32, details: Option<&str>) -> Verdict {
    match code {
        0 => Verdict::Taken,
        // CANCELLED, DEADLINE_EXCEEDED, ABORTED, OUT_OF_RANGE,
        // UNAVAILABLE, DATA_LOSS: retryable, as OTLP says.
        1 | 4 | 10 | 11 | 14 | 15 => Verdict::Retry(details.and_then(retry_delay)),
        // RESOURCE_EXHAUSTED is retried only when the receiver says when;
        // without, it is a limit such as the message size.
        8 => match details.and_then(retry_delay) {
            Some(after) => Verdict::Retry(Some(after)),
            None => Verdict::Refused { too_large: true },
        },
        // INVALID_ARGUMENT: a malformed point, found by halving.
        3 => Verdict::Refused { too_large: false },
        _ => Verdict::Failed,
    }
}

/// The gRPC code for an answer that is not HTTP 200, as gRPC's own
/// mapping says (for proxies in between).
pub fn code_of_http(status: u16) -> u32 {
    match status {
        400 => 13,
        401 => 16,
        403 => 7,
        404 => 12,
        429 | 502..=504 => 14,
        _ => 2,
    }
}

/// A code's name, for logs and `/readyz`.
pub fn code_name(code: u32) -> &'static str {
    const NAMES: [&str; 17] = [
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    ];
    NAMES.get(code as usize).copied().unwrap_or("UNKNOWN")
}

/// `grpc-message`, percent-decoded.
pub fn message(raw: &str) -> String {
    percent_encoding::percent_decode_str(raw)
        .decode_utf8_lossy()
        .into_owned()
}

#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
    #[prost(message, repeated, tag = "3")]
    details: Vec<Any>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Any {
    #[prost(string, tag = "1")]
    type_url: String,
    #[prost(bytes = "vec", tag = "2")]
    value: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct RetryInfo {
    #[prost(message, optional, tag = "1")]
    retry_delay: Option<ProtoDuration>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ProtoDuration {
    #[prost(int64, tag = "1")]
    seconds: i64,
    #[prost(int32, tag = "2")]
    nanos: i32,
}

/// The `google.rpc.RetryInfo` delay in a `grpc-status-details-bin`.
fn retry_delay(details: &str) -> Option<Duration> {
    let bytes = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(details.trim_end_matches('='))
        .ok()?;
    let status = RpcStatus::decode(bytes.as_slice()).ok()?;
    status
        .details
        .iter()
        .find(|any| any.type_url.ends_with("/google.rpc.RetryInfo"))
        .and_then(|any| RetryInfo::decode(any.value.as_slice()).ok()?.retry_delay)
        .map(|d| Duration::new(d.seconds.max(0) as u64, d.nanos.max(0) as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn details_with_delay(seconds: i64) -> String {
        let status = RpcStatus {
            code: 8,
            message: "slow down".into(),
            details: vec![Any {
                type_url: "type.googleapis.com/google.rpc.RetryInfo".into(),
                value: RetryInfo {
                    retry_delay: Some(ProtoDuration { seconds, nanos: 0 }),
                }
                .encode_to_vec(),
            }],
        };
        base64::engine::general_purpose::STANDARD.encode(status.encode_to_vec())
    }

    #[test]
    fn a_message_is_framed_and_read_back() {
        let gz = crate::exporter::otlp::gzip(b"points");
        let framed = frame(&gz);
        assert_eq!(framed[0], 1);
        assert_eq!(&framed[1..5], &(gz.len() as u32).to_be_bytes());
        assert_eq!(first_message(&framed, true, 1024).unwrap(), b"points");
        assert_eq!(first_message(&framed, false, 1024), None, "not said gzip");
        assert_eq!(
            first_message(&[0, 0, 0, 0, 2, 7, 7], false, 9).unwrap(),
            [7, 7]
        );
        assert_eq!(
            first_message(&[0, 0, 0, 0, 9, 7], false, 9),
            None,
            "cut short"
        );
        assert_eq!(first_message(&[], false, 9), None);
    }

    #[test]
    fn codes_are_retried_refused_or_failed_as_otlp_says() {
        assert_eq!(verdict(0, None), Verdict::Taken);
        assert_eq!(verdict(14, None), Verdict::Retry(None));
        assert_eq!(verdict(4, None), Verdict::Retry(None));
        assert_eq!(
            verdict(14, Some(&details_with_delay(3))),
            Verdict::Retry(Some(Duration::from_secs(3)))
        );
        assert_eq!(
            verdict(8, Some(&details_with_delay(2))),
            Verdict::Retry(Some(Duration::from_secs(2)))
        );
        assert_eq!(verdict(8, None), Verdict::Refused { too_large: true });
        assert_eq!(
            verdict(8, Some("%%not base64")),
            Verdict::Refused { too_large: true }
        );
        assert_eq!(verdict(3, None), Verdict::Refused { too_large: false });
        assert_eq!(verdict(16, None), Verdict::Failed);
        assert_eq!(verdict(12, None), Verdict::Failed);
        assert_eq!(code_of_http(503), 14);
        assert_eq!(code_of_http(404), 12);
        assert_eq!(code_name(14), "UNAVAILABLE");
        assert_eq!(code_name(99), "UNKNOWN");
        assert_eq!(message("bad%20point%3A%20NaN"), "bad point: NaN");
    }
}
