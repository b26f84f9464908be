-- The function a claim drops its parts' old records with (claim_ctes.sql),
-- for a role that may delete from part_claims (migration 33).
drop_claim_records
