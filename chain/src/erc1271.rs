//! The ERC-1271 smart-account verifier (API.md §5): a signer controls a smart account when
//! the account's `isValidSignature(digest, signature)` returns `0x1626ba7e` for a signature
//! by that signer. The caller has already checked that the signature recovers to the signer,
//! so the answer is cached per (account, signer), with a bounded size and a lifetime.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use ladder_protocol::Address;
use parking_lot::Mutex;

use crate::abi::{encode_call, selector, Arg};
use crate::rpc::{RpcClient, RpcError};

/// What `isValidSignature` returns for a valid signature (its own selector).
pub const MAGIC_VALUE: [u8; 4] = [0x16, 0x26, 0xba, 0x7e];

/// Whether `returned` is the ABI encoding of the magic value as a `bytes4`: exactly one
/// 32-byte word, the four magic bytes then 28 zero bytes. Anything else (a longer answer
/// that merely starts with them, as a fallback function echoing its call data might give)
/// is no.
pub fn is_magic_word(returned: &[u8]) -> bool {
    returned.len() == 32 && returned[..4] == MAGIC_VALUE && returned[4..].iter().all(|&b| b == 0)
}

/// Cache and timing settings.
#[derive(Clone, Debug)]
pub struct VerifierConfig {
    /// Most cached answers; past it the oldest are dropped.
    pub cache_entries_max: usize,
    /// How long a "controls" answer is trusted.
    pub valid_ttl: Duration,
    /// How long a "does not control" answer is trusted (short: an owner may be added).
    pub invalid_ttl: Duration,
}

impl Default for VerifierConfig {
    fn default() -> Self {
        VerifierConfig {
            cache_entries_max: 100_000,
            valid_ttl: Duration::from_secs(60),
            invalid_ttl: Duration::from_secs(5),
        }
    }
}

/// Asks smart accounts over JSON-RPC, remembering the answers for a while.
pub struct Erc1271Verifier {
    rpc: RpcClient,
    config: VerifierConfig,
    cache: Mutex<AnswerCache>,
}

impl Erc1271Verifier {
    /// A verifier asking through `rpc`.
    pub fn new(rpc: RpcClient, config: VerifierConfig) -> Erc1271Verifier {
        Erc1271Verifier {
            rpc,
            config,
            cache: Mutex::new(AnswerCache::default()),
        }
    }

    /// Whether `signer` controls `account`, judged by the account on `digest` and the
    /// signer's `signature` over it (65 bytes r‖s‖v). An RPC failure is an error, never an
    /// answer; a revert or an account without code is "does not control".
    pub fn controls(
        &self,
        account: &Address,
        signer: &Address,
        digest: &[u8; 32],
        signature: &[u8],
    ) -> Result<bool, RpcError> {
        let key = (*account, *signer);
        if let Some(answer) = self.cache.lock().get(&key, Instant::now()) {
            return Ok(answer);
        }
        let answer = self.ask(account, digest, signature)?;
        let ttl = if answer {
            self.config.valid_ttl
        } else {
            self.config.invalid_ttl
        };
        self.cache.lock().insert(
            key,
            answer,
            Instant::now() + ttl,
            self.config.cache_entries_max,
        );
        Ok(answer)
    }

    /// The cached answer for (`account`, `signer`), if one is still trusted (no call made).
    pub fn cached(&self, account: &Address, signer: &Address) -> Option<bool> {
        self.cache.lock().get(&(*account, *signer), Instant::now())
    }

    /// One `eth_call` of `isValidSignature` on `account`, uncached.
    pub fn ask(
        &self,
        account: &Address,
        digest: &[u8; 32],
        signature: &[u8],
    ) -> Result<bool, RpcError> {
        let data = encode_call(
            selector("isValidSignature(bytes32,bytes)"),
            &[Arg::Word(*digest), Arg::Bytes(signature)],
        );
        match self.rpc.eth_call(&account.to_lowercase_hex(), &data) {
            Ok(returned) => Ok(is_magic_word(&returned)),
            // A call that reverted or halted is the account's answer: not a valid signature.
            Err(e) if e.is_execution_failure() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Number of cached answers.
    pub fn cached_answers(&self) -> usize {
        self.cache.lock().answers.len()
    }
}

/// Answers by key with expiry, dropped oldest-first when full.
#[derive(Default)]
struct AnswerCache {
    answers: HashMap<(Address, Address), (bool, Instant)>,
    order: VecDeque<(Address, Address)>,
}

impl AnswerCache {
    fn get(&mut self, key: &(Address, Address), now: Instant) -> Option<bool> {
        match self.answers.get(key) {
            Some((answer, expires)) if *expires > now => Some(*answer),
            Some(_) => {
                self.answers.remove(key);
                None
            }
            None => None,
        }
    }

    fn insert(&mut self, key: (Address, Address), answer: bool, expires: Instant, max: usize) {
        if max == 0 {
            return;
        }
        if self.answers.insert(key, (answer, expires)).is_none() {
            self.order.push_back(key);
        }
        while self.answers.len() > max {
            match self.order.pop_front() {
                Some(oldest) => {
                    self.answers.remove(&oldest);
                }
                None => break,
            }
        }
        // Keys already dropped on expiry linger in `order`; keep it from growing past twice
        // the bound.
        if self.order.len() > 2 * max {
            let answers = &self.answers;
            self.order.retain(|k| answers.contains_key(k));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> (Address, Address) {
        (Address([n; 20]), Address([n.wrapping_add(1); 20]))
    }

    #[test]
    fn only_the_whole_magic_word_is_yes() {
        let mut word = [0u8; 32];
        word[..4].copy_from_slice(&MAGIC_VALUE);
        assert!(is_magic_word(&word));
        let mut dirty = word;
        dirty[31] = 1;
        assert!(!is_magic_word(&dirty), "nonzero padding");
        assert!(!is_magic_word(&word[..4]), "four bytes alone");
        let echoed = [word.as_slice(), &[0u8; 32]].concat();
        assert!(!is_magic_word(&echoed), "more than one word");
        let mut other = word;
        other[0] = 0x17;
        assert!(!is_magic_word(&other));
    }

    #[test]
    fn answers_expire_and_the_cache_stays_within_its_bound() {
        let mut cache = AnswerCache::default();
        let now = Instant::now();
        cache.insert(key(1), true, now + Duration::from_secs(1), 3);
        assert_eq!(cache.get(&key(1), now), Some(true));
        assert_eq!(cache.get(&key(1), now + Duration::from_secs(2)), None);
        for n in 0..10 {
            cache.insert(key(n), n % 2 == 0, now + Duration::from_secs(60), 3);
        }
        assert_eq!(cache.answers.len(), 3);
        assert_eq!(cache.get(&key(9), now), Some(false));
        assert_eq!(cache.get(&key(8), now), Some(true));
        assert_eq!(cache.get(&key(0), now), None);
        assert!(cache.order.len() <= 6);
    }

    #[test]
    fn an_unreachable_node_is_an_error_and_is_not_cached() {
        let rpc = RpcClient::new("http://127.0.0.1:9", Duration::from_millis(300)).unwrap();
        let verifier = Erc1271Verifier::new(rpc, VerifierConfig::default());
        let result = verifier.controls(&Address([1; 20]), &Address([2; 20]), &[0; 32], &[0; 65]);
        assert!(matches!(result, Err(RpcError::Transport(_))), "{result:?}");
        assert_eq!(verifier.cached_answers(), 0);
    }
}
