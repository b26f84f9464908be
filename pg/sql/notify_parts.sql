-- One notice per part, with the lowest key the transaction added
-- there (Notice::from): "i:PART:PRIORITY:ID".
SELECT count(pg_notify($1, 'i:' || t.p || ':' || t.pr || ':' || t.id)) FROM unnest($2::int[], $3::int[], $4::bigint[]) AS t(p, pr, id)
