//! Who may call the webhook: `Authorization: Bearer <key>`, or an HMAC-SHA256 signature over
//! the timestamp, the method, the request target and the body ([`string_to_sign`]), fresh,
//! unseen and timestamped after the server's start; comparisons constant-time.

use ring::hmac;

use super::state::{Shared, now_ms};

/// How old a signed request's timestamp may be.
pub const SIGNATURE_WINDOW_S: i64 = 300;
/// How far ahead of the server's clock a signed request's timestamp may be (clock skew).
pub const SIGNATURE_FUTURE_S: i64 = 5;

/// The timestamp before which (inclusive) a server started at `started_s` refuses signed
/// requests: the latest its predecessor, stopped before it started, can have accepted (its clock
/// then, plus [`SIGNATURE_FUTURE_S`]). So no signature seen before a restart is accepted after
/// it, with nothing persisted; a signed request in the first seconds after a start is refused.
pub fn not_before_s(started_s: i64) -> i64 {
    started_s + SIGNATURE_FUTURE_S
}

/// What a signature signs: the timestamp, the method, the request target (path and query as
/// sent) and the body — `"{timestamp}\n{METHOD}\n{target}\n{body}"`. None of the first three
/// can hold a newline, so no two requests share a string (and none is the old
/// `"{timestamp}.{body}"`, which signed neither method nor URL).
pub fn string_to_sign(timestamp: &str, method: &str, target: &str, body: &[u8]) -> Vec<u8> {
    let mut message = Vec::with_capacity(timestamp.len() + method.len() + target.len() + 3 + body.len());
    for part in [timestamp, method, target] {
        message.extend_from_slice(part.as_bytes());
        message.push(b'\n');
    }
    message.extend_from_slice(body);
    message
}

/// Whether `ts` is a timestamp a signed request may carry at `now_s`.
pub(super) fn fresh(ts: i64, now_s: i64, not_before_s: i64) -> bool {
    ts > not_before_s && ts >= now_s - SIGNATURE_WINDOW_S && ts <= now_s + SIGNATURE_FUTURE_S
}

/// A bearer key is presented and is not the key (refused before the body is read).
pub(super) fn wrong_bearer(shared: &Shared, headers: &hyper::HeaderMap) -> bool {
    bearer(headers).is_some_and(|token| !bearer_matches(shared, token))
}

pub(super) fn bearer(headers: &hyper::HeaderMap) -> Option<&str> {
    headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "))
}

pub(super) fn bearer_matches(shared: &Shared, token: &str) -> bool {
    hmac::verify(&shared.key.bearer, token.trim().as_bytes(), shared.key.bearer_tag.as_ref()).is_ok()
}

/// Bearer token or a fresh, unseen HMAC signature over [`string_to_sign`] of this request.
pub(super) fn authenticated(shared: &Shared, parts: &hyper::http::request::Parts, body: &[u8]) -> bool {
    if let Some(token) = bearer(&parts.headers) {
        return bearer_matches(shared, token);
    }
    let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
    let (Some(signature), Some(timestamp)) = (header("x-lakehouse-signature"), header("x-lakehouse-timestamp")) else {
        return false;
    };
    let Some(tag) = signature.strip_prefix("sha256=").and_then(|h| hex::decode(h.trim()).ok()) else { return false };
    let Ok(ts) = timestamp.trim().parse::<i64>() else { return false };
    let now = now_ms() / 1000;
    if !fresh(ts, now, shared.not_before_s) {
        return false;
    }
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let message = string_to_sign(timestamp.trim(), parts.method.as_str(), target, body);
    if hmac::verify(&shared.key.signing, &message, &tag).is_err() {
        return false;
    }
    // A valid signature is accepted once.
    let Ok(mut seen) = shared.seen.lock() else { return false };
    seen.retain(|_, t| *t >= now - SIGNATURE_WINDOW_S);
    seen.insert(hex::encode(&tag), ts).is_none()
}

