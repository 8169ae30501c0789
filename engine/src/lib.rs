//! Ladder's deterministic matching engine: books, matching, ledger, markets, API keys.
