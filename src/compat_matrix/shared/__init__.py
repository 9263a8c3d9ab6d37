"""What the host and the cell both read: the results a cell writes, the vocabulary, the names of variants, the
evidence rules and the blame of an import clash. The standard library alone (tests/test_boundary.py)."""
