//! Smart-account control checked on the chain (API.md §5, `--rpc-url`): the account's
//! ERC-1271 `isValidSignature` judges a signature its owner made. The check waits on the
//! network, so handlers run it as deferred work ([`crate::handler::Outcome::Defer`]), never
//! on an event loop or the sequencer. A "no" from the chain leaves the decision to the
//! built-in registry in the engine (an account linked there still passes); so does an RPC
//! failure, and a refusal then says the chain could not be asked.

use std::sync::Arc;

use ladder_chain::Erc1271Verifier;
use ladder_protocol::{Address, Signature};

use crate::handler::Outcome;

/// One question for the chain: does `signer` (who made `signature` over `digest`) control
/// `account`?
#[derive(Clone, Debug)]
pub struct ControlCheck {
    /// The smart account.
    pub account: Address,
    /// The EOA whose signature it is (already recovered).
    pub signer: Address,
    /// What was signed.
    pub digest: [u8; 32],
    /// The signature.
    pub signature: Signature,
}

/// The chain's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The account accepts the signature: the signer controls it.
    Controls,
    /// The account does not accept it (or has no code): the engine's registry decides.
    NotOnChain,
    /// The chain could not be asked; the text says why.
    Unreachable(String),
}

impl Verdict {
    /// The message of a refusal for an unreachable chain.
    pub fn refusal(why: &str) -> String {
        format!("smart-account check failed: {why}")
    }
}

/// The chain's verifier, when one is configured.
#[derive(Clone, Default)]
pub struct SmartAccounts {
    verifier: Option<Arc<Erc1271Verifier>>,
}

impl std::fmt::Debug for SmartAccounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmartAccounts")
            .field("on_chain", &self.verifier.is_some())
            .finish()
    }
}

impl SmartAccounts {
    /// Checks on the chain through `verifier`.
    pub fn on_chain(verifier: Arc<Erc1271Verifier>) -> SmartAccounts {
        SmartAccounts {
            verifier: Some(verifier),
        }
    }

    /// Whether `signer` acting for `account` must be checked on the chain.
    pub fn needs_check(&self, account: &Address, signer: &Address) -> bool {
        self.verifier.is_some() && account != signer
    }

    /// Runs `then` with the verdict on each of `checks`, in order: at once when every
    /// answer is cached, on a deferred worker otherwise (the calls wait on the network).
    pub fn judge(
        &self,
        checks: Vec<ControlCheck>,
        then: impl FnOnce(Vec<Verdict>) -> Outcome + Send + 'static,
    ) -> Outcome {
        let cached: Option<Vec<Verdict>> = checks.iter().map(|c| self.cached(c)).collect();
        if let Some(verdicts) = cached {
            return then(verdicts);
        }
        let accounts = self.clone();
        Outcome::defer(move || then(checks.iter().map(|c| accounts.check(c)).collect()))
    }

    /// Whether the chain's answer to `question` is cached (judging it makes no call).
    pub fn is_cached(&self, question: &ControlCheck) -> bool {
        self.verifier.is_none() || self.cached(question).is_some()
    }

    /// The verdict from the cache, without a call.
    fn cached(&self, question: &ControlCheck) -> Option<Verdict> {
        let verifier = self.verifier.as_ref()?;
        verifier
            .cached(&question.account, &question.signer)
            .map(|controls| {
                if controls {
                    Verdict::Controls
                } else {
                    Verdict::NotOnChain
                }
            })
    }

    /// Asks the chain (blocks for at most the RPC timeout).
    pub fn check(&self, question: &ControlCheck) -> Verdict {
        let Some(verifier) = &self.verifier else {
            return Verdict::NotOnChain;
        };
        match verifier.controls(
            &question.account,
            &question.signer,
            &question.digest,
            question.signature.as_bytes(),
        ) {
            Ok(true) => Verdict::Controls,
            Ok(false) => Verdict::NotOnChain,
            Err(e) => Verdict::Unreachable(e.to_string()),
        }
    }
}
