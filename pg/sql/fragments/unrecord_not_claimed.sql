-- unrecord.sql's condition in a statement that also claims: the parts the
-- claim takes from are left to it.
    AND c.part NOT IN (SELECT part FROM pick)
