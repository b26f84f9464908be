-- Migration 9: part_claims: a new row per claim, the old one deleted, never updated
--
-- Claim records that are never updated: a claim replaced its
-- part's record by an UPDATE, a new version of one row on every batch.
-- While a snapshot held the vacuum horizon, none of those versions could
-- be pruned, and every read of the record walked them all (3.7 ms and 470
-- buffers a minute into a hold at 20k items/s, growing by the minute). Now
-- a claim deletes the part's latest record (found from the end of the
-- primary key (queue, part, seq): the newest entry is the live row) and
-- inserts the new one; the DELETE is the guard an UPDATE was (a session
-- whose epoch is older than the record's finds nothing to replace, and
-- writes nothing). The dead rows stay until vacuum, but nobody walks
-- them. A retry or a dead item still updates the latest row in place (a
-- short chain on a row that is replaced at the next claim). A takeover and
-- a release read and delete all of a part's records (rare; a stale owner
-- racing a takeover can leave one at its old epoch, which the next takeover
-- or release removes).

CREATE SEQUENCE {schema}.claim_seq;
ALTER TABLE {schema}.part_claims ADD COLUMN seq bigint;
UPDATE {schema}.part_claims SET seq = nextval('{schema}.claim_seq');
ALTER TABLE {schema}.part_claims
  ALTER COLUMN seq SET NOT NULL,
  ALTER COLUMN seq SET DEFAULT nextval('{schema}.claim_seq'),
  DROP CONSTRAINT part_claims_pkey,
  ADD PRIMARY KEY (queue, part, seq),
  SET (fillfactor = 100);
