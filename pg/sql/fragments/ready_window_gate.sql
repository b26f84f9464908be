-- When an onward read is windowed (ready_keyed.sql): an ordered claim
-- ({bound} 1) that reads on from a cursor, not from the head.
{bound}::int = 1 AND {after_id} <> -9223372036854775808
