//! Query strings: `a=1&b=x`, percent-decoded.

/// The parameters of a request's query string.
pub struct QueryString(Vec<(String, String)>);

impl QueryString {
    /// Parses `query` (without `?`).
    pub fn parse(query: &str) -> QueryString {
        QueryString(
            form_urlencoded::parse(query.as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    /// The first value of `name`; an empty value counts as absent.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }

    /// The first value of `name` parsed as `T`, or an error naming the parameter.
    pub fn parsed<T: std::str::FromStr>(
        &self,
        name: &str,
        rule: &str,
    ) -> Result<Option<T>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(text) => text
                .parse()
                .map(Some)
                .map_err(|_| format!("{name}: {rule}")),
        }
    }

    /// The page size `limit` asks for (API.md §11: default 100, a larger limit than 500 is
    /// clamped, however large: digits past 64 bits too). A 400 text naming `limit` when it is
    /// not a non-negative integer.
    pub fn page_limit(&self) -> Result<usize, String> {
        let requested = match self.get("limit").map(|t| t.strip_prefix('+').unwrap_or(t)) {
            None => None,
            Some(digits) if crate::http::is_decimal(digits) => {
                Some(digits.parse::<u64>().unwrap_or(u64::MAX))
            }
            Some(_) => return Err("limit: expected a non-negative integer".into()),
        };
        Ok(ladder_protocol::wire::cursor::clamp_limit(requested))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_limit_is_clamped_however_large_and_must_be_digits() {
        let limit = |query: &str| QueryString::parse(query).page_limit();
        assert_eq!(limit(""), Ok(100));
        assert_eq!(limit("limit=0"), Ok(100));
        assert_eq!(limit("limit=7"), Ok(7));
        assert_eq!(limit("limit=%2B5"), Ok(5), "as u64 reads it");
        assert_eq!(limit("limit=501"), Ok(500));
        assert_eq!(limit("limit=99999999999999999999999"), Ok(500));
        for bad in [
            "limit=-1",
            "limit=1.5",
            "limit=x",
            "limit=%2B",
            "limit=%2B-1",
        ] {
            assert_eq!(
                limit(bad),
                Err("limit: expected a non-negative integer".into()),
                "{bad}"
            );
        }
    }

    #[test]
    fn values_are_percent_decoded_and_empty_counts_as_absent() {
        let q = QueryString::parse("a=1&b=x%20y&c=&limit=abc");
        assert_eq!(q.get("a"), Some("1"));
        assert_eq!(q.get("b"), Some("x y"));
        assert_eq!(q.get("c"), None);
        assert_eq!(q.parsed::<u64>("a", "integer"), Ok(Some(1)));
        assert_eq!(
            q.parsed::<u64>("limit", "expected an integer"),
            Err("limit: expected an integer".to_string())
        );
    }
}
