//! The ledger: collateral and per-token positions of every address, in base units, with
//! what open orders hold reserved.
//!
//! A balance is `free + reserved - debt`. Debt arises only when a failed settlement takes
//! back tokens or collateral the holder has already moved on; later credits repay it first.

use serde::{Deserialize, Serialize};

use crate::key_hash::KeyMap;
use crate::orders::{Slot, NIL};
use crate::positions::PositionTable;
use crate::reject::Reject;
use crate::types::{Address, Outcome, Units};

/// One holding: collateral or one token of one address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Balance {
    /// Available to new orders and withdrawals.
    pub free: Units,
    /// Held by open orders.
    pub reserved: Units,
    /// Owed after a failed settlement; repaid by the next credits.
    pub debt: Units,
}

impl Balance {
    /// Free plus reserved (what the holder has, before debt).
    pub fn total(&self) -> Units {
        self.free + self.reserved
    }

    /// Moves `amount` from free to reserved.
    pub fn reserve(&mut self, amount: Units) -> Result<(), Reject> {
        if self.free < amount {
            return Err(Reject::NotEnoughBalance);
        }
        self.free -= amount;
        self.reserved += amount;
        Ok(())
    }

    /// Moves `amount` from reserved back to free, repaying debt first as every credit does:
    /// while a holder owes, nothing of the asset is free (no order, withdrawal, claim or
    /// redemption can use what is owed).
    pub fn release(&mut self, amount: Units) {
        assert!(self.reserved >= amount, "releasing more than reserved");
        self.reserved -= amount;
        self.credit(amount);
    }

    /// Spends `amount` out of reserved.
    pub fn spend_reserved(&mut self, amount: Units) {
        assert!(self.reserved >= amount, "spending more than reserved");
        self.reserved -= amount;
    }

    /// Spends `amount` out of free; the caller checked it is there.
    pub fn spend_free(&mut self, amount: Units) {
        assert!(self.free >= amount, "spending more than free");
        self.free -= amount;
    }

    /// Adds `amount`, repaying debt first.
    pub fn credit(&mut self, amount: Units) {
        let repaid = amount.min(self.debt);
        self.debt -= repaid;
        self.free += amount - repaid;
    }

    /// Takes `amount` back even if it is no longer free: what is missing becomes debt.
    pub fn debit_forced(&mut self, amount: Units) {
        let taken = amount.min(self.free);
        self.free -= taken;
        self.debt += amount - taken;
    }
}

/// One address's state.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Account {
    /// The address.
    pub address: Address,
    /// Collateral.
    pub collateral: Balance,
    /// Oldest open order.
    pub open_head: Slot,
    /// Newest open order.
    pub open_tail: Slot,
    /// Number of open orders.
    pub open_count: u32,
    /// Trades held in the engine this account took part in, oldest first (indices into the
    /// trade log; a final trade leaves once the history store holds it).
    pub trades: std::collections::VecDeque<u64>,
    /// API key ids, oldest first.
    pub api_keys: Vec<[u8; 16]>,
}

impl Account {
    fn new(address: Address) -> Account {
        Account {
            address,
            collateral: Balance::default(),
            open_head: NIL,
            open_tail: NIL,
            open_count: 0,
            trades: std::collections::VecDeque::new(),
            api_keys: Vec::new(),
        }
    }
}

/// Key of a position: account, market and outcome packed in one word.
fn position_key(account: u32, market: u32, outcome: Outcome) -> u64 {
    (u64::from(account) << 32) | (u64::from(market) << 1) | outcome.index() as u64
}

/// Every account and position.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Ledger {
    accounts: Vec<Account>,
    by_address: KeyMap<Address, u32>,
    positions: PositionTable,
    /// Taker fees collected, in collateral units.
    pub fees_collected_units: Units,
}

impl Ledger {
    /// The index of `address`, if it has an account.
    #[inline]
    pub fn find(&self, address: &Address) -> Option<u32> {
        self.by_address.get(address).copied()
    }

