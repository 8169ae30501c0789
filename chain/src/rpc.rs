//! A blocking Ethereum JSON-RPC 2.0 client over HTTP(S), one request per call, bounded by a
//! timeout. Connections are pooled by the agent, so calls from one thread reuse them.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{json, Value};

/// Default bound on one call, connection included.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3);

/// Why a call did not give a result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RpcError {
    /// The node could not be reached or did not answer in time (worth retrying).
    Transport(String),
    /// The node answered with a JSON-RPC error object.
    Node {
        /// The error code (`3` is "execution reverted" on geth, anvil and most nodes).
        code: i64,
        /// The node's message.
        message: String,
        /// The error's `data`, when it is a string (revert data, hex).
        data: Option<String>,
    },
    /// The answer was not the JSON-RPC shape or not the expected type.
    Malformed(String),
}

impl RpcError {
    /// Whether the node refused the call because execution reverted.
    pub fn is_revert(&self) -> bool {
        match self {
            RpcError::Node { code, message, .. } => {
                *code == 3 || message.to_ascii_lowercase().contains("revert")
            }
            _ => false,
        }
    }

    /// Whether the node ran the call and its execution failed: it reverted, or it halted
    /// (an invalid opcode, out of gas, a bad jump, a stack fault...). Such an answer is the
    /// contract's, final and the same on every retry; any other error says nothing about it.
    pub fn is_execution_failure(&self) -> bool {
        /// What geth, erigon, anvil and nethermind say when execution halts.
        const HALTS: [&str; 9] = [
            "evm error",
            "invalid opcode",
            "opcode not found",
            "out of gas",
            "stack underflow",
            "stack overflow",
            "invalid jump",
            "write protection",
            "vm execution error",
        ];
        match self {
            RpcError::Node { message, .. } => {
                let message = message.to_ascii_lowercase();
                self.is_revert() || HALTS.iter().any(|halt| message.contains(halt))
            }
            _ => false,
        }
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RpcError::Transport(why) => write!(f, "RPC node unreachable: {why}"),
            RpcError::Node { code, message, .. } => write!(f, "RPC error {code}: {message}"),
            RpcError::Malformed(why) => write!(f, "RPC answer malformed: {why}"),
        }
    }
}

impl std::error::Error for RpcError {}

/// A JSON-RPC endpoint.
pub struct RpcClient {
    agent: ureq::Agent,
    url: String,
    next_id: AtomicU64,
}

impl RpcClient {
    /// A client of `url` (`http://` or `https://`) whose calls give up after `timeout`.
    pub fn new(url: &str, timeout: Duration) -> Result<RpcClient, RpcError> {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(RpcError::Malformed(format!(
                "the URL must start with http:// or https://, got {url:?}"
            )));
        }
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .build()
            .into();
        Ok(RpcClient {
            agent,
            url: url.to_string(),
            next_id: AtomicU64::new(1),
        })
    }

    /// The endpoint.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Calls `method` with `params`; the `result` member of the answer.
    pub fn call(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let body = serde_json::to_vec(&request).map_err(|e| RpcError::Malformed(e.to_string()))?;
        let mut response = self
            .agent
            .post(&self.url)
            .header("content-type", "application/json")
            .send(&body[..])
            .map_err(|e| RpcError::Transport(e.to_string()))?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| RpcError::Transport(e.to_string()))?;
        let answer: Value = serde_json::from_str(&text)
            .map_err(|_| RpcError::Transport(format!("HTTP {status}: {}", truncate(&text, 200))))?;
        parse_answer(answer)
    }

    /// `eth_chainId`.
    pub fn chain_id(&self) -> Result<u64, RpcError> {
        quantity(&self.call("eth_chainId", json!([]))?)
    }

    /// `eth_blockNumber`.
    pub fn block_number(&self) -> Result<u64, RpcError> {
        quantity(&self.call("eth_blockNumber", json!([]))?)
    }

    /// `eth_call` of `data` on `to` at the latest block; the returned bytes.
    pub fn eth_call(&self, to: &str, data: &[u8]) -> Result<Vec<u8>, RpcError> {
        self.eth_call_at(to, data, "latest")
    }

    /// `eth_call` of `data` on `to` at `block` (a tag such as `latest` or `pending`).
    pub fn eth_call_at(&self, to: &str, data: &[u8], block: &str) -> Result<Vec<u8>, RpcError> {
        let result = self.call("eth_call", json!([{"to": to, "data": to_hex(data)}, block]))?;
        bytes(&result)
    }
}

