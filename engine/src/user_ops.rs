//! Redemptions through the service's own ERC-4337 bundler (API.md §13): a redeem user
//! operation, its signature already recovered by the gateway, is one journaled command. It
//! must come from a smart account of the registry (else `AA20`), be signed by one of its
//! owners (`AA24`), carry the account's next sequence number (`AA25`), and find something to
//! redeem in a resolved or voided market; it then pays every position of the sender in that
//! market out to collateral, as an on-chain redemption does, and leaves a receipt.

use serde::{Deserialize, Serialize};

use crate::claims::ClaimReason;
use crate::engine::Engine;
use crate::market::MarketState;
use crate::reject::Reject;
use crate::reply::Reply;
use crate::types::{Address, ConditionId, Hash32, Outcome};

/// What the bundler keeps of a user operation it carried out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserOpReceipt {
    /// The smart account.
    pub sender: Address,
    /// The operation's sequence number (its nonce, key 0).
    pub nonce: u64,
    /// The market redeemed.
    pub condition_id: ConditionId,
    /// The journal sequence it was applied at.
    pub seq: u64,
    /// Its transaction hash (deterministic from the operation and the sequence).
    pub transaction_hash: Hash32,
    /// Collateral paid out, in base units.
    pub payout_units: u64,
}

/// The transaction hash of a redemption carried out at `seq`: deterministic from the journal.
fn redemption_transaction_hash(user_op_hash: &Hash32, seq: u64) -> Hash32 {
    use sha3::{Digest, Keccak256};
    let mut hasher = Keccak256::new();
    hasher.update(b"ladder bundler redemption");
    hasher.update(user_op_hash.0);
    hasher.update(seq.to_be_bytes());
    crate::types::FixedBytes(hasher.finalize().into())
}

impl Engine {
    /// Carries out a redeem operation (see the module's documentation).
    pub(crate) fn redeem_user_op(
        &mut self,
        user_op_hash: &Hash32,
        sender: &Address,
        signer: &Address,
        nonce: u64,
        condition_id: &ConditionId,
    ) -> Reply {
        match self.check_user_op(sender, signer, nonce, condition_id) {
            Err(reject) => Reply::Rejected(reject),
            Ok(()) => {
                let before = self.collateral_free(sender);
                if let Err(reject) = self.record_redemption(sender, condition_id) {
                    return Reply::Rejected(reject);
                }
                let payout_units = self.collateral_free(sender).saturating_sub(before);
                *self.user_op_nonces.entry(*sender).or_insert(0) += 1;
                let transaction_hash = redemption_transaction_hash(user_op_hash, self.last_seq);
                self.user_op_receipts.insert(
                    *user_op_hash,
                    UserOpReceipt {
                        sender: *sender,
                        nonce,
                        condition_id: *condition_id,
                        seq: self.last_seq,
                        transaction_hash,
                        payout_units,
                    },
                );
                Reply::Ok
            }
        }
    }

    pub(crate) fn check_user_op(
        &self,
        sender: &Address,
        signer: &Address,
        nonce: u64,
        condition_id: &ConditionId,
    ) -> Result<(), Reject> {
        if !self
            .controllers
            .iter()
            .any(|(account, _)| account == sender)
        {
            return Err(Reject::AccountNotDeployed);
        }
        if !self.controllers.contains(&(*sender, *signer)) {
            return Err(Reject::UserOpSignature);
        }
        let expected = self.user_op_next_nonce(sender);
        if nonce != expected {
            return Err(Reject::UserOpNonce { expected });
        }
        self.check_redeemable(sender, condition_id)
    }

    /// Whether `sender` has something to redeem in `condition_id`: the market is known and
    /// resolved (or voided), and `sender` has a claimable position in it (a winning token, or
    /// either token of a voided market: what `claimable` lists; losing tokens alone are
    /// nothing to redeem). What a redeem needs of the ledger, whoever carries it out (the
    /// built-in bundler, or the chain's EntryPoint).
    pub fn check_redeemable(
        &self,
        sender: &Address,
        condition_id: &ConditionId,
    ) -> Result<(), Reject> {
        // A market the service does not know holds no claimable entry (CONTRACT 20 lists no
        // other refusal for it).
        let index = self
            .known_market_index(condition_id)
            .map_err(|_| Reject::NothingToRedeem)?;
        let MarketState::Resolved(resolution) = self.markets.get(index).state else {
            return Err(Reject::MarketNotResolved);
        };
        let account = self.ledger.find(sender).ok_or(Reject::NothingToRedeem)?;
        let claimable: u64 = [Outcome::Yes, Outcome::No]
            .into_iter()
            .filter(|&outcome| ClaimReason::of(resolution, outcome).is_some())
            .map(|outcome| self.ledger.position(account, index, outcome).free)
            .sum();
        if claimable == 0 {
            return Err(Reject::NothingToRedeem);
        }
        Ok(())
    }

    fn collateral_free(&self, address: &Address) -> u64 {
        self.ledger
            .find(address)
            .map_or(0, |account| self.ledger.account(account).collateral.free)
    }

    /// The sequence number `sender`'s next user operation must carry.
    pub fn user_op_next_nonce(&self, sender: &Address) -> u64 {
        self.user_op_nonces.get(sender).copied().unwrap_or(0)
    }

    /// The receipt of the user operation `user_op_hash`, if it was carried out.
    pub fn user_op_receipt(&self, user_op_hash: &Hash32) -> Option<UserOpReceipt> {
        self.user_op_receipts.get(user_op_hash).copied()
    }
}
