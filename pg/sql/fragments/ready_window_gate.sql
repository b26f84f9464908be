-- When an onward read is windowed (ready_keyed.sql): an ordered claim
-- ({bound} 1), whether it reads on from a cursor or from the head.
{bound}::int = 1
