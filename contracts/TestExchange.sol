// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

/// @title TestExchange
/// @notice A minimal stand-in for the on-chain exchange: the operator submits
///         settlement batches of matched fills through `matchOrders`, and the
///         contract records when each batch settled. It moves no tokens. The
///         operator can make it reject every batch (`setRejecting`) to test the
///         settlement path's failure handling.
contract TestExchange {
    struct Fill {
        bytes32 tradeId;
        bytes32 takerOrderHash;
        bytes32 makerOrderHash;
        address taker;
        address maker;
        uint256 tokenId;
        uint8 side;
        uint64 priceTicks;
        uint64 size;
        uint8 matchType;
    }

    address public operator;
    bool public rejecting;

    /// Block number at which a batch settled (0 = not settled).
    mapping(bytes32 => uint256) public settledAt;
    mapping(bytes32 => uint256) public fillCount;
    mapping(bytes32 => uint256) public totalSize;

    event BatchSettled(bytes32 indexed batchId, uint256 fills, uint256 totalSize);

    constructor() {
        operator = msg.sender;
    }

    function setRejecting(bool value) external {
        require(msg.sender == operator, "not operator");
        rejecting = value;
    }

    function matchOrders(bytes32 batchId, Fill[] calldata fills) external {
        require(msg.sender == operator, "not operator");
        require(!rejecting, "exchange is rejecting batches");
        require(settledAt[batchId] == 0, "batch already settled");
        require(fills.length > 0, "empty batch");

        uint256 sum = 0;
        for (uint256 i = 0; i < fills.length; i++) {
            Fill calldata fill = fills[i];
            require(fill.size > 0 && fill.priceTicks > 0 && fill.priceTicks < 10000, "bad fill");
            sum += fill.size;
        }

        settledAt[batchId] = block.number;
        fillCount[batchId] = fills.length;
        totalSize[batchId] = sum;
        emit BatchSettled(batchId, fills.length, sum);
    }
}
