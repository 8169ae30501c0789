//! Ladder's wire types, units and cryptography (EIP-712, secp256k1 recovery, EIP-55, L2 HMAC, owners).
