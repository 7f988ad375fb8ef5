"""Benchmarks: figures of what the product costs, printed by `make bench*`. They import the
product; nothing in the product imports them."""
