use kv::{parse, ParseError};

#[test]
fn reads_settings_and_skips_comments() {
    let settings = parse("a = 1\n# nothing\n\nb=two # note\n").unwrap();
    assert_eq!(settings["a"], "1");
    assert_eq!(settings["b"], "two");
    assert_eq!(settings.len(), 2);
}

#[test]
fn a_line_without_equals_is_an_error() {
    assert_eq!(
        parse("a = 1\njust words\n"),
        Err(ParseError { line: 2, reason: "expected key=value".into() })
    );
}

#[test]
fn an_empty_key_is_an_error() {
    assert_eq!(parse("=1").unwrap_err().to_string(), "line 1: empty key");
}
