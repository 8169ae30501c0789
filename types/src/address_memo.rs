//! A small direct-mapped memo of values computed from an address (its EIP-55 checksum, its
//! owner id): a service writes and checks the same few addresses over and over, and each of
//! those values costs a hash (keccak, SHA-1) of a few hundred nanoseconds.
//!
//! Each address has one slot, chosen by its last bytes (as evenly spread as the keccak hash
//! an address is cut from); a newer address in a slot replaces the older. The memo never
//! grows past its slots and never changes a value: only how often it is computed.

use std::cell::RefCell;
use std::thread::LocalKey;

use crate::address::Address;

/// Slots of a memo.
pub const ADDRESS_MEMO_SLOTS: usize = 1024;

/// Values of `compute(address)` for recent addresses. Meant for a `thread_local!`, empty
/// until first used.
#[derive(Debug)]
pub struct AddressMemo<T> {
    slots: Vec<Option<(Address, T)>>,
}

impl<T: Copy> AddressMemo<T> {
    /// An empty memo, with no room made yet.
    pub const fn new() -> AddressMemo<T> {
        AddressMemo { slots: Vec::new() }
    }

    /// `compute(address)`, from the memo when it holds it.
    pub fn get_or(&mut self, address: Address, compute: impl FnOnce(Address) -> T) -> T {
        if self.slots.is_empty() {
            self.slots.resize_with(ADDRESS_MEMO_SLOTS, || None);
        }
        let slot = &mut self.slots[slot_of(address)];
        match slot {
            Some((held, value)) if *held == address => *value,
            _ => {
                let value = compute(address);
                *slot = Some((address, value));
                value
            }
        }
    }
}

impl<T: Copy> Default for AddressMemo<T> {
    fn default() -> Self {
        AddressMemo::new()
    }
}

/// `compute(address)` from this thread's `memo` (a `thread_local!` memo) when it holds it.
pub fn remembered<T: Copy + 'static>(
    memo: &'static LocalKey<RefCell<AddressMemo<T>>>,
    address: Address,
    compute: fn(Address) -> T,
) -> T {
    memo.with(|memo| memo.borrow_mut().get_or(address, compute))
}

/// The slot of `address`.
fn slot_of(address: Address) -> usize {
    usize::from(u16::from_le_bytes([address.0[19], address.0[18]])) % ADDRESS_MEMO_SLOTS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_sharing_a_slot_each_get_their_own_value() {
        let mut memo = AddressMemo::new();
        let first = Address([0x22; 20]);
        let mut second = Address([0x11; 20]);
        second.0[18..].copy_from_slice(&first.0[18..]);
        assert_eq!(slot_of(first), slot_of(second));
        let mut computed = 0;
        let mut value_of = |address: Address| {
            memo.get_or(address, |a| {
                computed += 1;
                a.0[0]
            })
        };
        assert_eq!(value_of(first), 0x22);
        assert_eq!(value_of(first), 0x22);
        assert_eq!(value_of(second), 0x11);
        assert_eq!(value_of(first), 0x22);
        // Computed once, then again after `second` took the slot and once for `second`.
        assert_eq!(computed, 3);
    }
}
