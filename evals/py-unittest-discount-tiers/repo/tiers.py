"""The discount tiers marketing promised: an order of at least `threshold` cents gets
`percent` off. Keep sorted by threshold, largest first."""

TIERS = [
    (100_00, 15),
    (50_00, 10),
    (20_00, 5),
]
