-- A transaction that reads the queue row in one statement and writes
-- items in a later one (EnqueueBatch, IngestKafka) runs this first:
-- DeleteQueue's SHARE lock on items then either waits for it to end or
-- makes it wait before it reads the queue row, never between the read
-- and the write (which would leave items in a deleted queue, to turn
-- up again in a queue created later under the same name).
LOCK TABLE {schema}.items IN ROW EXCLUSIVE MODE
