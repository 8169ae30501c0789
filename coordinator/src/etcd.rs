//! A small blocking client of etcd v3 through its JSON gateway (`POST /v3/...`): leases, one
//! key, a prefix, and the compare-and-put that elects a leader. Keys and values travel in
//! base64, 64-bit numbers as JSON strings. Every call tries the endpoints in turn, starting
//! with the one that answered last.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde_json::{json, Value};

/// Why a call gave no answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EtcdError {
    /// No endpoint answered in time.
    Unreachable(String),
    /// An endpoint answered something that is not etcd's answer to the call.
    Malformed(String),
}

impl std::fmt::Display for EtcdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EtcdError::Unreachable(why) => write!(f, "etcd unreachable: {why}"),
            EtcdError::Malformed(why) => write!(f, "etcd answered unexpectedly: {why}"),
        }
    }
}

/// A lease granted by etcd.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    /// Its id.
    pub id: i64,
    /// Its time to live, in seconds, as etcd granted it (etcd may raise a short one).
    pub ttl_s: u64,
}

/// One key and its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyValue {
    /// The key.
    pub key: String,
    /// The value.
    pub value: Vec<u8>,
}

/// The etcd endpoints and an HTTP agent.
pub struct Etcd {
    agent: ureq::Agent,
    endpoints: Vec<String>,
    preferred: AtomicUsize,
}

impl Etcd {
    /// A client of `endpoints` (`http://host:port`), each call bounded by `timeout`.
    pub fn new(endpoints: &[String], timeout: Duration) -> Result<Etcd, String> {
        if endpoints.is_empty() {
            return Err("no etcd endpoint".into());
        }
        for endpoint in endpoints {
            if !endpoint.starts_with("http://") && !endpoint.starts_with("https://") {
                return Err(format!(
                    "etcd endpoint {endpoint:?}: must start with http:// or https://"
                ));
            }
        }
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .build()
            .into();
        Ok(Etcd {
            agent,
            endpoints: endpoints
                .iter()
                .map(|e| e.trim_end_matches('/').to_string())
                .collect(),
            preferred: AtomicUsize::new(0),
        })
    }

    /// Posts `body` to `path` on the first endpoint that answers.
    fn call(&self, path: &str, body: Value) -> Result<Value, EtcdError> {
        let body = body.to_string();
        let first = self.preferred.load(Ordering::Relaxed);
        let mut last_error = String::new();
        for step in 0..self.endpoints.len() {
            let index = (first + step) % self.endpoints.len();
            let url = format!("{}{path}", self.endpoints[index]);
            let answer = self
                .agent
                .post(&url)
                .header("content-type", "application/json")
                .send(body.as_bytes());
            let mut response = match answer {
                Ok(response) => response,
                Err(e) => {
                    last_error = format!("{url}: {e}");
                    continue;
                }
            };
            let status = response.status().as_u16();
            let text = match response.body_mut().read_to_string() {
                Ok(text) => text,
                Err(e) => {
                    last_error = format!("{url}: {e}");
                    continue;
                }
            };
            if status >= 500 {
                // A member without a quorum, or restarting: another may answer.
                last_error = format!("{url}: HTTP {status}: {}", short(&text));
                continue;
            }
            self.preferred.store(index, Ordering::Relaxed);
            let value: Value = serde_json::from_str(&text)
                .map_err(|_| EtcdError::Malformed(format!("{url}: {}", short(&text))))?;
            if status != 200 {
                return Err(EtcdError::Malformed(format!(
                    "{url}: HTTP {status}: {value}"
                )));
            }
            return Ok(value);
        }
        Err(EtcdError::Unreachable(last_error))
    }

    /// Grants a lease of `ttl_s` seconds.
    pub fn grant(&self, ttl_s: u64) -> Result<Lease, EtcdError> {
        let answer = self.call("/v3/lease/grant", json!({ "TTL": ttl_s.to_string() }))?;
        let id = number(&answer, "ID")?;
        let ttl = number(&answer, "TTL")?;
        if id == 0 || ttl <= 0 {
            return Err(EtcdError::Malformed(format!("lease grant: {answer}")));
        }
        Ok(Lease {
            id,
            ttl_s: ttl as u64,
        })
    }

