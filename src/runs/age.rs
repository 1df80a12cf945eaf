//! Ages of runs: `--older-than 14d` read, and `3d` / `5h` shown. Pure functions.

/// Reads `90s`, `30m`, `12h`, `14d`, `2w` as seconds.
pub fn parse_duration(text: &str) -> Option<i64> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let number: i64 = number.parse().ok()?;
    let unit = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return None,
    };
    number.checked_mul(unit)
}

/// An age in its largest whole unit: `now`, `12m`, `5h`, `3d`.
pub fn format_age(seconds: i64) -> String {
    match seconds {
        s if s < 60 => "now".to_string(),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_and_ages_shown() {
        assert_eq!(parse_duration("14d"), Some(14 * 86_400));
        assert_eq!(parse_duration("2w"), Some(14 * 86_400));
        assert_eq!(parse_duration("12h"), Some(43_200));
        assert_eq!(parse_duration("90s"), Some(90));
        assert_eq!(parse_duration("14"), None);
        assert_eq!(parse_duration("d"), None);
        assert_eq!(parse_duration("3 days"), None);
        assert_eq!(format_age(5), "now");
        assert_eq!(format_age(61), "1m");
        assert_eq!(format_age(7200), "2h");
        assert_eq!(format_age(3 * 86_400 + 5), "3d");
    }
}
