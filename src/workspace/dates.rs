//! Commit dates as git sets them: `GIT_AUTHOR_DATE` and `GIT_COMMITTER_DATE` win over the
//! clock, so scripted histories (and tests) get the dates they ask for.

use git2::{Signature, Time};

/// A signature for `name <email>`, dated by the variable `date_var` when it holds a date
/// this reads, else now.
pub fn signature(
    name: &str,
    email: &str,
    date_var: &str,
) -> Result<Signature<'static>, git2::Error> {
    match std::env::var(date_var)
        .ok()
        .and_then(|v| parse_git_date(&v))
    {
        Some(time) => Signature::new(name, email, &time),
        None => Signature::now(name, email),
    }
}

/// Reads git's internal form (`@1700000000 +0100`, `1700000000 +0100`) and ISO 8601
/// (`2026-01-01T00:00:00Z`, `2026-01-01 12:00:00 +01:00`). Other forms give None.
pub fn parse_git_date(text: &str) -> Option<Time> {
    let text = text.trim();
    let raw = text.strip_prefix('@').unwrap_or(text);
    let mut parts = raw.split_whitespace();
    if let Some(Ok(secs)) = parts.next().map(str::parse::<i64>) {
        let offset = parts.next().map(parse_offset).unwrap_or(Some(0))?;
        return Some(Time::new(secs, offset));
    }
    parse_iso(text)
}

fn parse_iso(text: &str) -> Option<Time> {
    let date = text.get(..10)?;
    let rest = text.get(10..)?.trim_start_matches(['T', ' ']);
    let clock = rest.get(..8)?;
    let zone = rest.get(8..)?.trim();
    let mut ymd = date.split('-').map(str::parse::<i64>);
    let (y, m, d) = (ymd.next()?.ok()?, ymd.next()?.ok()?, ymd.next()?.ok()?);
    let mut hms = clock.split(':').map(str::parse::<i64>);
    let (h, min, s) = (hms.next()?.ok()?, hms.next()?.ok()?, hms.next()?.ok()?);
    let offset = match zone {
        "" | "Z" => 0,
        zone => parse_offset(zone)?,
    };
    let local = days_from_civil(y, m, d) * 86_400 + h * 3600 + min * 60 + s;
    Some(Time::new(local - i64::from(offset) * 60, offset))
}

/// `+0100`, `-05:30`: minutes east of UTC.
fn parse_offset(text: &str) -> Option<i32> {
    let (sign, digits) = match text.split_at_checked(1)? {
        ("+", rest) => (1, rest),
        ("-", rest) => (-1, rest),
        _ => return None,
    };
    let digits = digits.replace(':', "");
    if digits.len() != 4 {
        return None;
    }
    let hours: i32 = digits.get(..2)?.parse().ok()?;
    let minutes: i32 = digits.get(2..)?.parse().ok()?;
    Some(sign * (hours * 60 + minutes))
}

/// The date of `time` in its own zone, as git's `--date` styles print it: `default`
/// (`Mon Jan 5 10:00:00 2026 +0100`), `rfc` (`Mon, 5 Jan 2026 10:00:00 +0100`), `iso`
/// (`2026-01-05 10:00:00 +0100`), `strict` (`2026-01-05T10:00:00+01:00`), `short`.
pub fn format_git_date(time: Time, style: DateStyle) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let offset = time.offset_minutes();
    let local = time.seconds() + i64::from(offset) * 60;
    let days = local.div_euclid(86_400);
    let secs = local.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let (h, min, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let weekday = DAYS[days.rem_euclid(7) as usize];
    let month = MONTHS[(m - 1) as usize];
    let sign = if offset < 0 { '-' } else { '+' };
    let (oh, om) = (offset.abs() / 60, offset.abs() % 60);
    match style {
        DateStyle::Default => {
            format!("{weekday} {month} {d} {h:02}:{min:02}:{s:02} {y} {sign}{oh:02}{om:02}")
        }
        DateStyle::Rfc => {
            format!("{weekday}, {d} {month} {y} {h:02}:{min:02}:{s:02} {sign}{oh:02}{om:02}")
        }
        DateStyle::Iso => {
            format!("{y}-{m:02}-{d:02} {h:02}:{min:02}:{s:02} {sign}{oh:02}{om:02}")
        }
        DateStyle::Strict => {
            format!("{y}-{m:02}-{d:02}T{h:02}:{min:02}:{s:02}{sign}{oh:02}:{om:02}")
        }
        DateStyle::Short => format!("{y}-{m:02}-{d:02}"),
    }
}

/// The `--date` styles `format_git_date` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DateStyle {
    /// `Mon Jan 5 10:00:00 2026 +0100`, export-subst's `%ad`.
    Default,
    /// `Mon, 5 Jan 2026 10:00:00 +0100`, export-subst's `%aD`.
    Rfc,
    /// `2026-01-05 10:00:00 +0100`, export-subst's `%ai`.
    Iso,
    /// `2026-01-05T10:00:00+01:00`, export-subst's `%aI`.
    Strict,
    /// `2026-01-05`, export-subst's `%as`.
    Short,
}

/// The proleptic Gregorian date of a day counted from 1970-01-01: `days_from_civil` undone.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (the era arithmetic of the civil
/// calendar: 400-year cycles of 146097 days, years starting in March).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let shifted_month = (month + 9) % 12;
    let day_of_year = (153 * shifted_month + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seconds(text: &str) -> Option<(i64, i32)> {
        parse_git_date(text).map(|t| (t.seconds(), t.offset_minutes()))
    }

    #[test]
    fn reads_the_forms_git_reads() {
        assert_eq!(seconds("2026-01-01T00:00:00Z"), Some((1_767_225_600, 0)));
        assert_eq!(seconds("1970-01-01 01:00:00 +01:00"), Some((0, 60)));
        assert_eq!(
            seconds("2000-03-01T00:00:00-0500"),
            Some((951_886_800, -300))
        );
        assert_eq!(seconds("@1700000000 +0100"), Some((1_700_000_000, 60)));
        assert_eq!(seconds("1700000000"), Some((1_700_000_000, 0)));
        assert_eq!(seconds("yesterday"), None);
        assert_eq!(seconds("2026-01-01T00:00:00 CET"), None);
    }

    #[test]
    fn prints_the_styles_git_prints_and_reads_its_own_back() {
        let time = Time::new(1_767_225_600, 60);
        assert_eq!(
            format_git_date(time, DateStyle::Default),
            "Thu Jan 1 01:00:00 2026 +0100"
        );
        assert_eq!(
            format_git_date(time, DateStyle::Rfc),
            "Thu, 1 Jan 2026 01:00:00 +0100"
        );
        assert_eq!(
            format_git_date(time, DateStyle::Iso),
            "2026-01-01 01:00:00 +0100"
        );
        let leap = Time::new(951_886_800, -330);
        assert_eq!(
            format_git_date(leap, DateStyle::Strict),
            "2000-02-29T23:30:00-05:30"
        );
        assert_eq!(format_git_date(leap, DateStyle::Short), "2000-02-29");
        for (secs, offset) in [(0, 0), (-86_401, 120), (4_102_444_800, -480)] {
            let strict = format_git_date(Time::new(secs, offset), DateStyle::Strict);
            assert_eq!(seconds(&strict), Some((secs, offset)), "{strict}");
        }
    }
}
