-- A partq handler in PL/pgSQL: run it with
--   partq worker orders --handler 'sql:CALL handle_order($1, $2)'
-- The worker calls it once per item inside the transaction that acknowledges
-- the item, so the order row commits exactly when the item is acked: never
-- twice, even when a worker dies mid-batch. An exception fails the item: it
-- is retried, then dead-lettered with the exception's message.
--
-- Created in the first schema of search_path (psql -f handle.sql, or with
-- SET search_path first); the procedure keeps that search_path, so it finds
-- its table whatever the worker's connection uses.

CREATE TABLE IF NOT EXISTS orders (
  id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  item_id   bigint NOT NULL,  -- the partq item that made the row (no UNIQUE: partq is what
                              -- keeps it to one row per item)
  customer  text NOT NULL,
  amount    numeric(12, 2) NOT NULL,
  added_at  timestamptz NOT NULL DEFAULT now()
);

-- $1 is the item's id, $2 its payload: as a jsonb argument, PostgreSQL parses
-- the payload as JSON (a payload that is not JSON fails the item). receipt,
-- an INOUT parameter, is the row CALL returns: partq keeps its first column
-- as the item's result (`partq wait orders ITEM` prints it).
CREATE OR REPLACE PROCEDURE handle_order(item_id bigint, payload jsonb,
                                         INOUT receipt text DEFAULT NULL)
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
  IF jsonb_typeof(payload -> 'customer') IS DISTINCT FROM 'string'
     OR jsonb_typeof(payload -> 'amount') IS DISTINCT FROM 'number' THEN
    RAISE EXCEPTION 'bad order %: needs a "customer" string and an "amount" number', item_id;
  END IF;
  INSERT INTO orders (item_id, customer, amount)
  VALUES (item_id, payload ->> 'customer', (payload ->> 'amount')::numeric);
  receipt := format('order of %s for %s', payload ->> 'amount', payload ->> 'customer');
END
$$;
