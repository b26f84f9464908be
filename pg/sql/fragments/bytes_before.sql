-- The payload bytes a claim read before this row (`r` or `c`, in the order
-- read): a claim keeps the rows read before it reached its byte bound
-- (ClaimRequest::max_bytes), so the row that reaches it is the last, and
-- the first is always kept. octet_length reads a stored value's size from
-- its header, without detoasting it.
sum(octet_length(payload)) OVER (ROWS UNBOUNDED PRECEDING) - octet_length(payload) AS bytes_before
