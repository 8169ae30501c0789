// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

/// @title TestCollateral
/// @notice The test exchange's collateral: a minimal ERC-20 (6 decimals, as Ladder's base
///         units) that only the exchange mints, when it pays a redemption.
contract TestCollateral {
    string public constant name = "Test Collateral";
    string public constant symbol = "TUSD";
    uint8 public constant decimals = 6;

    address public immutable exchange;
    uint256 public totalSupply;
    mapping(address => uint256) public balanceOf;

    event Transfer(address indexed from, address indexed to, uint256 value);

    constructor() {
        exchange = msg.sender;
    }

    function mint(address to, uint256 amount) external {
        require(msg.sender == exchange, "not the exchange");
        totalSupply += amount;
        balanceOf[to] += amount;
        emit Transfer(address(0), to, amount);
    }

    function transfer(address to, uint256 amount) external returns (bool) {
        require(balanceOf[msg.sender] >= amount, "balance too low");
        balanceOf[msg.sender] -= amount;
        balanceOf[to] += amount;
        emit Transfer(msg.sender, to, amount);
        return true;
    }
}

/// @title TestExchange
/// @notice A minimal stand-in for the on-chain exchange: the operator submits
///         settlement batches of matched fills through `matchOrders`, and the
///         contract records when each batch settled. For a market the operator
///         registered (`registerMarket`), fills also move outcome-token positions;
///         once the operator resolves it (`resolve`), `redeem` pays an account's
///         positions in TestCollateral (one unit per winning token, half a unit per
///         token of a voided market, as Ladder's ledger) and emits `Redeemed`.
///         The operator can make it reject every batch (`setRejecting`) to test the
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

    /// A registered market: its tokens and how it ended (0 open, 1 Yes, 2 No, 3 void).
    struct Market {
        uint256 yesTokenId;
        uint256 noTokenId;
        uint8 outcome;
    }

    uint8 internal constant OPEN = 0;
    uint8 internal constant YES = 1;
    uint8 internal constant NO = 2;
    uint8 internal constant VOID = 3;

    address public operator;
    bool public rejecting;
    TestCollateral public immutable collateral;

    /// Block number at which a batch settled (0 = not settled).
    mapping(bytes32 => uint256) public settledAt;
    mapping(bytes32 => uint256) public fillCount;
    mapping(bytes32 => uint256) public totalSize;

    mapping(bytes32 => Market) public markets;
    /// The other token of a registered token's market (0: not registered).
    mapping(uint256 => uint256) public complementOf;
    /// Outcome tokens held, in base units, from settled fills of registered markets.
    mapping(address => mapping(uint256 => uint256)) public positions;

    event BatchSettled(bytes32 indexed batchId, uint256 fills, uint256 totalSize);
    event MarketRegistered(bytes32 indexed conditionId, uint256 yesTokenId, uint256 noTokenId);
    event MarketResolved(bytes32 indexed conditionId, uint8 outcome);
    event Redeemed(address indexed account, bytes32 indexed conditionId, uint256 payout);

    constructor() {
        operator = msg.sender;
        collateral = new TestCollateral();
    }

    modifier onlyOperator() {
        require(msg.sender == operator, "not operator");
        _;
    }

    function setRejecting(bool value) external onlyOperator {
        rejecting = value;
    }

    function registerMarket(bytes32 conditionId, uint256 yesTokenId, uint256 noTokenId) external onlyOperator {
        require(yesTokenId != 0 && noTokenId != 0 && yesTokenId != noTokenId, "bad tokens");
        require(markets[conditionId].yesTokenId == 0, "market already registered");
        markets[conditionId] = Market(yesTokenId, noTokenId, OPEN);
        complementOf[yesTokenId] = noTokenId;
        complementOf[noTokenId] = yesTokenId;
        emit MarketRegistered(conditionId, yesTokenId, noTokenId);
    }

    /// `outcome`: 1 Yes, 2 No, 3 void.
    function resolve(bytes32 conditionId, uint8 outcome) external onlyOperator {
        Market storage market = markets[conditionId];
        require(market.yesTokenId != 0, "market not registered");
        require(market.outcome == OPEN, "market already resolved");
        require(outcome == YES || outcome == NO || outcome == VOID, "bad outcome");
        market.outcome = outcome;
        emit MarketResolved(conditionId, outcome);
    }

    function matchOrders(bytes32 batchId, Fill[] calldata fills) external onlyOperator {
        require(!rejecting, "exchange is rejecting batches");
        require(settledAt[batchId] == 0, "batch already settled");
        require(fills.length > 0, "empty batch");

        uint256 sum = 0;
        for (uint256 i = 0; i < fills.length; i++) {
            Fill calldata fill = fills[i];
            require(fill.size > 0 && fill.priceTicks > 0 && fill.priceTicks < 10000, "bad fill");
            sum += fill.size;
            _movePositions(fill);
        }

        settledAt[batchId] = block.number;
        fillCount[batchId] = fills.length;
        totalSize[batchId] = sum;
        emit BatchSettled(batchId, fills.length, sum);
    }

    /// Pays the caller's positions in a resolved market and clears them.
    function redeem(bytes32 conditionId) external {
        Market storage market = markets[conditionId];
        require(market.outcome != OPEN, "market not resolved");
        uint256 yesHeld = positions[msg.sender][market.yesTokenId];
        uint256 noHeld = positions[msg.sender][market.noTokenId];
        uint256 payout;
        if (market.outcome == YES) {
            payout = yesHeld;
        } else if (market.outcome == NO) {
            payout = noHeld;
        } else {
            // Half of the two together, rounded down once (as the ledger): a pair of one
            // unit each pays one.
            payout = (yesHeld + noHeld) / 2;
        }
        positions[msg.sender][market.yesTokenId] = 0;
        positions[msg.sender][market.noTokenId] = 0;
        if (payout > 0) {
            collateral.mint(msg.sender, payout);
        }
        emit Redeemed(msg.sender, conditionId, payout);
    }

    /// The taker takes `size` of the fill's token (BUY) or gives it (SELL); the maker is the
    /// other side of a COMPLEMENTARY fill, buys the complement in a MINT and sells it in a
    /// MERGE. Positions never go below zero (tokens held off this contract are not seen).
    function _movePositions(Fill calldata fill) internal {
        uint256 complement = complementOf[fill.tokenId];
        if (complement == 0) {
            return;
        }
        bool takerBuys = fill.side == 0;
        _move(fill.taker, fill.tokenId, fill.size, takerBuys);
        if (fill.matchType == 0) {
            _move(fill.maker, fill.tokenId, fill.size, !takerBuys);
        } else {
            _move(fill.maker, complement, fill.size, fill.matchType == 1);
        }
    }

    function _move(address account, uint256 tokenId, uint256 size, bool credit) internal {
        uint256 held = positions[account][tokenId];
        positions[account][tokenId] = credit ? held + size : (held > size ? held - size : 0);
    }
}
