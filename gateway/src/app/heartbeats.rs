//! `POST /heartbeats` and `DELETE /heartbeats` (L2; API.md §16): the market makers'
//! dead-man switch. The first beat (`{"heartbeat_id": null}`, `""` or no body) starts the
//! signing key's heartbeats; each later one names the id of the last answer and gets a new
//! one; a beat with any other id is 400 with the current id and does not count. When no
//! valid beat comes within `--heartbeat-timeout-ms`, the sequencer cancels every open order
//! of the key's address. `DELETE` stops them and cancels nothing.

use ladder_sequencer::{Completion, HeartbeatAnswer, HeartbeatOp, HeartbeatRequest, Work};
use serde_json::{json, Value};

use super::{ok_json, App, Replicated};
use crate::auth::L2Principal;
use crate::handler::{unexpected, Outcome};
use crate::http::{Method, Request, Response, Status};

/// Routes the heartbeat endpoints; `None` when the path is not one of them.
pub(super) fn route(app: &App, method: Method, path: &str, request: &Request) -> Option<Outcome> {
    if path != "/heartbeats" || !matches!(method, Method::Post | Method::Delete) {
        return None;
    }
    let op = match method {
        Method::Delete => Ok(HeartbeatOp::Stop),
        _ => beat_of(&request.body),
    };
    // A beat journals nothing: a primary short of standbys takes it (its refusal would let
    // the deadline pass and cancel a live market maker's orders); starts and stops are
    // journaled writes.
    let replicated = match &op {
        Ok(op) if !op.journals() => Replicated::NotNeeded,
        _ => Replicated::Needed,
    };
    Some(
        app.admits(replicated)
            .and_then(|()| app.l2(request))
            .map(|principal| match op {
                Ok(op) => submit(&principal, op),
                Err(why) => Outcome::error(Status::BadRequest, &why),
            })
            .unwrap_or_else(|refused| refused),
    )
}

/// The beat a body asks for: a start (no body, `{}`, a null or empty `heartbeat_id`) or a
/// beat naming an id.
fn beat_of(body: &[u8]) -> Result<HeartbeatOp, String> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(HeartbeatOp::Start);
    }
    let value: Value = serde_json::from_slice(body).map_err(|e| format!("body: not JSON ({e})"))?;
    let Value::Object(fields) = value else {
        return Err("body: expected an object {\"heartbeat_id\": ...}".into());
    };
    match fields.get("heartbeat_id") {
        None | Some(Value::Null) => Ok(HeartbeatOp::Start),
        Some(Value::String(id)) if id.is_empty() => Ok(HeartbeatOp::Start),
        Some(Value::String(id)) if id.len() <= HEARTBEAT_ID_BYTES_MAX => {
            Ok(HeartbeatOp::Beat(id.clone()))
        }
        Some(Value::String(_)) => Err(format!(
            "heartbeat_id: longer than {HEARTBEAT_ID_BYTES_MAX} bytes"
        )),
        Some(_) => Err("heartbeat_id: expected a string or null".into()),
    }
}

/// Longest heartbeat id accepted (ids are UUIDs, 36 bytes).
const HEARTBEAT_ID_BYTES_MAX: usize = 64;

fn submit(principal: &L2Principal, op: HeartbeatOp) -> Outcome {
    let request = HeartbeatRequest {
        key_id: *principal.key_id.as_bytes(),
        address: principal.address,
        op,
    };
    Outcome::submit(
        Work::Heartbeat(request),
        Box::new(|completion| match completion {
            Completion::Heartbeat { answer, .. } => respond(answer),
            other => unexpected(other),
        }),
    )
}

fn respond(answer: HeartbeatAnswer) -> Response {
    match answer {
        HeartbeatAnswer::Beating { heartbeat_id } => {
            ok_json(&json!({ "heartbeat_id": heartbeat_id }))
        }
        HeartbeatAnswer::WrongId { current } => {
            let body = json!({ "error": "invalid heartbeat id", "heartbeat_id": current });
            Response::json(Status::BadRequest, body.to_string().into_bytes())
        }
        HeartbeatAnswer::Stopped => ok_json(&json!({ "stopped": true })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_is_no_body_null_empty_or_an_object_without_the_id() {
        for body in [
            "",
            "  ",
            "{}",
            r#"{"heartbeat_id": null}"#,
            r#"{"heartbeat_id": ""}"#,
        ] {
            assert_eq!(beat_of(body.as_bytes()), Ok(HeartbeatOp::Start), "{body:?}");
        }
        assert_eq!(
            beat_of(br#"{"heartbeat_id": "abc"}"#),
            Ok(HeartbeatOp::Beat("abc".into()))
        );
        for bad in [&b"[1]"[..], b"nope", br#"{"heartbeat_id": 7}"#] {
            assert!(beat_of(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        let long = format!(r#"{{"heartbeat_id": "{}"}}"#, "x".repeat(65));
        assert!(beat_of(long.as_bytes()).is_err());
    }
}
