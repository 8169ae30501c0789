//! The Solidity ABI encoding of the calls Ladder makes: static words, `bytes`, and a dynamic
//! array of static tuples. Heads come first, then the tails their offsets point to.

use ladder_protocol::keccak::keccak256;
use ladder_protocol::Address;

/// One 32-byte ABI word.
pub type Word = [u8; 32];

/// The 4-byte selector of a function signature such as `isValidSignature(bytes32,bytes)`.
pub fn selector(signature: &str) -> [u8; 4] {
    let hash = keccak256(signature.as_bytes());
    [hash[0], hash[1], hash[2], hash[3]]
}

/// An unsigned integer as a word (big-endian, left-padded).
pub fn uint_word(value: u64) -> Word {
    let mut word = [0u8; 32];
    word[24..].copy_from_slice(&value.to_be_bytes());
    word
}

/// An address as a word.
pub fn address_word(address: &Address) -> Word {
    address.to_word()
}

/// One argument of a call.
pub enum Arg<'a> {
    /// A static value already encoded as one word (uint, address, bytes32, bool...).
    Word(Word),
    /// `bytes`: dynamic; its length and its data padded to whole words go to the tail.
    Bytes(&'a [u8]),
    /// `T[]` of a static tuple type: each element is its words, inline, in the tail.
    StaticTuples(&'a [Vec<Word>]),
    /// A tuple with a dynamic member (`bytes`...): dynamic itself, encoded in the tail.
    Tuple(&'a [Arg<'a>]),
    /// `T[]` of a dynamic tuple type: in the tail, the length, each element's offset
    /// (from the first offset), then the elements.
    Tuples(&'a [Vec<Arg<'a>>]),
}

/// The calldata of `selector(args...)`.
pub fn encode_call(selector: [u8; 4], args: &[Arg<'_>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + 32 * (args.len() + 4));
    out.extend_from_slice(&selector);
    out.extend_from_slice(&encode(args));
    out
}

/// The ABI encoding of a tuple of `args` (what follows the selector).
pub fn encode(args: &[Arg<'_>]) -> Vec<u8> {
    let head_len = 32 * args.len();
    let mut head = Vec::with_capacity(head_len);
    let mut tail = Vec::new();
    for arg in args {
        match arg {
            Arg::Word(word) => head.extend_from_slice(word),
            Arg::Bytes(data) => {
                head.extend_from_slice(&uint_word((head_len + tail.len()) as u64));
                tail.extend_from_slice(&uint_word(data.len() as u64));
                tail.extend_from_slice(data);
                let padding = (32 - data.len() % 32) % 32;
                tail.extend(std::iter::repeat_n(0u8, padding));
            }
            Arg::StaticTuples(items) => {
                head.extend_from_slice(&uint_word((head_len + tail.len()) as u64));
                tail.extend_from_slice(&uint_word(items.len() as u64));
                for item in items.iter() {
                    for word in item {
                        tail.extend_from_slice(word);
                    }
                }
            }
            Arg::Tuple(members) => {
                head.extend_from_slice(&uint_word((head_len + tail.len()) as u64));
                tail.extend_from_slice(&encode(members));
            }
            Arg::Tuples(items) => {
                head.extend_from_slice(&uint_word((head_len + tail.len()) as u64));
                tail.extend_from_slice(&uint_word(items.len() as u64));
                let encoded: Vec<Vec<u8>> = items.iter().map(|item| encode(item)).collect();
                let mut offset = 32 * encoded.len();
                for element in &encoded {
                    tail.extend_from_slice(&uint_word(offset as u64));
                    offset += element.len();
                }
                for element in &encoded {
                    tail.extend_from_slice(element);
                }
            }
        }
    }
    head.extend_from_slice(&tail);
    head
}

/// The revert reason of `Error(string)` revert data, when it is one.
pub fn revert_reason(data: &[u8]) -> Option<String> {
    let body = data.strip_prefix(&selector("Error(string)"))?;
    let offset = word_as_usize(body.get(..32)?)?;
    let length = word_as_usize(body.get(offset..offset + 32)?)?;
    let text = body.get(offset + 32..offset + 32 + length)?;
    Some(String::from_utf8_lossy(text).into_owned())
}

/// A word as a small number (`None` when it does not fit).
pub fn word_as_usize(word: &[u8]) -> Option<usize> {
    if word.len() != 32 || word[..24].iter().any(|b| *b != 0) {
        return None;
    }
    let mut low = [0u8; 8];
    low.copy_from_slice(&word[24..]);
    usize::try_from(u64::from_be_bytes(low)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_match_the_known_ones() {
        // ERC-1271's magic value is the selector of isValidSignature(bytes32,bytes).
        assert_eq!(
            selector("isValidSignature(bytes32,bytes)"),
            [0x16, 0x26, 0xba, 0x7e]
        );
        assert_eq!(
            selector("transfer(address,uint256)"),
            [0xa9, 0x05, 0x9c, 0xbb]
        );
        assert_eq!(selector("Error(string)"), [0x08, 0xc3, 0x79, 0xa0]);
    }

    #[test]
    fn bytes_go_to_the_tail_padded_to_whole_words() {
        let digest = [0x11u8; 32];
        let signature = [0x22u8; 65];
        let encoded = encode(&[Arg::Word(digest), Arg::Bytes(&signature)]);
        assert_eq!(encoded.len(), 32 * 2 + 32 + 96);
        assert_eq!(&encoded[..32], &digest);
        assert_eq!(encoded[32..64], uint_word(64));
        assert_eq!(encoded[64..96], uint_word(65));
        assert_eq!(&encoded[96..161], &signature[..]);
        assert!(encoded[161..].iter().all(|b| *b == 0));
    }

    #[test]
    fn an_array_of_static_tuples_is_its_length_then_each_tuple_inline() {
        let items = vec![
            vec![uint_word(1), uint_word(2)],
            vec![uint_word(3), uint_word(4)],
        ];
        let encoded = encode(&[Arg::Word(uint_word(9)), Arg::StaticTuples(&items)]);
        let words: Vec<&[u8]> = encoded.chunks(32).collect();
        assert_eq!(words.len(), 2 + 1 + 4);
        assert_eq!(words[0], uint_word(9));
        assert_eq!(words[1], uint_word(64));
        assert_eq!(words[2], uint_word(2));
        assert_eq!(
            words[3..],
            [uint_word(1), uint_word(2), uint_word(3), uint_word(4)]
        );
    }

    #[test]
    fn a_revert_reason_decodes_from_error_string_data() {
        let mut data = selector("Error(string)").to_vec();
        data.extend_from_slice(&encode(&[Arg::Bytes(b"batch already settled")]));
        assert_eq!(
            revert_reason(&data).as_deref(),
            Some("batch already settled")
        );
        assert_eq!(revert_reason(&[1, 2, 3]), None);
        assert_eq!(revert_reason(&data[..40]), None);
    }
}
