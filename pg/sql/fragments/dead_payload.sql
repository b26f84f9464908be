-- A dead item's payload size and its first $3 bytes (dead_list.sql).
octet_length(payload), substring(payload FROM 1 FOR $3)