    /// The index of `address`, opening an account if needed.
    pub fn find_or_open(&mut self, address: Address) -> u32 {
        if let Some(index) = self.find(&address) {
            return index;
        }
        let index = self.accounts.len() as u32;
        self.accounts.push(Account::new(address));
        self.by_address.insert(address, index);
        index
    }

    /// The account at `index`.
    #[inline]
    pub fn account(&self, index: u32) -> &Account {
        &self.accounts[index as usize]
    }

    /// The account at `index`, mutably.
    #[inline]
    pub fn account_mut(&mut self, index: u32) -> &mut Account {
        &mut self.accounts[index as usize]
    }

    /// Every account, in opening order.
    pub fn accounts(&self) -> &[Account] {
        &self.accounts
    }

    /// Collateral of the account at `index`, mutably.
    #[inline]
    pub fn collateral_mut(&mut self, index: u32) -> &mut Balance {
        &mut self.accounts[index as usize].collateral
    }

    /// A position (zero when never held).
    #[inline]
    pub fn position(&self, account: u32, market: u32, outcome: Outcome) -> Balance {
        self.positions
            .get(position_key(account, market, outcome))
            .copied()
            .unwrap_or_default()
    }

    /// Starts loading what `position_mut(account, market, outcome)` reads.
    #[inline]
    pub fn prefetch_position(&self, account: u32, market: u32, outcome: Outcome) {
        self.positions
            .prefetch(position_key(account, market, outcome));
    }

    /// Starts loading the account at `index` (its collateral), if there is one.
    #[inline]
    pub fn prefetch_account(&self, index: u32) {
        if let Some(account) = self.accounts.get(index as usize) {
            crate::prefetch::prefetch(account);
        }
    }

    /// A position, mutably (created empty when never held).
    #[inline]
    pub fn position_mut(&mut self, account: u32, market: u32, outcome: Outcome) -> &mut Balance {
        self.positions
            .get_or_insert(position_key(account, market, outcome))
    }

    /// Every `(account, outcome)` owing tokens of `market`, sorted (a walk of every
    /// position: for the rare moment a market ends).
    pub fn debtors_in(&self, market: u32) -> Vec<(u32, Outcome)> {
        self.positions_sorted()
            .into_iter()
            .filter(|&(_, m, _, balance)| m == market && balance.debt > 0)
            .map(|(account, _, outcome, _)| (account, outcome))
            .collect()
    }

    /// Every non-empty position as `(account, market, outcome, balance)`, sorted.
    pub fn positions_sorted(&self) -> Vec<(u32, u32, Outcome, Balance)> {
        let mut all: Vec<_> = self
            .positions
            .iter()
            .filter(|(_, b)| **b != Balance::default())
            .map(|(k, b)| {
                let outcome = if k & 1 == 0 {
                    Outcome::Yes
                } else {
                    Outcome::No
                };
                (
                    (k >> 32) as u32,
                    ((k & 0xffff_ffff) >> 1) as u32,
                    outcome,
                    *b,
                )
            })
            .collect();
        all.sort_by_key(|(a, m, o, _)| (*a, *m, o.index()));
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credits_repay_debt_first() {
        let mut b = Balance {
            free: 5,
            reserved: 0,
            debt: 0,
        };
        b.debit_forced(8);
        assert_eq!(
            b,
            Balance {
                free: 0,
                reserved: 0,
                debt: 3
            }
        );
        b.credit(10);
        assert_eq!(
            b,
            Balance {
                free: 7,
                reserved: 0,
                debt: 0
            }
        );
    }

    #[test]
    fn reserve_refuses_more_than_free() {
        let mut b = Balance {
            free: 5,
            reserved: 0,
            debt: 0,
        };
        assert_eq!(b.reserve(6), Err(Reject::NotEnoughBalance));
        assert_eq!(b.reserve(5), Ok(()));
        assert_eq!(
            b,
            Balance {
                free: 0,
                reserved: 5,
                debt: 0
            }
        );
    }
}
