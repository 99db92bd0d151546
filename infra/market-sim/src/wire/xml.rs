//! A minimal XML writer for EC2 responses. Element names are the output members'
//! `locationName`s from the EC2 model; lists are `<fooSet><item>..</item></fooSet>`.

use chrono::{DateTime, Utc};

pub const NAMESPACE: &str = "http://ec2.amazonaws.com/doc/2016-11-15/";

pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Control characters other than tab/newline/CR are not allowed in XML 1.0 at all;
            // replacing them keeps the document well-formed whatever a tag value holds.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// EC2's timestamp form: millisecond precision, `Z`.
pub fn timestamp(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

#[derive(Default)]
pub struct Xml {
    buf: String,
}

impl Xml {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn open(&mut self, tag: &str) -> &mut Self {
        self.buf.push('<');
        self.buf.push_str(tag);
        self.buf.push('>');
        self
    }

    pub fn close(&mut self, tag: &str) -> &mut Self {
        self.buf.push_str("</");
        self.buf.push_str(tag);
        self.buf.push('>');
        self
    }

    /// Escaped text content at the current position (for lists of plain strings).
    pub fn text(&mut self, text: &str) -> &mut Self {
        self.buf.push_str(&escape(text));
        self
    }

    pub fn leaf(&mut self, tag: &str, text: impl AsRef<str>) -> &mut Self {
        self.open(tag);
        self.buf.push_str(&escape(text.as_ref()));
        self.close(tag)
    }

    pub fn time(&mut self, tag: &str, t: DateTime<Utc>) -> &mut Self {
        self.leaf(tag, timestamp(t))
    }

    pub fn num(&mut self, tag: &str, n: impl std::fmt::Display) -> &mut Self {
        self.leaf(tag, n.to_string())
    }

    /// `<tag><item>..</item>..</tag>`, each item written by `f`.
    pub fn set<T>(&mut self, tag: &str, items: &[T], mut f: impl FnMut(&mut Self, &T)) -> &mut Self {
        self.open(tag);
        for it in items {
            self.open("item");
            f(self, it);
            self.close("item");
        }
        self.close(tag)
    }

    /// `<tagSet>` of key/value pairs, the shape of EC2's TagList.
    pub fn tags(&mut self, tag: &str, tags: &[(String, String)]) -> &mut Self {
        self.set(tag, tags, |x, (k, v)| {
            x.leaf("key", k).leaf("value", v);
        })
    }

    pub fn into_string(self) -> String {
        self.buf
    }
}

/// Wraps a body in `<{Action}Response xmlns=..><requestId>..</requestId>..</{Action}Response>`.
pub fn envelope(action: &str, request_id: &str, body: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<{action}Response xmlns=\"{NAMESPACE}\"><requestId>{}</requestId>{body}</{action}Response>",
        escape(request_id)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn escapes_all_specials() {
        assert_eq!(escape("<a href=\"x\">&'</a>"), "&lt;a href=&quot;x&quot;&gt;&amp;&apos;&lt;/a&gt;");
        assert_eq!(escape("ok\u{1}"), "ok\u{fffd}");
        assert_eq!(escape("tab\tnl\n"), "tab\tnl\n");
    }

    #[test]
    fn timestamps_have_millis() {
        let t = Utc.with_ymd_and_hms(2026, 12, 3, 11, 30, 0).unwrap();
        assert_eq!(timestamp(t), "2026-12-03T11:30:00.000Z");
    }

    #[test]
    fn builds_sets_and_envelope() {
        let mut x = Xml::new();
        x.tags("tagSet", &[("k".into(), "v&".into())]);
        assert_eq!(x.into_string(), "<tagSet><item><key>k</key><value>v&amp;</value></item></tagSet>");
        let e = envelope("FooBar", "r1", "<a>1</a>");
        assert!(e.contains("<FooBarResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>r1</requestId><a>1</a></FooBarResponse>"));
    }
}
