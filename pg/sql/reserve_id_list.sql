-- EnqueueBatch's ids when reserve_ids found them interleaved with another
-- session's: $1 ids one by one.
SELECT nextval('{schema}.items_id_seq') FROM generate_series(1, $1::int)
