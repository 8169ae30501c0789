//! Ladder's single writer: rings in, journal, engine, responses out.
