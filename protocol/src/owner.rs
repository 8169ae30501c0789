//! Owner ids (API.md §7): the UUIDv5 of a maker's lowercase `0x` address under the RFC 4122
//! URL namespace.

use std::cell::RefCell;

use ladder_types::{remembered, AddressMemo};
use uuid::Uuid;

use crate::address::Address;

/// The namespace of owner ids: `6ba7b811-9dad-11d1-80b4-00c04fd430c8` (RFC 4122 URL namespace).
pub const OWNER_NAMESPACE: Uuid = Uuid::NAMESPACE_URL;

thread_local! {
    /// Recent addresses of this thread and their owner ids (a SHA-1 each otherwise).
    static OWNER_MEMO: RefCell<AddressMemo<Uuid>> = const { RefCell::new(AddressMemo::new()) };
}

/// The owner id of an address: UUIDv5(namespace, lowercase `0x` address).
pub fn owner_uuid(address: &Address) -> Uuid {
    remembered(&OWNER_MEMO, *address, compute_owner_uuid)
}

fn compute_owner_uuid(address: Address) -> Uuid {
    Uuid::new_v5(&OWNER_NAMESPACE, address.to_lowercase_hex().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_is_the_rfc4122_url_namespace() {
        assert_eq!(
            OWNER_NAMESPACE.to_string(),
            "6ba7b811-9dad-11d1-80b4-00c04fd430c8"
        );
    }

    #[test]
    fn owner_of_the_development_address() {
        let address = Address::parse("0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266").unwrap();
        assert_eq!(
            owner_uuid(&address).to_string(),
            "d8daf960-a70b-5b14-a2af-4b7c5d9bd889"
        );
    }

    #[test]
    fn a_remembered_owner_id_is_the_computed_one() {
        let address = Address([0x5a; 20]);
        assert_eq!(owner_uuid(&address), compute_owner_uuid(address));
        assert_eq!(owner_uuid(&address), compute_owner_uuid(address));
    }
}
