"""Benchmarks (`make bench`): files named `bench_*.py`, run by pytest against the same real
services as the tests, but never by `make test`. Each prints what it measured and writes it to
`var/bench/<name>.json`; it fails only when a result is wrong or a design bound (such as flat
memory) does not hold, never on a time."""
