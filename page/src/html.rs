//! Escaping and small pieces of markup the sections share.

/// Text for HTML content and attribute values: every character that could end a text run, an
/// attribute or start a tag is escaped, so a rule's name or a tag value is shown, never run.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A table: a caption, headers, and rows of cells already escaped (or markup).
pub fn table(caption: &str, headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut s = format!("<div class=\"scroll\"><table><caption>{}</caption><thead><tr>", esc(caption));
    for h in headers {
        s.push_str(&format!("<th scope=\"col\">{}</th>", esc(h)));
    }
    s.push_str("</tr></thead><tbody>");
    for r in rows {
        s.push_str("<tr>");
        for c in r {
            s.push_str(&format!("<td>{c}</td>"));
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table></div>");
    s
}

/// The sentence a section shows when it has nothing to show.
pub fn empty(text: &str) -> String {
    format!("<p class=\"empty\">{}</p>", esc(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_text_cannot_open_a_tag_or_leave_an_attribute() {
        assert_eq!(
            esc("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
    }
}
