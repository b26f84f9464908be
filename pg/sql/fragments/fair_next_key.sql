-- One step of fair_items.sql's skip scan: the first key {op} {lower} (and
-- at most an upper bound, if {at_most} and {c_at_most} give one) of part
-- {part}: the first key with a cursor there ({cursors}), unless the index
-- has one before it.
(SELECT coalesce((SELECT k.key FROM {schema}.items k WHERE k.queue = {queue} AND k.part = {part} AND k.key {op} {lower} AND k.key < nk.key ORDER BY k.key LIMIT 1), (SELECT k.key FROM {schema}.items k WHERE k.queue = {queue} AND k.part = {part} AND k.key {op} {lower}{at_most} AND nk.key IS NULL ORDER BY k.key LIMIT 1), nk.key)
           FROM (SELECT min(c.key) AS key FROM {cursors} AND c.key {op} {lower}{c_at_most}) nk)
