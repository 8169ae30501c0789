// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

/// @title SmartAccount
/// @notice A minimal multi-owner smart-contract wallet that implements ERC-1271
///         (`isValidSignature`). A signature is valid when it is a 65-byte
///         secp256k1 signature (r || s || v) over the digest by one of the owners.
///         Used to test order signing by contract accounts.
contract SmartAccount {
    /// ERC-1271 magic value: bytes4(keccak256("isValidSignature(bytes32,bytes)")).
    bytes4 internal constant MAGIC_VALUE = 0x1626ba7e;
    bytes4 internal constant INVALID = 0xffffffff;

    /// Upper bound for `s` (half the secp256k1 group order), per EIP-2.
    uint256 internal constant HALF_ORDER =
        0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0;

    mapping(address => bool) public isOwner;

    event OwnerAdded(address indexed owner);
    event OwnerRemoved(address indexed owner);

    constructor(address firstOwner) {
        isOwner[firstOwner] = true;
        emit OwnerAdded(firstOwner);
    }

    modifier onlyOwner() {
        require(isOwner[msg.sender], "not an owner");
        _;
    }

    function addOwner(address owner) external onlyOwner {
        isOwner[owner] = true;
        emit OwnerAdded(owner);
    }

    function removeOwner(address owner) external onlyOwner {
        isOwner[owner] = false;
        emit OwnerRemoved(owner);
    }

    /// @notice ERC-1271. Returns 0x1626ba7e when `signature` is a valid 65-byte
    ///         r || s || v signature of `digest` by an owner, else 0xffffffff.
    ///         Never reverts for a malformed or foreign signature.
    function isValidSignature(bytes32 digest, bytes calldata signature) external view returns (bytes4) {
        if (signature.length != 65) {
            return INVALID;
        }
        bytes32 r = bytes32(signature[0:32]);
        bytes32 s = bytes32(signature[32:64]);
        uint8 v = uint8(signature[64]);
        if (v < 27) {
            v += 27;
        }
        if (v != 27 && v != 28) {
            return INVALID;
        }
        if (uint256(s) > HALF_ORDER) {
            return INVALID;
        }
        address signer = ecrecover(digest, v, r, s);
        if (signer == address(0) || !isOwner[signer]) {
            return INVALID;
        }
        return MAGIC_VALUE;
    }
}