/// The `result` of a JSON-RPC answer, or its error.
fn parse_answer(mut answer: Value) -> Result<Value, RpcError> {
    if let Some(error) = answer.get("error") {
        let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("no message")
            .to_string();
        let data = error
            .get("data")
            .and_then(Value::as_str)
            .map(str::to_string);
        return Err(RpcError::Node {
            code,
            message,
            data,
        });
    }
    match answer.get_mut("result") {
        Some(result) => Ok(result.take()),
        None => Err(RpcError::Malformed("neither result nor error".into())),
    }
}

fn truncate(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

/// `0x` and lowercase hex of `data`.
pub fn to_hex(data: &[u8]) -> String {
    format!("0x{}", hex::encode(data))
}

/// A JSON-RPC quantity (`"0x1a"`) as a number.
pub fn quantity(value: &Value) -> Result<u64, RpcError> {
    let text = value
        .as_str()
        .ok_or_else(|| RpcError::Malformed(format!("expected a hex quantity, got {value}")))?;
    let digits = text
        .strip_prefix("0x")
        .ok_or_else(|| RpcError::Malformed(format!("quantity without 0x: {text}")))?;
    u64::from_str_radix(digits, 16)
        .map_err(|_| RpcError::Malformed(format!("quantity out of range: {text}")))
}

/// JSON-RPC data (`"0x…"`) as bytes.
pub fn bytes(value: &Value) -> Result<Vec<u8>, RpcError> {
    let text = value
        .as_str()
        .ok_or_else(|| RpcError::Malformed(format!("expected hex data, got {value}")))?;
    let digits = text
        .strip_prefix("0x")
        .ok_or_else(|| RpcError::Malformed(format!("data without 0x: {text}")))?;
    hex::decode(digits).map_err(|_| RpcError::Malformed(format!("data not hex: {text}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_gives_its_result_or_its_error() {
        assert_eq!(
            parse_answer(json!({"jsonrpc": "2.0", "id": 1, "result": "0x10"})),
            Ok(json!("0x10"))
        );
        let revert = parse_answer(json!({"jsonrpc": "2.0", "id": 1,
            "error": {"code": 3, "message": "execution reverted: no", "data": "0x08c379a0"}}))
        .unwrap_err();
        assert!(revert.is_revert());
        assert_eq!(
            revert,
            RpcError::Node {
                code: 3,
                message: "execution reverted: no".into(),
                data: Some("0x08c379a0".into())
            }
        );
        assert!(revert.is_execution_failure());
        for (code, halt) in [
            (-32603, "EVM error InvalidFEOpcode"),
            (-32603, "EVM error OutOfGas"),
            (-32000, "invalid opcode: INVALID"),
            (-32000, "out of gas"),
            (-32000, "stack underflow (0 <=> 1)"),
        ] {
            let error = RpcError::Node {
                code,
                message: halt.into(),
                data: None,
            };
            assert!(error.is_execution_failure(), "{halt}");
            assert!(!error.is_revert(), "{halt}");
        }
        for unanswered in [
            RpcError::Node {
                code: -32005,
                message: "limit exceeded".into(),
                data: None,
            },
            RpcError::Node {
                code: -32000,
                message: "header not found".into(),
                data: None,
            },
            RpcError::Transport("connection refused".into()),
        ] {
            assert!(!unanswered.is_execution_failure(), "{unanswered}");
        }
        assert!(matches!(
            parse_answer(json!({"jsonrpc": "2.0", "id": 1})),
            Err(RpcError::Malformed(_))
        ));
    }

    #[test]
    fn quantities_and_data_decode_and_refuse_bad_forms() {
        assert_eq!(quantity(&json!("0x1a")), Ok(26));
        assert_eq!(quantity(&json!("0x0")), Ok(0));
        assert!(quantity(&json!("1a")).is_err());
        assert!(quantity(&json!(26)).is_err());
        assert_eq!(bytes(&json!("0x")), Ok(vec![]));
        assert_eq!(bytes(&json!("0x00ff")), Ok(vec![0, 255]));
        assert!(bytes(&json!("0xzz")).is_err());
        assert_eq!(to_hex(&[1, 171]), "0x01ab");
    }

    #[test]
    fn an_unreachable_node_is_a_transport_error_within_the_timeout() {
        // Port 9 on loopback (discard) is closed on these machines: the connection is refused.
        let client = RpcClient::new("http://127.0.0.1:9", Duration::from_millis(500)).unwrap();
        let error = client.block_number().unwrap_err();
        assert!(matches!(error, RpcError::Transport(_)), "{error:?}");
        assert!(RpcClient::new("ftp://x", DEFAULT_TIMEOUT).is_err());
    }
}
