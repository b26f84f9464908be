-- One step of fair_items.sql's skip scan (and ready_heads.sql's): the
-- first key {op} {lower} (and at most an upper bound, if {at_most} and
-- {c_at_most} give one) of part {part}: the first key with a cursor (a
-- floor) there ({cursors}: a FROM item `c` and its WHERE), unless the
-- index has one before it. The cursors' least key is taken in the index's
-- order (COLLATE "C"), whatever the database's collation.
(SELECT coalesce((SELECT k.key FROM {schema}.items k WHERE k.queue = {queue} AND k.part = {part} AND k.key {op} {lower} AND k.key < nk.key ORDER BY k.key LIMIT 1), (SELECT k.key FROM {schema}.items k WHERE k.queue = {queue} AND k.part = {part} AND k.key {op} {lower}{at_most} AND nk.key IS NULL ORDER BY k.key LIMIT 1), nk.key)
           FROM (SELECT min(c.key COLLATE "C") AS key FROM {cursors} AND c.key {op} {lower}{c_at_most}) nk)
