//! Whole-degree temperature conversions for a thermostat display.

/// Degrees Celsius to degrees Fahrenheit, rounded toward zero.
pub fn c_to_f(celsius: i32) -> i32 {
    celsius * (9 / 5) + 32
}

/// Degrees Fahrenheit to degrees Celsius, rounded toward zero.
pub fn f_to_c(fahrenheit: i32) -> i32 {
    (fahrenheit - 32) * 5 / 9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boiling() {
        assert_eq!(c_to_f(100), 212);
        assert_eq!(f_to_c(212), 100);
    }

    #[test]
    fn freezing() {
        assert_eq!(c_to_f(0), 32);
        assert_eq!(f_to_c(32), 0);
    }

    #[test]
    fn body_and_cold() {
        assert_eq!(c_to_f(37), 98);
        assert_eq!(c_to_f(-40), -40);
        assert_eq!(f_to_c(-40), -40);
    }
}
