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
}

#[cfg(test)]
mod tests {
    use super::*;

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
