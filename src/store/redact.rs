//! Errors of object stores as this crate shows them: without the server's body, where AWS puts
//! the access key id and what was signed.

/// An object_store error's message, without the server's XML body (AWS puts the access key id,
/// the string to sign and the canonical request into a `SignatureDoesNotMatch` body): what
/// precedes the body, plus the S3 error code from it.
pub fn scrub(e: &dyn std::fmt::Display) -> String {
    let text = e.to_string();
    let code = text.find("<Code>").and_then(|i| {
        let rest = &text[i + "<Code>".len()..];
        rest.find("</Code>").map(|j| rest[..j].to_string())
    });
    let head = text.split("<?xml").next().unwrap_or_default();
    let head = head.lines().next().unwrap_or_default().trim_end_matches([':', ' ']);
    match code {
        Some(code) if !code.is_empty() => format!("{head} ({code})"),
        _ => head.to_string(),
    }
}

/// How `Debug` shows a secret setting: whether it is set, never its value.
pub fn presence(value: &Option<String>) -> &'static str {
    if value.is_some() { "<set>" } else { "<unset>" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_error_bodies_are_reduced_to_their_code() {
        let raw = "Error performing PUT http://h/b/k - Server returned non-2xx status code: 403 Forbidden: \
                   <?xml version=\"1.0\"?><Error><Code>SignatureDoesNotMatch</Code>\
                   <AWSAccessKeyId>AKIDEXAMPLE</AWSAccessKeyId><StringToSign>x</StringToSign></Error>";
        let shown = scrub(&raw);
        assert!(shown.ends_with("403 Forbidden (SignatureDoesNotMatch)"), "{shown}");
        assert!(!shown.contains("AKIDEXAMPLE"), "{shown}");
        assert_eq!(scrub(&"plain failure\nsecond line"), "plain failure");
    }
}
