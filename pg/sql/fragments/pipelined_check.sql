-- The pipelined ack's check: true when every fenced part was held and
-- every id was deleted, else finish_refused() (migration 5) fails the
-- statement, and with it its COMMIT.
SELECT CASE
  WHEN (SELECT count(*) FROM f) = cardinality($3::int[])
       AND (SELECT array_agg(id ORDER BY id) FROM done) = $5::bigint[] THEN true
  ELSE {schema}.finish_refused((SELECT count(*) FROM f), cardinality($3::int[]),
                               (SELECT count(*) FROM done WHERE id = ANY($5::bigint[])),
                               cardinality($5::bigint[]))
  END AS ok