#[cfg(test)]
mod tests {
    use hyper::Request;

    use super::*;
    use crate::functions::serve::state::tests::shared;

    fn parts(method: &str, target: &str, headers: &[(&str, String)]) -> hyper::http::request::Parts {
        let mut builder = Request::builder().method(method).uri(target);
        for (name, value) in headers {
            builder = builder.header(*name, value);
        }
        builder.body(()).unwrap().into_parts().0
    }

    fn signature(key: &[u8], ts: i64, method: &str, target: &str, body: &[u8]) -> Vec<(&'static str, String)> {
        let tag =
            hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), &string_to_sign(&ts.to_string(), method, target, body));
        vec![
            ("x-lakehouse-timestamp", ts.to_string()),
            ("x-lakehouse-signature", format!("sha256={}", hex::encode(tag))),
        ]
    }

    /// A signature is good for its method, request target and body only, once, and only when
    /// timestamped after the server's start (its predecessor's signatures), within the window.
    #[test]
    fn a_signature_covers_method_target_and_body_once() {
        let s = shared(&["a", "b"]);
        let key = b"0123456789abcdef-secret";
        let now = now_ms() / 1000;
        let (gate_a, gate_b) = ("/v1/tables/a/gate", "/v1/tables/b/gate");
        let signed = signature(key, now, "POST", gate_a, b"{}");
        for (method, target, body) in [
            ("POST", gate_b, &b"{}"[..]),
            ("GET", gate_a, b"{}"),
            ("POST", gate_a, b"{} "),
            ("POST", "/v1/tables/a/gate?x=1", b"{}"),
        ] {
            assert!(!authenticated(&s, &parts(method, target, &signed), body), "{method} {target}");
        }
        assert!(authenticated(&s, &parts("POST", gate_a, &signed), b"{}"));
        assert!(!authenticated(&s, &parts("POST", gate_a, &signed), b"{}"), "a replay");
        // A GET's signature is no trigger.
        let get = signature(key, now, "GET", "/v1/runs/x", b"");
        assert!(!authenticated(&s, &parts("POST", gate_a, &get), b""));
        assert!(authenticated(&s, &parts("GET", "/v1/runs/x", &get), b""));
        // The old string, `timestamp.body`, is refused.
        let old = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), format!("{now}.{{}}").as_bytes());
        let old = vec![
            ("x-lakehouse-timestamp", now.to_string()),
            ("x-lakehouse-signature", format!("sha256={}", hex::encode(old))),
        ];
        assert!(!authenticated(&s, &parts("POST", gate_a, &old), b"{}"));
        for ts in [now - SIGNATURE_WINDOW_S - 1, now + SIGNATURE_FUTURE_S + 2] {
            assert!(!authenticated(&s, &parts("POST", gate_a, &signature(key, ts, "POST", gate_a, b"")), b""), "{ts}");
        }
        // Signed before a restart: refused by the new server whatever its window says.
        let restarted = Shared { not_before_s: not_before_s(now), ..shared(&["a"]) };
        for ts in [now - 10, now, now + SIGNATURE_FUTURE_S] {
            assert!(!authenticated(&restarted, &parts("POST", gate_a, &signature(key, ts, "POST", gate_a, b"")), b""));
        }
        // A second after the start, a client a few seconds ahead gets through.
        assert!(fresh(now + SIGNATURE_FUTURE_S + 1, now + 1, not_before_s(now)));
    }

    #[test]
    fn the_string_to_sign_separates_its_parts() {
        assert_eq!(
            string_to_sign("1700000000", "POST", "/v1/tables/a.b/gate", b"{}"),
            b"1700000000\nPOST\n/v1/tables/a.b/gate\n{}"
        );
        // Unambiguous because a request target holds no newline (nor does a method or a number).
        assert!("/a\nb".parse::<hyper::Uri>().is_err());
    }
}