    /// Renews lease `id`: its time to live again, or `None` when etcd no longer has it.
    pub fn keep_alive(&self, id: i64) -> Result<Option<u64>, EtcdError> {
        let answer = self.call("/v3/lease/keepalive", json!({ "ID": id.to_string() }))?;
        let result = answer
            .get("result")
            .ok_or_else(|| EtcdError::Malformed(format!("lease keepalive: {answer}")))?;
        let ttl = optional_number(result, "TTL")?.unwrap_or(0);
        Ok((ttl > 0).then_some(ttl as u64))
    }

    /// Revokes lease `id`, deleting the keys it holds.
    pub fn revoke(&self, id: i64) -> Result<(), EtcdError> {
        self.call("/v3/lease/revoke", json!({ "ID": id.to_string() }))
            .map(|_| ())
    }

    /// The value of `key`, if it has one.
    pub fn get(&self, key: &str) -> Result<Option<Vec<u8>>, EtcdError> {
        Ok(self.get_with_lease(key)?.map(|(value, _)| value))
    }

    /// The value of `key` and the lease that holds it (0: none), if it has one.
    pub fn get_with_lease(&self, key: &str) -> Result<Option<(Vec<u8>, i64)>, EtcdError> {
        let answer = self.call("/v3/kv/range", json!({ "key": BASE64.encode(key) }))?;
        let lease = match answer.get("kvs").and_then(|kvs| kvs.get(0)) {
            Some(kv) => optional_number(kv, "lease")?.unwrap_or(0),
            None => 0,
        };
        Ok(key_values(&answer)?
            .into_iter()
            .next()
            .map(|kv| (kv.value, lease)))
    }

    /// Every key under `prefix`, with its value.
    pub fn get_prefix(&self, prefix: &str) -> Result<Vec<KeyValue>, EtcdError> {
        let answer = self.call(
            "/v3/kv/range",
            json!({ "key": BASE64.encode(prefix), "range_end": BASE64.encode(prefix_end(prefix)) }),
        )?;
        key_values(&answer)
    }

    /// Sets `key` to `value`, held by `lease` (deleted with it) when given.
    pub fn put(&self, key: &str, value: &[u8], lease: Option<i64>) -> Result<(), EtcdError> {
        let mut request = json!({ "key": BASE64.encode(key), "value": BASE64.encode(value) });
        if let Some(lease) = lease {
            request["lease"] = json!(lease.to_string());
        }
        self.call("/v3/kv/put", request).map(|_| ())
    }

    /// Sets `key` to `value` only while `lease` holds `holder` (the leader's key): whether it
    /// did.
    pub fn put_while_lease_holds(
        &self,
        (key, value): (&str, &[u8]),
        (holder, lease): (&str, i64),
    ) -> Result<bool, EtcdError> {
        let answer = self.call(
            "/v3/kv/txn",
            json!({
                "compare": [{
                    "target": "LEASE", "key": BASE64.encode(holder),
                    "lease": lease.to_string(), "result": "EQUAL"
                }],
                "success": [{ "request_put": {
                    "key": BASE64.encode(key), "value": BASE64.encode(value)
                } }],
                "failure": []
            }),
        )?;
        Ok(answer.get("succeeded").and_then(Value::as_bool) == Some(true))
    }

    /// Sets `key` to `value` under `lease` only if `key` does not exist and `guard` holds
    /// `guard_value` (or does not exist, for `None`); sets `guard` to `new_guard_value` with
    /// it. Whether it did.
    pub fn create_if_absent(
        &self,
        (key, value, lease): (&str, &[u8], i64),
        (guard, guard_value, new_guard_value): (&str, Option<&[u8]>, &[u8]),
    ) -> Result<bool, EtcdError> {
        let guard_compare = match guard_value {
            None => json!({
                "target": "CREATE", "key": BASE64.encode(guard),
                "create_revision": "0", "result": "EQUAL"
            }),
            Some(expected) => json!({
                "target": "VALUE", "key": BASE64.encode(guard),
                "value": BASE64.encode(expected), "result": "EQUAL"
            }),
        };
        let answer = self.call(
            "/v3/kv/txn",
            json!({
                "compare": [
                    {
                        "target": "CREATE", "key": BASE64.encode(key),
                        "create_revision": "0", "result": "EQUAL"
                    },
                    guard_compare
                ],
                "success": [
                    { "request_put": {
                        "key": BASE64.encode(key), "value": BASE64.encode(value),
                        "lease": lease.to_string()
                    } },
                    { "request_put": {
                        "key": BASE64.encode(guard), "value": BASE64.encode(new_guard_value)
                    } }
                ],
                "failure": []
            }),
        )?;
        Ok(answer.get("succeeded").and_then(Value::as_bool) == Some(true))
    }
}

