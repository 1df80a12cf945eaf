use meter::{average, largest_step};

#[test]
fn average_of_small_readings() {
    assert_eq!(average(&[1, 2, 3, 6]), Some(3));
    assert_eq!(average(&[]), None);
}

#[test]
fn average_of_large_readings() {
    let readings = [4_000_000_000, 4_000_000_002, 3_999_999_998];
    assert_eq!(average(&readings), Some(4_000_000_000));
}

#[test]
fn average_of_the_largest_readings() {
    assert_eq!(average(&[u32::MAX, u32::MAX]), Some(u32::MAX));
}

#[test]
fn steps() {
    assert_eq!(largest_step(&[5, 9, 2, 3]), 7);
    assert_eq!(largest_step(&[5]), 0);
}
