//! Ages of runs: `--older-than 14d` read, and `3d` / `5h` shown. Pure functions.

/// Reads an age with its unit spelled out, `14days`, `2 weeks`, `12hours`, `90minutes`,
/// `30seconds`, or one of the letters that cannot be misread (`14d`, `2w`, `12h`, `90s`), as
/// seconds. `1m` is refused: a minute and a month are both read as `m`.
pub fn parse_duration(text: &str) -> Result<i64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("`{text}` has no unit; write it like 14days, 2weeks or 12hours"))?;
    let (number, unit) = text.split_at(split);
    let number: i64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not an age; write it like 14days, 2weeks or 12hours"))?;
    let unit = match unit.trim().to_ascii_lowercase().as_str() {
        "s" | "sec" | "secs" | "second" | "seconds" => 1,
        "min" | "mins" | "minute" | "minutes" => 60,
        "h" | "hour" | "hours" => 3600,
        "d" | "day" | "days" => 86_400,
        "w" | "week" | "weeks" => 7 * 86_400,
        "month" | "months" => 30 * 86_400,
        "m" => {
            let plural = if number == 1 { "" } else { "s" };
            return Err(format!(
                "`{text}` could be minutes or months; write {number}minute{plural} or \
                 {number}month{plural}"
            ));
        }
        other => {
            return Err(format!(
                "`{other}` is not a unit of age; use seconds, minutes, hours, days, weeks or \
                 months (14days, 2weeks, 12hours)"
            ))
        }
    };
    number
        .checked_mul(unit)
        .ok_or_else(|| format!("`{text}` is too long an age"))
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
        assert_eq!(parse_duration("14d"), Ok(14 * 86_400));
        assert_eq!(parse_duration("14days"), Ok(14 * 86_400));
        assert_eq!(parse_duration("2 weeks"), Ok(14 * 86_400));
        assert_eq!(parse_duration("2w"), Ok(14 * 86_400));
        assert_eq!(parse_duration("12h"), Ok(43_200));
        assert_eq!(parse_duration("90minutes"), Ok(5400));
        assert_eq!(parse_duration("1 month"), Ok(30 * 86_400));
        assert_eq!(parse_duration("90s"), Ok(90));
        assert_eq!(
            parse_duration("1m"),
            Err("`1m` could be minutes or months; write 1minute or 1month".into())
        );
        assert!(parse_duration("14").unwrap_err().contains("has no unit"));
        assert!(parse_duration("d").is_err());
        assert!(parse_duration("3 fortnights")
            .unwrap_err()
            .contains("not a unit of age"));
        assert_eq!(format_age(5), "now");
        assert_eq!(format_age(61), "1m");
        assert_eq!(format_age(7200), "2h");
        assert_eq!(format_age(3 * 86_400 + 5), "3d");
    }
}
