"""Stages 2, 4, 5 and 6: memories and their vectors in; links out.

`terms` extracts entities and key terms; `candidates` finds the pairs that can reach the
threshold; `features` and `links` score, classify and cap them (SQL in sql/); `manual` merges
the manual log; `incremental` says which memories changed since the last snapshot."""
