-- Migration 4: claims in memory: part_claims, abandoned_epoch, items fillfactor 100
--
-- Claims in memory: a claim no longer writes the item row
-- (store.h, "Claims"), so items get the default fillfactor back (the room
-- kept for the claim's HOT update only spread a part over twice the pages
-- and doubled the full-page images a drain writes after a checkpoint).
-- claim_epoch becomes abandoned_epoch: set only on an item whose owner died
-- while it was in flight, which makes it a suspect (items_abandoned finds
-- them without reading the ready backlog; it holds only such rows).
-- Items claimed by older binaries when the migration runs are thereby
-- abandoned claims, which is what they are once those binaries stop.
-- part_claims holds one row per owned part: what its owner had in flight
-- at its last claim (made empty when a tenure starts, also for the parts
-- owned when the migration runs). No FK to queues or sessions: an FK check would lock the
-- queue row on every claim, and the row must outlive a session that dies
-- (its next owner reads it); DeleteQueue deletes the rows itself.
-- ack_items() is the ack's delete, in a function so that its plans are
-- made with enable_seqscan off (pg_store_sql.cc, AckCtes, says why).

ALTER TABLE {schema}.items RENAME COLUMN claim_epoch TO abandoned_epoch;
ALTER TABLE {schema}.items DROP COLUMN claimed_at;
ALTER TABLE {schema}.items SET (fillfactor = 100);
CREATE INDEX items_abandoned ON {schema}.items (queue, part, priority, id)
  WHERE abandoned_epoch IS NOT NULL;

CREATE TABLE {schema}.part_claims (
  queue         text COLLATE "C" NOT NULL,
  part          int NOT NULL,
  epoch         bigint NOT NULL,
  ids           bigint[] NOT NULL,
  claimed_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (queue, part)
) WITH (fillfactor = 50);
INSERT INTO {schema}.part_claims (queue, part, epoch, ids)
SELECT queue, part, epoch, '{}' FROM {schema}.session_parts;

CREATE FUNCTION {schema}.ack_items(tids tid[], ids bigint[])
RETURNS TABLE (acked_id bigint, acked_queue text, acked_dedup_key text)
LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
  n bigint;
BEGIN
  RETURN QUERY
    DELETE FROM {schema}.items i WHERE i.ctid = ANY(tids) AND i.id = ANY(ids)
    RETURNING i.id, i.queue::text, i.dedup_key::text;
  GET DIAGNOSTICS n = ROW_COUNT;
  IF n < cardinality(ids) THEN
    -- Not where the claim saw them (a table rewrite moves rows): by id. The
    -- rows deleted above are no longer visible to this statement.
    RETURN QUERY
      DELETE FROM {schema}.items i WHERE i.id = ANY(ids)
      RETURNING i.id, i.queue::text, i.dedup_key::text;
  END IF;
END
$$;
