use sorted::SortedVec;

fn of(values: &[i64]) -> SortedVec {
    let mut v = SortedVec::new();
    for &x in values {
        v.insert(x);
    }
    v
}

#[test]
fn keeps_order() {
    assert_eq!(of(&[5, 1, 4, 2, 3]).as_slice(), &[1, 2, 3, 4, 5]);
}

#[test]
fn larger_values_go_last() {
    assert_eq!(of(&[1, 2, 9]).as_slice(), &[1, 2, 9]);
}

#[test]
fn finds_every_inserted_value() {
    let v = of(&[10, 20, 30, 40]);
    for x in [10, 20, 30, 40] {
        assert!(v.contains(x), "{x} is in {:?}", v.as_slice());
    }
}

#[test]
fn a_single_value_is_found() {
    assert!(of(&[7]).contains(7));
    assert!(!of(&[7]).contains(8));
}

#[test]
fn absent_values_are_not_found() {
    let v = of(&[10, 20, 30]);
    assert!(!v.contains(5) && !v.contains(25) && !v.contains(35));
}
