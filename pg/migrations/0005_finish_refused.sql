-- Migration 5: finish_refused(): the pipelined ack's refusal
--
-- The pipelined ack: the hot path of Finish sends its ack
-- statement and the COMMIT in one flight (pg_connection.h), so the
-- statement itself must fail when the fence or a count is off, which
-- makes the server skip the COMMIT. finish_refused() is that failure, with
-- its own SQLSTATE (PQ001) so PgStore can tell it from any other error;
-- it is called only then.

CREATE FUNCTION {schema}.finish_refused(held bigint, wanted int, acked bigint, expected int)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'PQ001',
    MESSAGE = format('partq: finish refused: %s of %s parts held at their epochs, %s of %s items '
                     'still there', held, wanted, acked, expected);
END
$$;
