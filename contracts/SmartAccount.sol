// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.23;

import "@account-abstraction/contracts/interfaces/PackedUserOperation.sol";

/// @title SmartAccount
/// @notice A minimal multi-owner smart-contract wallet that implements ERC-1271
///         (`isValidSignature`) and is an ERC-4337 v0.7 account, as SimpleAccount is:
///         `validateUserOp` accepts an operation signed by one of the owners over the
///         EIP-191 message of its userOpHash, and `execute` makes the account's call.
///         A signature is valid when it is a 65-byte secp256k1 signature (r || s || v)
///         by one of the owners. Used to test order signing by contract accounts and
///         redeeming through a bundler.
contract SmartAccount {
    /// The canonical EntryPoint v0.7 (the only caller of `validateUserOp`).
    address public constant ENTRY_POINT = 0x0000000071727De22E5E9d8BAf0edAc6f37da032;
    /// What `validateUserOp` returns for a signature that is not an owner's (ERC-4337).
    uint256 internal constant SIG_VALIDATION_FAILED = 1;

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

    /// An owner, or the account itself (a call it makes through `execute`).
    modifier onlyOwner() {
        require(isOwner[msg.sender] || msg.sender == address(this), "not an owner");
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

    /// @notice ERC-4337 v0.7: 0 when `userOp.signature` is an owner's signature of the
    ///         EIP-191 message of `userOpHash`, else 1 (SIG_VALIDATION_FAILED); pays the
    ///         EntryPoint what it is missing. The nonce is the EntryPoint's to check.
    function validateUserOp(PackedUserOperation calldata userOp, bytes32 userOpHash, uint256 missingAccountFunds)
        external
        returns (uint256 validationData)
    {
        require(msg.sender == ENTRY_POINT, "account: not from EntryPoint");
        bytes32 digest = keccak256(abi.encodePacked("\x19Ethereum Signed Message:\n32", userOpHash));
        validationData = _signedByOwner(digest, userOp.signature) ? 0 : SIG_VALIDATION_FAILED;
        if (missingAccountFunds > 0) {
            (bool paid,) = payable(msg.sender).call{value: missingAccountFunds}("");
            (paid);
        }
    }

    /// @notice The account's call (from the EntryPoint, or an owner directly); a revert of
    ///         the call is the revert of this one.
    function execute(address dest, uint256 value, bytes calldata func) external {
        require(msg.sender == ENTRY_POINT || isOwner[msg.sender], "account: not EntryPoint or owner");
        (bool ok, bytes memory result) = dest.call{value: value}(func);
        if (!ok) {
            assembly {
                revert(add(result, 32), mload(result))
            }
        }
    }

    /// @notice Takes ETH (the EntryPoint's prefund comes from here).
    receive() external payable {}

    /// @notice ERC-1271. Returns 0x1626ba7e when `signature` is a valid 65-byte
    ///         r || s || v signature of `digest` by an owner, else 0xffffffff.
    ///         Never reverts for a malformed or foreign signature.
    function isValidSignature(bytes32 digest, bytes calldata signature) external view returns (bytes4) {
        return _signedByOwner(digest, signature) ? MAGIC_VALUE : INVALID;
    }

    /// Whether `signature` is a 65-byte r || s || v signature of `digest` by an owner
    /// (v 27/28 or 0/1, low s).
    function _signedByOwner(bytes32 digest, bytes calldata signature) internal view returns (bool) {
        if (signature.length != 65) {
            return false;
        }
        bytes32 r = bytes32(signature[0:32]);
        bytes32 s = bytes32(signature[32:64]);
        uint8 v = uint8(signature[64]);
        if (v < 27) {
            v += 27;
        }
        if (v != 27 && v != 28) {
            return false;
        }
        if (uint256(s) > HALF_ORDER) {
            return false;
        }
        address signer = ecrecover(digest, v, r, s);
        return signer != address(0) && isOwner[signer];
    }
}
