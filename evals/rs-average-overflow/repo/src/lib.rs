//! Readings of an electricity meter, in watt-hours.

/// The mean reading, rounded toward zero; `None` for no readings.
pub fn average(readings: &[u32]) -> Option<u32> {
    if readings.is_empty() {
        return None;
    }
    let total: u32 = readings.iter().sum();
    Some(total / readings.len() as u32)
}

/// The largest change between two readings in a row.
pub fn largest_step(readings: &[u32]) -> u32 {
    readings
        .windows(2)
        .map(|pair| pair[0].abs_diff(pair[1]))
        .max()
        .unwrap_or(0)
}
