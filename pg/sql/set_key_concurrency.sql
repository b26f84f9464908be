-- SetKeyConcurrency: no notice; sessions read it when they start. Returns
-- whether the queue is ordered (no row: no such queue); an ordered queue's
-- row is left as it is when $2 is a bound (ValidateKeyConcurrencyFor).
WITH q AS (SELECT name, ordered FROM {schema}.queues WHERE name = $1),
u AS (UPDATE {schema}.queues s SET key_concurrency = $2::int FROM q
      WHERE s.name = q.name AND NOT (q.ordered AND $2::int IS NOT NULL))
SELECT q.ordered FROM q
