//! Known answers quoted in `docs/API.md` reproduce: a reader who checks an example against
//! the formula beside it gets the same bytes.

use ladder_protocol::L2Secret;

/// `docs/API.md`, read at test time so that an edited example is checked as it stands.
fn api_md() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/API.md");
    std::fs::read_to_string(path).expect("docs/API.md")
}

/// The JSON string value that follows `"key": "` at or after `from` in `text`.
fn string_after(text: &str, from: usize, key: &str) -> String {
    let marker = format!("\"{key}\": \"");
    let start = text[from..].find(&marker).expect(key) + from + marker.len();
    let end = text[start..].find('"').expect("closing quote") + start;
    text[start..end].to_string()
}

#[test]
fn the_user_channel_subscription_example_is_signed_with_the_example_credentials() {
    let doc = api_md();
    let credentials = doc.find("### 2.10 API credentials").expect("§2.10");
    let secret = string_after(&doc, credentials, "secret");
    let channel = doc.find("## 16. WebSocket /ws/user").expect("§16");
    let timestamp = string_after(&doc, channel, "timestamp");
    let signature = string_after(&doc, channel, "signature");
    let expected = L2Secret::from_base64(&secret)
        .expect("the example secret decodes")
        .sign(&timestamp, "GET", "/ws/user", b"");
    assert_eq!(signature, expected);
}
