//! Text put into an HTML page: every page portcullis writes shows names
//! and values that come from agents and files, so each is escaped before
//! it is placed, in text and in attribute values alike.

/// `text` with the five characters HTML gives meaning escaped.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_quotes_are_text() {
        assert_eq!(
            escape(r#"<img src=x onerror="a('b')">&"#),
            "&lt;img src=x onerror=&quot;a(&#39;b&#39;)&quot;&gt;&amp;"
        );
    }
}
