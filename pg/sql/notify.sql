-- NotifyParts of one notice (Tx::Notify): $1 channel, $2 payload.
SELECT pg_notify($1, $2)
