-- The function a claim drops its parts' old records with (claim_ctes.sql),
-- for a confined worker: the same, of its queues only (migration 39).
drop_claim_records_of_mine
