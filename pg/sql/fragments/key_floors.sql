-- The key floors of an ordered claim's part {part} (ClaimPart::key_floors)
-- as a FROM item {as}(key, id), from {floors}: a jsonb object with, per
-- part (its number as text), "keys", an object of key -> id, and "heads"
-- when the claim reads the keys' first items there from a cursor
-- (ClaimPart::key_heads). The keys in the byte order of items_key's
-- (COLLATE "C"), whatever the database's collation.
(SELECT f.key COLLATE "C" AS key, f.value::bigint AS id
 FROM jsonb_each_text(coalesce({floors} #> ARRAY[({part})::text, 'keys'], '{}')) f) {as}