/// The first key after every key that starts with `prefix` (etcd's `range_end`).
fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

fn key_values(answer: &Value) -> Result<Vec<KeyValue>, EtcdError> {
    let Some(kvs) = answer.get("kvs") else {
        return Ok(Vec::new());
    };
    let kvs = kvs
        .as_array()
        .ok_or_else(|| EtcdError::Malformed(format!("range: {answer}")))?;
    kvs.iter()
        .map(|kv| {
            let field = |name: &str| -> Result<Vec<u8>, EtcdError> {
                match kv.get(name).and_then(Value::as_str) {
                    None => Ok(Vec::new()),
                    Some(text) => BASE64
                        .decode(text)
                        .map_err(|e| EtcdError::Malformed(format!("range {name}: {e}"))),
                }
            };
            Ok(KeyValue {
                key: String::from_utf8_lossy(&field("key")?).into_owned(),
                value: field("value")?,
            })
        })
        .collect()
}

fn optional_number(value: &Value, name: &str) -> Result<Option<i64>, EtcdError> {
    match value.get(name) {
        None => Ok(None),
        Some(Value::String(text)) => text
            .parse()
            .map(Some)
            .map_err(|_| EtcdError::Malformed(format!("{name}: {text:?}"))),
        Some(Value::Number(n)) => n
            .as_i64()
            .map(Some)
            .ok_or_else(|| EtcdError::Malformed(format!("{name}: {n}"))),
        Some(other) => Err(EtcdError::Malformed(format!("{name}: {other}"))),
    }
}

fn number(value: &Value, name: &str) -> Result<i64, EtcdError> {
    optional_number(value, name)?
        .ok_or_else(|| EtcdError::Malformed(format!("no {name} in {value}")))
}

fn short(text: &str) -> &str {
    let end = text
        .char_indices()
        .nth(200)
        .map_or(text.len(), |(index, _)| index);
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_ends_after_its_last_byte() {
        assert_eq!(prefix_end("/ladder/a/"), b"/ladder/a0".to_vec());
        assert_eq!(prefix_end(""), vec![0]);
    }

    #[test]
    fn numbers_come_as_strings_or_numbers_and_nothing_else() {
        let answer = json!({"ID": "7587899170280973061", "TTL": 2, "bad": true});
        assert_eq!(number(&answer, "ID"), Ok(7587899170280973061));
        assert_eq!(number(&answer, "TTL"), Ok(2));
        assert!(number(&answer, "bad").is_err());
        assert!(number(&answer, "missing").is_err());
        assert_eq!(optional_number(&answer, "missing"), Ok(None));
    }

    #[test]
    fn a_range_answer_gives_its_keys_and_values() {
        let answer = json!({"kvs": [{"key": BASE64.encode("/k"), "value": BASE64.encode("v")}]});
        assert_eq!(
            key_values(&answer),
            Ok(vec![KeyValue {
                key: "/k".into(),
                value: b"v".to_vec()
            }])
        );
        assert_eq!(key_values(&json!({"count": "0"})), Ok(vec![]));
    }

    #[test]
    fn endpoints_must_be_urls() {
        assert!(Etcd::new(&["127.0.0.1:2379".into()], Duration::from_secs(1)).is_err());
        assert!(Etcd::new(&[], Duration::from_secs(1)).is_err());
        assert!(Etcd::new(&["http://127.0.0.1:2379".into()], Duration::from_secs(1)).is_ok());
    }
}
